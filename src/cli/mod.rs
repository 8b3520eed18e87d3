//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod compare;
pub mod env_args;
pub mod envs;
pub mod eval;
pub mod learn;
pub mod model;
pub mod new;
pub mod proxy;
pub mod run;
pub mod serve;
pub mod serve_env;
pub mod sft;
pub mod train;
pub mod view;
