//! Fault injection at the tool boundary, for training agents that cope with flaky tools.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Action, Done, Env, EnvError, EnvSpec, Observation, ResetOptions, Result, SplitMix64};

/// A kind of tool fault. Faults marked *blocking* stop the call before the tool runs (the env is
/// unchanged, as when a real call fails); the others let the tool run and damage or delay its
/// output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The output arrives late (reported in `info.fault_latency_ms`; slept only with
    /// [`FaultConfig::sleep`]).
    Latency,
    /// Blocking: an internal error (HTTP 500).
    ErrorResponse,
    /// Blocking: the call timed out.
    Timeout,
    /// The output is cut off.
    TruncatedOutput,
    /// The output arrives wrapped in broken JSON.
    MalformedJson,
    /// The output is empty.
    EmptyResult,
    /// Blocking: rate limited (HTTP 429) with a retry-after hint.
    RateLimited,
    /// The previous output of the same tool is returned again.
    StaleResult,
    /// The output is repeated.
    DuplicatedOutput,
    /// Blocking: the connection was reset.
    ConnectionReset,
    /// Blocking: the service is down for maintenance (HTTP 503).
    ServiceUnavailable,
    /// Blocking: a transient authorisation failure (HTTP 403).
    PermissionDenied,
    /// Some characters are garbled.
    CorruptedOutput,
    /// The first part arrives, then the stream breaks.
    PartialOutput,
    /// The lines of the output come in a shuffled order.
    ReorderedLines,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 15] = [
        FaultKind::Latency,
        FaultKind::ErrorResponse,
        FaultKind::Timeout,
        FaultKind::TruncatedOutput,
        FaultKind::MalformedJson,
        FaultKind::EmptyResult,
        FaultKind::RateLimited,
        FaultKind::StaleResult,
        FaultKind::DuplicatedOutput,
        FaultKind::ConnectionReset,
        FaultKind::ServiceUnavailable,
        FaultKind::PermissionDenied,
        FaultKind::CorruptedOutput,
        FaultKind::PartialOutput,
        FaultKind::ReorderedLines,
    ];

    /// Whether the fault stops the call before the tool runs.
    pub fn is_blocking(self) -> bool {
        matches!(
            self,
            FaultKind::ErrorResponse
                | FaultKind::Timeout
                | FaultKind::RateLimited
                | FaultKind::ConnectionReset
                | FaultKind::ServiceUnavailable
                | FaultKind::PermissionDenied
        )
    }

    fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// One fault rule: inject `kind` with probability `rate` on calls of `tools` (all tools when
/// empty).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// What to inject.
    pub kind: FaultKind,
    /// Probability per tool call, in `[0, 1]`.
    pub rate: f64,
    /// Tools the rule applies to; empty means every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Range of injected latency (and of timeout durations), in milliseconds.
    #[serde(default = "default_latency")]
    pub latency_ms: (u64, u64),
}

fn default_latency() -> (u64, u64) {
    (100, 2000)
}

impl FaultRule {
    /// A rule for every tool with the default latency range.
    pub fn new(kind: FaultKind, rate: f64) -> Self {
        Self {
            kind,
            rate,
            tools: Vec::new(),
            latency_ms: default_latency(),
        }
    }
}

/// The faults of a run, set from a config file or code.
///
/// ```
/// use sandgym_env_api::{FaultConfig, FaultKind};
/// let config = FaultConfig::from_json(r#"{"seed": 7, "rules": [
///     {"kind": "timeout", "rate": 0.1, "tools": ["run_sql"]},
///     {"kind": "truncated_output", "rate": 0.05}
/// ]}"#)?;
/// assert_eq!(config.rules[0].kind, FaultKind::Timeout);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// Mixed with each episode's reset seed: same run seed and episode seed ⇒ same faults.
    #[serde(default)]
    pub seed: u64,
    /// Rules, tried in order; the first that fires on a call applies.
    #[serde(default)]
    pub rules: Vec<FaultRule>,
    /// Really sleep for injected latency (off by default: latency is reported, not waited).
    #[serde(default)]
    pub sleep: bool,
}

/// The longest injected latency a config may ask for (10 minutes): with `sleep` it is
/// waited, so a larger value would hold an episode for hours.
pub const MAX_LATENCY_MS: u64 = 600_000;

