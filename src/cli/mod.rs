//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod envs;
pub mod eval;
pub mod run;
pub mod sft;
pub mod train;
