//! Run sandgym environments as WebAssembly components in wasmtime.
//!
//! A [`Sandbox`] owns one wasmtime engine configured for sandgym guests: component model,
//! pooled instances, an epoch ticker (or fuel) for CPU limits, and a disk cache of compiled
//! guests. [`Sandbox::load`] turns guest bytes (built with `sandgym_guest::export_env!`) into a
//! linked [`Guest`]; [`Guest::instantiate`] gives a [`WasmEnv`], which implements
//! [`Env`](sandgym_env_api::Env) so nothing above it knows the env is sandboxed.
//!
//! ```
//! use sandgym_env_api::{Action, Env, ResetOptions};
//! use sandgym_sandbox::Sandbox;
//! use serde_json::json;
//!
//! let guest = Sandbox::shared()?.load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)?;
//! let mut env = guest.instantiate(&Default::default())?;
//! env.reset(1, &ResetOptions::default())?;
//! let obs = env.step(&Action::tool("guess", json!({"number": 50})))?;
//! assert!(["higher", "lower", "correct"].contains(&obs.content.as_str()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Isolation and limits
//! Guests get WASI with nothing granted: no files, sockets, environment variables or
//! arguments; clocks are frozen and OS randomness is a fixed stream, so an episode depends on
//! its seed alone. Time is virtual: a sleep or a clock subscription is ready at once, so no
//! WASI call can block the host. Each call into a guest runs under the [`Limits`]: CPU (epoch
//! deadline measured against the clock, or fuel), memory and tables (a store limiter), stack,
//! live handles, and output size (bounding the copy out of the guest itself). Every way a guest can
//! fail is a typed [`SandboxError`] that ends only that episode; the next reset gets a fresh
//! instance.
//!
//! # Reward plugins
//! [`Sandbox::load_reward`] loads a reward component (built with
//! `sandgym_reward_guest::export_reward!`); each [`WasmReward`] instance is a
//! [`RewardFn`](sandgym_env_api::RewardFn) whose calls run under the same limits, so a reward
//! design can be swapped without touching the env, and the agent cannot reach it.
//!
//! # Snapshots and faults
//! `snapshot`/`restore` go through the guest's own serialisation, so an episode can be forked
//! into a fresh instance and continue bit-identically. [`FaultInjection`] wraps any env (WASM
//! or native) and injects tool faults from a [`FaultConfig`].
#![deny(missing_docs)]

mod bindings;
mod cache;
mod clock;
mod config;
mod error;
mod host;
mod reward_plugin;
mod sandbox;
mod tail;
mod wasm_env;

pub use config::{CpuLimit, INIT_CPU_FACTOR, Limits, SandboxConfig};
pub use error::{Result, SandboxError};
pub use reward_plugin::{RewardGuest, WasmReward};
pub use sandbox::{Guest, Sandbox};
/// Fault injection lives in the env contract (it wraps any env, native or WASM); re-exported
/// here where sandboxed runs configure it.
pub use sandgym_env_api::{FaultConfig, FaultInjection, FaultKind, FaultRule};
pub use wasm_env::WasmEnv;
