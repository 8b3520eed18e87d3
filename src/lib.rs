//! sandgym: turn LLM-agent harnesses into sandboxed gymnasium-style environments and train
//! policies on them.
//!
//! This crate holds the `sandgym` command-line tool and re-exports the workspace's libraries
//! under one roof. The Env contract lives in [`env_api`] (`sandgym-env-api`).
//!
//! ```
//! sandgym::register_builtin_envs();
//! let env = sandgym::env_api::make("guess-number-v0")?;
//! assert_eq!(env.spec().tools[0].name, "guess");
//! # Ok::<(), sandgym::env_api::EnvError>(())
//! ```
#![deny(missing_docs)]

pub use sandgym_env_api as env_api;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Registers every env bundled with sandgym in the process-wide registry, so that
/// [`env_api::make`] finds them by id. Calling it again is harmless.
pub fn register_builtin_envs() {
    env_api::toy::GuessNumber::register();
}