impl FaultConfig {
    /// Parses and validates a JSON config.
    pub fn from_json(text: &str) -> Result<Self> {
        let config: Self = serde_json::from_str(text).map_err(|e| EnvError::InvalidConfig {
            reason: format!("fault config: {e}"),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Every kind at the same rate, for stress runs.
    pub fn all(rate: f64, seed: u64) -> Self {
        Self {
            seed,
            rules: FaultKind::ALL
                .iter()
                .map(|&k| FaultRule::new(k, rate))
                .collect(),
            sleep: false,
        }
    }

    /// Checks rates and ranges.
    pub fn validate(&self) -> Result<()> {
        for (i, rule) in self.rules.iter().enumerate() {
            if !(0.0..=1.0).contains(&rule.rate) {
                return Err(EnvError::InvalidConfig {
                    reason: format!("fault rule {i}: rate {} is not in [0, 1]", rule.rate),
                });
            }
            if rule.latency_ms.0 > rule.latency_ms.1 {
                return Err(EnvError::InvalidConfig {
                    reason: format!("fault rule {i}: latency_ms range is reversed"),
                });
            }
            if rule.latency_ms.1 > MAX_LATENCY_MS {
                return Err(EnvError::InvalidConfig {
                    reason: format!(
                        "fault rule {i}: latency_ms up to {} is over the limit of {MAX_LATENCY_MS} ms",
                        rule.latency_ms.1
                    ),
                });
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct FaultState {
    rng: u64,
    last_output: BTreeMap<String, String>,
    overridden: Option<Observation>,
    /// The last call was stopped by a blocking fault: the env did not step, reward 0.
    blocked: bool,
    injected: u64,
}

/// Wraps any env and injects the configured faults into its tool calls.
///
/// The faults are deterministic under the config seed and the reset seed, and every injected
/// fault is visible in the observation's `info` (`"fault": "<kind>"`), so training data can be
/// filtered or analysed. Final responses are never faulted.
pub struct FaultInjection<E> {
    inner: E,
    config: FaultConfig,
    state: FaultState,
}

impl<E: std::fmt::Debug> std::fmt::Debug for FaultInjection<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjection")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<E: Env> FaultInjection<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, config: FaultConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            inner,
            config,
            state: FaultState::default(),
        })
    }

    /// Faults injected in this episode.
    pub fn injected(&self) -> u64 {
        self.state.injected
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    fn pick(&mut self, tool: &str) -> Option<(FaultKind, u64)> {
        let mut rng = SplitMix64::new(self.state.rng);
        let mut chosen = None;
        for rule in &self.config.rules {
            // One draw per rule per call keeps the stream aligned whatever fires.
            let roll = rng.next_f64();
            let extra = rng.next_u64();
            let applies = rule.tools.is_empty() || rule.tools.iter().any(|t| t == tool);
            if chosen.is_none() && applies && roll < rule.rate {
                let (lo, hi) = rule.latency_ms;
                let span = hi.saturating_sub(lo).saturating_add(1);
                chosen = Some((rule.kind, lo.saturating_add(extra % span)));
            }
        }
        self.state.rng = rng.next_u64();
        chosen
    }
}

fn blocked(kind: FaultKind, tool: &str, ms: u64) -> String {
    match kind {
        FaultKind::ErrorResponse => {
            format!("error: the tool `{tool}` failed with an internal error (HTTP 500). Try again.")
        }
        FaultKind::Timeout => format!("error: the tool `{tool}` timed out after {ms} ms."),
        FaultKind::RateLimited => format!(
            "error: rate limited (HTTP 429) calling `{tool}`; retry after {} s.",
            ms.div_ceil(1000)
        ),
        FaultKind::ConnectionReset => {
            format!("error: connection reset by peer while calling `{tool}`.")
        }
        FaultKind::ServiceUnavailable => format!(
            "error: the service behind `{tool}` is unavailable (HTTP 503): maintenance in progress."
        ),
        FaultKind::PermissionDenied => {
            format!("error: permission denied for `{tool}` (HTTP 403). Try again later.")
        }
        _ => String::new(),
    }
}

fn cut(text: &str, fraction: f64) -> &str {
    let mut at = ((text.len() as f64) * fraction) as usize;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

fn damage(kind: FaultKind, text: &str, stale: Option<&String>, rng: &mut SplitMix64) -> String {
    match kind {
        FaultKind::TruncatedOutput => cut(text, 0.1 + 0.8 * rng.next_f64()).to_owned(),
        FaultKind::MalformedJson => {
            format!("{{\"result\": \"{}", cut(text, 0.5).replace('"', "\\\""))
        }
        FaultKind::EmptyResult => String::new(),
        FaultKind::StaleResult => stale.cloned().unwrap_or_else(|| text.to_owned()),
        FaultKind::DuplicatedOutput => format!("{text}\n{text}"),
        FaultKind::CorruptedOutput => text
            .chars()
            .map(|c| if rng.below(20) == 0 { '\u{FFFD}' } else { c })
            .collect(),
        FaultKind::PartialOutput => format!("{}\nerror: stream interrupted", cut(text, 0.5)),
        FaultKind::ReorderedLines => {
            let mut lines: Vec<&str> = text.lines().collect();
            rng.shuffle(&mut lines);
            lines.join("\n")
        }
        _ => text.to_owned(),
    }
}

impl<E: Env> Env for FaultInjection<E> {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let obs = self.inner.reset(seed, options)?;
        self.state = FaultState {
            rng: self.config.seed ^ seed.rotate_left(29) ^ 0xfa17_fa17_fa17_fa17,
            ..FaultState::default()
        };
        Ok(obs)
    }

    fn observe(&self) -> Observation {
        self.state
            .overridden
            .clone()
            .unwrap_or_else(|| self.inner.observe())
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        self.state.blocked = false;
        let Some(call) = action.tool_call() else {
            self.state.overridden = None;
            return self.inner.step(action);
        };
        let done = self.inner.done();
        if done.is_done() {
            return Err(EnvError::EpisodeOver { done });
        }
        // Invalid actions are the agent's mistake, not a tool fault: let the env reject them.
        crate::validate_action(&self.inner.spec().tools, action)?;
        let tool = call.tool_name.clone();
        let Some((kind, ms)) = self.pick(&tool) else {
            self.state.overridden = None;
            let obs = self.inner.step(action)?;
            self.state.last_output.insert(tool, obs.content.clone());
            return Ok(obs);
        };
        if self.config.sleep && matches!(kind, FaultKind::Latency | FaultKind::Timeout) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        self.state.injected += 1;
        let mut obs = if kind.is_blocking() {
            self.state.blocked = true;
            let obs = Observation::new(blocked(kind, &tool, ms));
            self.state.overridden = Some(obs.clone());
            obs
        } else {
            self.state.overridden = None;
            let mut obs = self.inner.step(action)?;
            let mut rng = SplitMix64::new(self.state.rng ^ ms);
            let stale = self.state.last_output.get(&tool).cloned();
            let fresh = obs.content.clone();
            obs.content = damage(kind, &obs.content, stale.as_ref(), &mut rng);
            self.state.last_output.insert(tool, fresh);
            self.state.overridden = Some(obs.clone());
            obs
        };
        obs.info.insert("fault".into(), Value::String(kind.name()));
        if matches!(kind, FaultKind::Latency | FaultKind::Timeout) {
            obs.info.insert("fault_latency_ms".into(), ms.into());
        }
        if let Some(o) = self.state.overridden.as_mut() {
            o.info = obs.info.clone();
        }
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        if self.state.blocked {
            0.0
        } else {
            self.inner.reward()
        }
    }

    fn done(&self) -> Done {
        self.inner.done()
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let header = serde_json::to_vec(&self.state).map_err(|e| EnvError::Snapshot {
            reason: e.to_string(),
        })?;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header);
        bytes.extend(self.inner.snapshot()?);
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let bad = || EnvError::Snapshot {
            reason: "not a FaultInjection snapshot".into(),
        };
        let (len, rest) = snapshot.split_first_chunk::<8>().ok_or_else(bad)?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| bad())?;
        if rest.len() < len {
            return Err(bad());
        }
        let state: FaultState = serde_json::from_slice(&rest[..len]).map_err(|_| bad())?;
        self.inner.restore(&rest[len..])?;
        self.state = state;
        Ok(())
    }
}
