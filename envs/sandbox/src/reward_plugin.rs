//! Reward plugins: reward terms that run as sandboxed components (`envs/wit/reward.wit`), in
//! the same engine and under the same limits as env guests, each instance in a store of its
//! own.

use std::sync::Arc;

use serde_json::{Map, Value};
use wasmtime::Store;

use sandgym_env_api::{EnvError, RewardFn, StepView};

use crate::bindings::reward::{RewardPlugin, RewardPluginPre, StepScore};
use crate::host::HostState;
use crate::wasm_env::{arm, call_under, classify, new_store};
use crate::{Result, Sandbox, SandboxError};

/// Longest name a plugin may give itself.
const MAX_NAME: usize = 64;
/// How far past its declared range a score may be and still count as in it (rounding).
const RANGE_SLACK: f64 = 1e-9;

/// A compiled, linked reward plugin, ready to instantiate (cheap to clone).
///
/// ```
/// use sandgym_sandbox::Sandbox;
/// let plugin = Sandbox::shared()?.load_reward(sandgym_guest_artifacts::RUBRIC.wasm)?;
/// let term = plugin.instantiate(&Default::default())?;
/// use sandgym_env_api::RewardFn;
/// assert_eq!(term.name(), "rubric");
/// # Ok::<(), sandgym_sandbox::SandboxError>(())
/// ```
#[derive(Clone)]
pub struct RewardGuest {
    inner: Arc<RewardGuestInner>,
}

struct RewardGuestInner {
    sandbox: Sandbox,
    pre: RewardPluginPre<HostState>,
}

impl std::fmt::Debug for RewardGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewardGuest").finish_non_exhaustive()
    }
}

impl RewardGuest {
    pub(crate) fn new(sandbox: Sandbox, pre: RewardPluginPre<HostState>) -> Self {
        Self {
            inner: Arc::new(RewardGuestInner { sandbox, pre }),
        }
    }

    /// A new instance of the plugin, made with `config` (passed to its constructor). A
    /// plugin that refuses its configuration, or declares an empty or oversized name or a
    /// range that is not finite and ordered, is an error.
    pub fn instantiate(&self, config: &Map<String, Value>) -> Result<WasmReward> {
        let mut plugin = WasmReward {
            guest: self.clone(),
            config: serde_json::to_string(config).expect("a JSON map serialises"),
            instance: None,
            name: String::new(),
            range: (0.0, 0.0),
            parts: Vec::new(),
        };
        plugin.instance = Some(plugin.new_instance()?);
        let name = plugin.call(|s, p| p.sandgym_env_reward().call_name(s))?;
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c);
        if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(valid) {
            return Err(SandboxError::InvalidOutput {
                reason: format!(
                    "the plugin's name {:?} is not 1 to {MAX_NAME} characters of a-z, 0-9, - and _",
                    name.chars().take(MAX_NAME + 1).collect::<String>()
                ),
            });
        }
        let (lo, hi) = plugin.call(|s, p| p.sandgym_env_reward().call_range(s))?;
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(SandboxError::InvalidOutput {
                reason: format!("plugin {name}: its range [{lo}, {hi}] is not finite and ordered"),
            });
        }
        plugin.name = name;
        plugin.range = (lo, hi);
        Ok(plugin)
    }
}

struct Instance {
    store: Store<HostState>,
    bindings: RewardPlugin,
}

/// A reward plugin instance: a [`RewardFn`] whose every call runs in the sandbox.
///
/// Each call runs under the sandbox's per-call CPU budget, its memory limit and its bound on
/// what a call may return. A plugin that traps, runs out of time or memory, returns an
/// error, or scores outside the range it declared fails the step with
/// [`EnvError::RewardFailed`]; a NaN or infinite score fails it with
/// [`EnvError::InvalidReward`]. Either ends the episode; a faulted instance is discarded and
/// the next reset makes a fresh one.
pub struct WasmReward {
    guest: RewardGuest,
    config: String,
    instance: Option<Instance>,
    name: String,
    range: (f64, f64),
    parts: Vec<(String, f64)>,
}

impl std::fmt::Debug for WasmReward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmReward")
            .field("name", &self.name)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

