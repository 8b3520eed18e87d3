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

pub mod approach;
pub mod bench;
pub mod chat_agent;
mod compare_stages;
pub mod comparison;
pub mod env_source;
pub mod evaluation;
pub mod harness_eval;
pub mod harness_runner;
pub mod labels;
pub mod model_source;
pub mod narrowing;
pub mod online;
pub mod play;
pub mod progress;
pub mod proxy_sft;
pub mod registry;
pub mod replay;
pub mod reward_plugins;
pub mod run_meta;
pub mod service;
pub mod table;
pub mod target;
pub mod teacher;
pub mod training;
pub mod view;

pub use env_source::EnvSource;
pub use model_source::ModelSource;
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

use env_api::BoxEnv;
use sandgym_guest_artifacts::Guest;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Where an env runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Builds an env from what `--env` names ([`EnvSource`]): a registered id natively or in the
/// shared [`sandbox::Sandbox`], a guest component file (a `.wasm` path) in the sandbox, made
/// with `config`, or a remote env served over OpenEnv's protocol (`ws://host:port`,
/// `http://host:port`: one session per env).
pub fn make_env(
    env: impl Into<EnvSource>,
    backend: Backend,
    config: &Map<String, Value>,
) -> env_api::Result<BoxEnv> {
    register_builtin_envs();
    env.into().make(backend, config)
}

/// Text for training a tokenizer: tool lists, instructions, observations and the canonical
/// actions of `episodes` scripted-baseline episodes per bundled env (train split).
pub fn env_corpus(episodes: u64) -> anyhow::Result<Vec<String>> {
    use env_api::{ResetOptions, Split};
    let mut lines = Vec::new();
    for id in ["sql-agent-v0", "customer-service-v0"] {
        let env = make_env(id, Backend::Native, &Map::new())?;
        lines.push(policy::tool_list(&env.spec().tools));
        let played = play::play_env(env, 0..episodes, &ResetOptions::split(Split::Train), |_| {
            registry::baseline(id).ok_or_else(|| anyhow::anyhow!("{id} has no baseline"))
        })?;
        for r in played.into_iter().flat_map(|e| e.trajectory.records) {
            if let Some(a) = r.to_action() {
                lines.push(policy::canonical_json(&a));
            }
            lines.push(r.instruction);
            lines.push(r.observation);
        }
    }
    Ok(lines)
}
