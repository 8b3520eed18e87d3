//! Export a reward term as a WebAssembly component that the sandgym sandbox runs beside any
//! env: a reward plugin (`--reward rubric.wasm`, or `{"term": "plugin", "path": …}` in a
//! composed reward).
//!
//! A plugin crate is a `cdylib` built for `wasm32-wasip2` that implements [`RewardPlugin`] and
//! exports its constructor:
//!
//! ```ignore
//! use sandgym_reward_guest::{RewardPlugin, Score};
//! struct Brevity;
//! impl RewardPlugin for Brevity {
//!     fn name(&self) -> String { "brevity".into() }
//!     fn range(&self) -> (f64, f64) { (-1.0, 0.0) }
//!     fn score(&mut self, episode: &[StepRecord], _info: &Map<String, Value>) -> Result<Score, String> {
//!         Ok(Score::new(-(episode.len() as f64 / 10.0).min(1.0)))
//!     }
//! }
//! sandgym_reward_guest::export_reward!(|_config| Ok::<_, String>(Brevity));
//! ```
//!
//! Everything crosses the boundary in the format of `envs/wit/reward.wit`: the episode so far
//! as Agent Template records (JSON), the step's info, and back a score with its parts. The
//! host checks every score (finite, within [`range`](RewardPlugin::range)) and runs each call
//! under the sandbox's CPU and memory limits, so a plugin that loops, traps or returns NaN
//! ends the episode with a typed error instead of rewarding it. Inside, as in an env guest,
//! there is no filesystem, network, environment or wall clock.
#![deny(missing_docs)]

use serde_json::{Map, Value};

pub use sandgym_env_api::StepRecord;

/// The bindings generated from `envs/wit/reward.wit`.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "reward-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_reward_plugin",
        default_bindings_module: "::sandgym_reward_guest::bindings",
    });
}

pub use bindings::exports::sandgym::env::reward::{Guest, Part, StepScore as WitScore};

/// What a step is worth: the reward and, for the breakdown, its named parts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    /// The reward: finite and within the plugin's [`range`](RewardPlugin::range).
    pub reward: f64,
    /// Named parts (informational: they need not sum to `reward`).
    pub parts: Vec<(String, f64)>,
}

impl Score {
    /// A score without parts.
    pub fn new(reward: f64) -> Self {
        Self {
            reward,
            parts: Vec::new(),
        }
    }

    /// The same score with one more part.
    pub fn with_part(mut self, name: impl Into<String>, value: f64) -> Self {
        self.parts.push((name.into(), value));
        self
    }
}

/// A reward term that runs as a plugin. One value is made per sandboxed instance (per env
/// instance on the host), from the term's configuration object.
pub trait RewardPlugin {
    /// The term's name in the breakdown.
    fn name(&self) -> String;

    /// The least and the most [`score`](Self::score) returns (the host rejects a score
    /// outside it, so the env's declared reward range stays true).
    fn range(&self) -> (f64, f64);

    /// A new episode starts (terms that keep state per episode start over).
    fn reset(&mut self) {}

    /// The score of the last step of `episode` (the records so far; the last one's `done` is
    /// set when the episode ended with it, its `reward` is the env's own). `info` is that
    /// step's observation info. An error ends the episode with its message.
    fn score(&mut self, episode: &[StepRecord], info: &Map<String, Value>)
    -> Result<Score, String>;
}

/// Exports a reward plugin's constructor as the component's `reward` interface. The argument
/// is a function from the configuration object (`&serde_json::Map`) to `Result<impl
/// RewardPlugin, impl Display>`. See the crate docs.
#[macro_export]
macro_rules! export_reward {
    ($make:expr) => {
        // Only a WebAssembly build exports the interface (see `sandgym_guest::export_env!`).
        #[cfg(target_family = "wasm")]
        struct __SandgymRewardPlugin;

        #[cfg(target_family = "wasm")]
        impl $crate::Guest for __SandgymRewardPlugin {
            fn init(config: String) -> ::core::result::Result<(), String> {
                $crate::__private::init(&config, |c| {
                    ($make)(c)
                        .map(|p| Box::new(p) as Box<dyn $crate::RewardPlugin>)
                        .map_err(|e| e.to_string())
                })
            }
            fn name() -> String {
                $crate::__private::name()
            }
            fn range() -> (f64, f64) {
                $crate::__private::range()
            }
            fn reset() {
                $crate::__private::reset()
            }
            fn score(
                episode: String,
                info: String,
            ) -> ::core::result::Result<$crate::WitScore, String> {
                $crate::__private::score(&episode, &info)
            }
        }

        #[cfg(target_family = "wasm")]
        $crate::bindings::__export_reward_plugin!(__SandgymRewardPlugin with_types_in $crate::bindings);
    };
}

#[doc(hidden)]
pub mod __private {
    //! The guest side of the interface; used by [`export_reward!`](crate::export_reward).

    use std::cell::RefCell;

    use serde_json::{Map, Value};

    use crate::{Part, RewardPlugin, StepRecord, WitScore};

    thread_local! {
        static PLUGIN: RefCell<Option<Box<dyn RewardPlugin>>> = const { RefCell::new(None) };
    }

    fn with_plugin<T>(f: impl FnOnce(&mut dyn RewardPlugin) -> T) -> T {
        PLUGIN.with(|cell| {
            let mut plugin = cell.borrow_mut();
            let plugin = plugin
                .as_deref_mut()
                .expect("sandgym reward plugin used before init (a host bug)");
            f(plugin)
        })
    }

    /// `init`.
    pub fn init(
        config: &str,
        make: impl FnOnce(&Map<String, Value>) -> Result<Box<dyn RewardPlugin>, String>,
    ) -> Result<(), String> {
        let config: Map<String, Value> = if config.trim().is_empty() {
            Map::new()
        } else {
            serde_json::from_str(config)
                .map_err(|e| format!("the plugin configuration is not a JSON object: {e}"))?
        };
        let plugin = make(&config)?;
        PLUGIN.with(|cell| *cell.borrow_mut() = Some(plugin));
        Ok(())
    }

    /// `name`.
    pub fn name() -> String {
        with_plugin(|p| p.name())
    }

    /// `range`.
    pub fn range() -> (f64, f64) {
        with_plugin(|p| p.range())
    }

    /// `reset`.
    pub fn reset() {
        with_plugin(|p| p.reset())
    }

    /// `score`.
    pub fn score(episode: &str, info: &str) -> Result<WitScore, String> {
        let episode: Vec<StepRecord> = serde_json::from_str(episode)
            .map_err(|e| format!("the episode is not Agent Template records: {e}"))?;
        let info: Map<String, Value> = serde_json::from_str(info)
            .map_err(|e| format!("the step's info is not a JSON object: {e}"))?;
        let score = with_plugin(|p| p.score(&episode, &info))?;
        Ok(WitScore {
            reward: score.reward,
            parts: score
                .parts
                .into_iter()
                .map(|(name, value)| Part { name, value })
                .collect(),
        })
    }
}
