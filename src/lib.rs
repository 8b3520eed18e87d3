//! sandgym: turn LLM-agent harnesses into sandboxed gymnasium-style environments and train
//! policies on them.
//!
//! This crate holds the `sandgym` command-line tool and puts the workspace's libraries under
//! one roof: the Env contract is [`env_api`] (`sandgym-env-api`), the WebAssembly sandbox is
//! [`sandbox`] (`sandgym-sandbox`). [`make_env`] builds any bundled env natively or sandboxed.
//!
//! ```
//! use sandgym::{Backend, make_env};
//! let native = make_env("guess-number-v0", Backend::Native, &Default::default())?;
//! let wasm = make_env("guess-number-v0", Backend::Wasm, &Default::default())?;
//! assert_eq!(native.spec(), wasm.spec());
//! # Ok::<(), sandgym::env_api::EnvError>(())
//! ```
#![deny(missing_docs)]

use serde_json::{Map, Value};

pub mod agents;
pub mod approach;
pub mod chat_agent;
pub mod comparison;
pub mod evaluation;
pub mod labels;
pub mod narrowing;
pub mod online;
pub mod progress;
pub mod registry;
pub mod replay;
pub mod reward_plugins;
pub mod run_meta;
pub mod service;
pub mod table;
pub mod target;
pub mod training;
pub mod view;

pub use run_meta::{EpisodeSource, RunMeta};
pub use target::EnvTarget;

pub use sandgym_chat_api as chat_api;
pub use sandgym_env_api as env_api;
pub use sandgym_harnesses as harnesses;
pub use sandgym_openenv as openenv;
pub use sandgym_policy as policy;
pub use sandgym_proxy as proxy;
pub use sandgym_sandbox as sandbox;
pub use sandgym_trainer as trainer;

use env_api::{BoxEnv, EnvError};
use sandgym_guest_artifacts::Guest;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Where an env runs.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// In this process, as ordinary Rust.
    Native,
    /// In a wasmtime sandbox, as a WebAssembly component.
    #[default]
    Wasm,
}

/// Registers every env bundled with sandgym in the process-wide registry (native builds), so
/// that [`env_api::make`] finds them by id. Calling it again is harmless.
pub fn register_builtin_envs() {
    for bundled in registry::BUNDLED {
        (bundled.register)();
    }
}

/// The embedded WebAssembly guest of a bundled env id (`name-vN` or a bare name).
pub fn bundled_guest(id: &str) -> Option<Guest> {
    registry::bundled(id).and_then(|b| Guest::find(b.guest))
}

/// How long a remote env may take to answer one request.
pub const REMOTE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Builds an env: a registered id natively or in the shared [`sandbox::Sandbox`], a guest
/// component file (a `.wasm` path) in the sandbox, made with `config`, or a remote env served
/// over OpenEnv's protocol (`ws://host:port`, `http://host:port`: one session per env).
pub fn make_env(
    id: &str,
    backend: Backend,
    config: &Map<String, Value>,
) -> env_api::Result<BoxEnv> {
    register_builtin_envs();
    if openenv::is_remote(id) {
        if !config.is_empty() {
            return Err(EnvError::InvalidConfig {
                reason: format!("{id} is a remote env: configure it where it is served"),
            });
        }
        let env = openenv::RemoteEnv::connect(id, REMOTE_TIMEOUT)?;
        return Ok(Box::new(env));
    }
    if target::is_guest_file(id) {
        if backend == Backend::Native {
            return Err(EnvError::InvalidConfig {
                reason: format!("{id} is a guest component: it runs only in the sandbox"),
            });
        }
        let guest = sandbox::Sandbox::shared()?.load_file(std::path::Path::new(id))?;
        return Ok(Box::new(guest.instantiate(config)?));
    }
    match backend {
        Backend::Native => env_api::make_with(id, config),
        Backend::Wasm => {
            let registration = env_api::lookup(id)?;
            let guest = bundled_guest(&registration.id.to_string()).ok_or_else(|| {
                EnvError::InvalidConfig {
                    reason: format!("{} has no WebAssembly build", registration.id),
                }
            })?;
            let env = sandbox::Sandbox::shared()?
                .load(guest.wasm)?
                .instantiate(config)?;
            Ok(Box::new(env))
        }
    }
}

/// Text for training a tokenizer: tool lists, instructions, observations and the canonical
/// actions of `episodes` scripted-baseline episodes per bundled env (train split).
pub fn env_corpus(episodes: u64) -> env_api::Result<Vec<String>> {
    use env_api::{Env, RecordTrajectory, ResetOptions, Split};
    let mut lines = Vec::new();
    for id in ["sql-agent-v0", "customer-service-v0"] {
        let mut env = RecordTrajectory::new(make_env(id, Backend::Native, &Map::new())?);
        lines.push(policy::tool_list(&env.spec().tools));
        for seed in 0..episodes {
            let mut agent = agents::baseline(id).expect("bundled envs have baselines");
            let mut obs = env.reset(seed, &ResetOptions::split(Split::Train))?;
            for _ in 0..env.spec().max_episode_steps.unwrap_or(16) {
                if env.done().is_done() {
                    break;
                }
                obs = env.step(&agent.act(&obs))?;
            }
            for r in env.take_trajectory().records {
                if let Some(a) = r.to_action() {
                    lines.push(policy::canonical_json(&a));
                }
                lines.push(r.instruction);
                lines.push(r.observation);
            }
        }
    }
    Ok(lines)
}
