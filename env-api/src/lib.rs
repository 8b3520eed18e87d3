//! The sandgym Env contract: gymnasium-style environments for LLM agents.
//!
//! An [`Env`] is one agent task at a time. [`Env::reset`] starts an episode from a seed and
//! returns the instruction as an [`Observation`]; [`Env::step`] takes one Agent Template turn —
//! an [`Action`] that is either a [`ToolCall`] or a final response — and returns what the agent
//! sees next; [`Env::reward`] and [`Env::done`] say how the step went. Tools are declared as
//! [`ToolSpec`]s with JSON-schema parameters ([`Schema`]) and every action is checked against
//! them ([`validate_action`]) before the env acts, so a bad action is a typed [`EnvError`] that
//! the agent reads, not a crash. Finished turns become [`StepRecord`]s, and episodes
//! [`Trajectory`]s that export as JSONL or OpenAI chat messages.
//!
//! Around that core: a [`Registry`] of versioned ids ([`make`]`("sql-agent-v0")`), the
//! wrappers [`TimeLimit`], [`RecordTrajectory`] and [`FaultInjection`] (tool faults from a
//! [`FaultConfig`], for training agents that cope with flaky tools), [`VecEnv`] for many envs
//! on worker threads (feature `vec`), and [`check_env`], which verifies that an env keeps the
//! contract. Agents ([`Agent`]: scripted baselines, demonstrators, [`RandomAgent`]) play
//! episodes through one runner, [`play`]; an env crate describes itself to the `sandgym` tool
//! with one [`EnvPackage`].
//!
//! # Example: a new env
//! ```
//! use sandgym_env_api::*;
//! use serde_json::json;
//!
//! /// Say the secret word; the word is drawn from the seed.
//! struct Password { spec: EnvSpec, word: String, last: Observation, reward: f64, done: Done }
//!
//! impl Password {
//!     fn new() -> Self {
//!         let spec = EnvSpec::new(EnvId::new("password", 0).unwrap()).with_tool(
//!             ToolSpec::new("hint", "Reveal the first letters of the word.").with_parameters(
//!                 Schema::object().property("letters", Schema::integer().with_range(1.0, 3.0), true),
//!             ),
//!         );
//!         Self { spec, word: String::new(), last: Observation::default(), reward: 0.0, done: Done::Running }
//!     }
//! }
//!
//! impl Env for Password {
//!     fn spec(&self) -> &EnvSpec { &self.spec }
//!     fn reset(&mut self, seed: u64, _: &ResetOptions) -> Result<Observation> {
//!         self.word = SplitMix64::new(seed).choose(&["apple", "pear", "plum"]).to_string();
//!         (self.reward, self.done) = (0.0, Done::Running);
//!         self.last = Observation::new("Answer with the secret word. You may ask for a hint.");
//!         Ok(self.last.clone())
//!     }
//!     fn observe(&self) -> Observation { self.last.clone() }
//!     fn step(&mut self, action: &Action) -> Result<Observation> {
//!         if self.done.is_done() { return Err(EnvError::EpisodeOver { done: self.done }); }
//!         validate_action(&self.spec.tools, action)?;
//!         self.last = match &action.body {
//!             ActionBody::ToolCall(call) => {
//!                 let n = call.parameters["letters"].as_u64().unwrap() as usize;
//!                 Observation::new(self.word.chars().take(n).collect::<String>())
//!             }
//!             ActionBody::Response(answer) => {
//!                 self.done = Done::Terminated;
//!                 self.reward = if *answer == self.word { 1.0 } else { 0.0 };
//!                 Observation::new("Thanks.")
//!             }
//!         };
//!         Ok(self.last.clone())
//!     }
//!     fn reward(&self) -> f64 { self.reward }
//!     fn done(&self) -> Done { self.done }
//! }
//!
//! let mut env = Password::new();
//! env.reset(1, &ResetOptions::default())?;
//! env.step(&Action::tool("hint", json!({"letters": 2})))?;
//! assert!(check_env(&mut env).is_ok());
//! # Ok::<(), EnvError>(())
//! ```
//!
//! # Seeding
//! All randomness of an episode comes from the reset seed ([`SplitMix64`] is a portable
//! generator for that): same seed, options and actions ⇒ same episode, natively and in
//! WebAssembly. A seed with no task in the [`ResetOptions`] also picks the task.
//!
//! # Features
//! - `vec`: [`VecEnv`] (worker threads over `std::sync::mpsc`). The crate depends only on
//!   serde, serde_json and thiserror either way; without `vec` it builds for `wasm32-wasip2`.
#![deny(missing_docs)]

mod action;
mod agent;
mod checker;
mod env;
mod error;
mod faults;
mod narrowing;
mod observation;
mod outcome;
mod package;
mod panic;
mod play;
mod random_agent;
mod record;
mod registry;
pub mod reward;
mod rng;
mod schema;
mod spec;
mod tool;
pub mod toy;
mod trajectory;
#[cfg(feature = "vec")]
mod vec_env;
mod wire;
mod wrappers;

pub use action::{Action, ActionBody, ToolCall};
pub use agent::{Agent, Demonstration};
pub use checker::{CheckOptions, CheckReport, Finding, check_env, check_env_with};
pub use env::{Env, ResetOptions, Split};
pub use error::{EnvError, ErrorKind, Result};
pub use faults::{FaultConfig, FaultInjection, FaultKind, FaultRule, MAX_LATENCY_MS};
pub use narrowing::{Narrowing, TOOL_SCHEMAS};
pub use observation::{Done, Observation, RESPONSE_SCHEMA};
pub use outcome::{SUCCESS, episode_success};
pub use package::{EnvPackage, MakeDemonstrator, Preset, PresetAlgos, PresetModels};
pub use play::{DEFAULT_MAX_STEPS, PlayedEpisode, play};
pub use random_agent::RandomAgent;
pub use record::StepRecord;
pub use registry::{
    BoxEnv, EnvFactory, Registration, Registry, ReplicaConfig, lookup, make, make_with, register,
    registered, set_replica_config,
};
pub use reward::{
    NoPlugins, PluginLoader, PluginTerm, REWARD_PARTS, REWARD_TERMS, Reward, RewardFn, RewardSpec,
    StepView, Term,
};
pub use rng::SplitMix64;
pub use schema::{EXAMPLE_BUDGET, Schema, SchemaType};
pub use spec::{EnvId, EnvSpec, TaskCounts};
pub use tool::{ToolSpec, begin_step, validate_action};
pub use trajectory::Trajectory;
#[cfg(feature = "vec")]
pub use vec_env::{AutoReset, Transition, VecEnv};
pub use wire::WireError;
pub use wrappers::{RecordTrajectory, TimeLimit};