impl WasmReward {
    /// The range the plugin declared for its scores.
    pub fn declared_range(&self) -> (f64, f64) {
        self.range
    }

    fn new_instance(&self) -> Result<Instance> {
        let limits = &self.guest.inner.sandbox.config().limits;
        let mut store = new_store(self.guest.inner.sandbox.engine(), limits);
        let init_cpu = limits.init_budget();
        let init_limits = crate::Limits {
            cpu: init_cpu,
            ..limits.clone()
        };
        arm(&mut store, init_cpu).map_err(SandboxError::Instantiate)?;
        let bindings = self
            .guest
            .inner
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(e, &store, &init_limits))?;
        arm(&mut store, init_cpu).map_err(SandboxError::Instantiate)?;
        let init = bindings
            .sandgym_env_reward()
            .call_init(&mut store, &self.config)
            .map_err(|e| classify(e, &store, &init_limits))?;
        if let Err(refused) = init {
            return Err(SandboxError::Init(EnvError::InvalidConfig {
                reason: format!(
                    "the reward plugin refused its configuration: {}",
                    cut(&refused)
                ),
            }));
        }
        Ok(Instance { store, bindings })
    }

    /// One call into the plugin under the limits; a fault discards the instance.
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Store<HostState>, &RewardPlugin) -> wasmtime::Result<T>,
    ) -> Result<T> {
        let limits = self.guest.inner.sandbox.config().limits.clone();
        let Some(instance) = self.instance.as_mut() else {
            return Err(SandboxError::Poisoned {
                reason: "the plugin faulted earlier in this episode".into(),
            });
        };
        let bindings = &instance.bindings;
        call_under(&mut instance.store, &limits, |s| f(s, bindings)).inspect_err(|_| {
            self.instance = None;
        })
    }

    fn failed(&self, reason: impl Into<String>) -> EnvError {
        EnvError::RewardFailed {
            term: self.name.clone(),
            reason: reason.into(),
        }
    }

    fn check(&self, score: StepScore) -> sandgym_env_api::Result<(f64, Vec<(String, f64)>)> {
        let StepScore { reward, parts } = score;
        if !reward.is_finite() {
            return Err(EnvError::InvalidReward {
                term: self.name.clone(),
                value: reward.to_string(),
            });
        }
        let (lo, hi) = self.range;
        if reward < lo - RANGE_SLACK || reward > hi + RANGE_SLACK {
            return Err(self.failed(format!(
                "it scored {reward}, outside the range [{lo}, {hi}] it declared"
            )));
        }
        Ok((
            reward,
            parts.into_iter().map(|p| (p.name, p.value)).collect(),
        ))
    }
}

/// An error message from the plugin, cut to a readable length.
fn cut(message: &str) -> String {
    const MAX: usize = 1000;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

impl RewardFn for WasmReward {
    fn name(&self) -> &str {
        &self.name
    }

    fn reward(&mut self, step: &StepView<'_>) -> sandgym_env_api::Result<f64> {
        self.parts.clear();
        let episode = serde_json::to_string(step.episode).expect("records serialise");
        let info = serde_json::to_string(&step.observation.info).expect("a JSON map serialises");
        let scored = self
            .call(|s, p| p.sandgym_env_reward().call_score(s, &episode, &info))
            .map_err(|e| self.failed(e.to_string()))?;
        let score = scored.map_err(|message| self.failed(cut(&message)))?;
        let (reward, parts) = self.check(score)?;
        self.parts = parts;
        Ok(reward)
    }

    fn range(&self, _env_range: (f64, f64)) -> (f64, f64) {
        self.range
    }

    fn parts(&self) -> Vec<(String, f64)> {
        self.parts.clone()
    }

    fn reset(&mut self) -> sandgym_env_api::Result<()> {
        self.parts.clear();
        if self.instance.is_none() {
            let instance = self
                .new_instance()
                .map_err(|e| self.failed(e.to_string()))?;
            self.instance = Some(instance);
        }
        self.call(|s, p| p.sandgym_env_reward().call_reset(s))
            .map_err(|e| self.failed(e.to_string()))
    }
}
