//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod envs;
pub mod run;
