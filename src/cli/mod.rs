//! One module per subcommand.

pub mod envs;
