//! Rewards composed outside the env: terms over each step (the env's own reward, the episode's
//! success, the action's length, a tool-call budget, forbidden tools or text, format
//! validity, a graded outcome the env gives in its info such as the SQL env's
//! `execution_match`, a sandboxed plugin), each per turn or only at the episode's end
//! (`final`), weighted, summed and clipped, wrapped around any env with [`Reward`] — so a
//! reward design changes between runs without touching the env.
//!
//! A [`RewardSpec`] is plain JSON (what `--reward` takes): a list of terms, or an object with
//! the terms and a clip range.
//!
//! ```
//! use sandgym_env_api::{Action, Env, Reward, RewardSpec, ResetOptions, toy::GuessNumber};
//! use serde_json::json;
//! let spec: RewardSpec = serde_json::from_value(json!({
//!     "terms": [
//!         {"term": "env"},
//!         {"term": "tool_budget", "max_calls": 3, "weight": -0.25},
//!         {"term": "length", "max_chars": 200, "weight": -0.1}
//!     ],
//!     "clip": [-1.0, 1.0]
//! }))?;
//! let mut env = Reward::new(GuessNumber::new(), &spec)?;
//! assert_eq!(env.spec().reward_range, (-0.35, 1.0));
//! env.reset(3, &ResetOptions::default())?;
//! let obs = env.step(&Action::tool("guess", json!({"number": 50})))?;
//! // Each step's terms are in its observation's info.
//! assert!(obs.info["reward_terms"]["env"].is_number());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Terms are Rust values too: implement [`RewardFn`] and give it to [`Reward::with_terms`].
//! A term that yields NaN or an infinity is an error ([`EnvError::InvalidReward`]), never a
//! reward; a term that cannot score a step ([`EnvError::RewardFailed`]) ends the episode.
//!
//! A `plugin` term (`{"term": "plugin", "path": "rubric.wasm", "config": {…}}`) is a reward
//! component that runs sandboxed: this crate knows it only as a [`PluginTerm`], and a
//! [`PluginLoader`] (the sandbox's, given to [`Reward::with_loader`]) makes it. A plugin sees
//! each step as the episode so far in Agent Template records plus the step's info, and gives
//! a reward and its named parts, shown in `info.reward_parts`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Action, ActionBody, Done, Env, EnvError, EnvSpec, Observation, ResetOptions, Result, SUCCESS,
    StepRecord, episode_success,
};

/// The info key under which each step's terms are given (`{"env": 1.0, "length": -0.02}`).
pub const REWARD_TERMS: &str = "reward_terms";

/// The info key under which the terms that give a breakdown (a plugin's rubric) give its
/// parts, by term (`{"rubric": {"courtesy": 0.1, "identity_first": -0.25}}`).
pub const REWARD_PARTS: &str = "reward_parts";

/// One accepted step as a reward term sees it.
#[derive(Clone, Copy, Debug)]
pub struct StepView<'a> {
    /// The action the env accepted.
    pub action: &'a Action,
    /// What the env answered.
    pub observation: &'a Observation,
    /// The env's own reward for the step.
    pub env_reward: f64,
    /// The env's own rewards of this episode so far, this step's included.
    pub env_return: f64,
    /// Whether the episode ended with this step.
    pub done: Done,
    /// Steps accepted this episode, this one included (1 on the first).
    pub turn: u32,
    /// Tool calls accepted this episode, this one included.
    pub tool_calls: u32,
    /// The episode's accepted steps so far as Agent Template records, this one last (its
    /// `reward` the env's own, its `done` set when the episode ended with it).
    pub episode: &'a [StepRecord],
    /// Actions the env rejected (malformed, unknown tool, invalid parameters) since the
    /// previous accepted step.
    pub rejected: u32,
}

/// A reward term: a number per accepted step.
pub trait RewardFn: Send {
    /// The term's name in the breakdown (`reward_terms` in the observation's info).
    fn name(&self) -> &str;

    /// The term's value for this step (weights are the term's own). An error (the term
    /// cannot score the step) ends the episode.
    fn reward(&mut self, step: &StepView<'_>) -> Result<f64>;

    /// The bounds of [`reward`](Self::reward) for any step, given the env's own reward range.
    fn range(&self, env_range: (f64, f64)) -> (f64, f64);

    /// The named parts of the last value, for terms that give a breakdown (shown in
    /// `info.reward_parts`); none by default.
    fn parts(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Called at every reset (terms that keep state per episode start over).
    fn reset(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A reward component named in a [`RewardSpec`]: `{"term": "plugin", "path": "rubric.wasm"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginTerm {
    /// The component file (`.wasm`), or the name of a plugin the loader bundles.
    pub path: String,
    /// The plugin's configuration object.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
    /// The SHA-256 of the component's bytes (hex), when recorded: a loader refuses a file
    /// that no longer matches, so a run resumes with the reward it started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its weight.
    #[serde(default = "one")]
    pub weight: f64,
}

/// Makes the [`PluginTerm`]s of a spec into reward terms (the sandbox's loader runs them as
/// WebAssembly components).
pub trait PluginLoader {
    /// The plugin as a term, unweighted ([`Reward::with_loader`] applies its weight).
    fn load(&self, plugin: &PluginTerm) -> Result<Box<dyn RewardFn>>;
}

/// The loader [`Reward::new`] uses: it knows no plugins.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPlugins;

impl PluginLoader for NoPlugins {
    fn load(&self, plugin: &PluginTerm) -> Result<Box<dyn RewardFn>> {
        Err(EnvError::InvalidConfig {
            reason: format!(
                "reward plugin {}: plugins run in the sandbox; make the reward with \
                 Reward::with_loader and the sandbox's plugin loader",
                plugin.path
            ),
        })
    }
}

/// A term times its weight (how plugin terms are weighted).
struct Weighted {
    term: Box<dyn RewardFn>,
    weight: f64,
}

impl RewardFn for Weighted {
    fn name(&self) -> &str {
        self.term.name()
    }

    fn reward(&mut self, step: &StepView<'_>) -> Result<f64> {
        Ok(self.weight * self.term.reward(step)?)
    }

    fn range(&self, env_range: (f64, f64)) -> (f64, f64) {
        let (lo, hi) = self.term.range(env_range);
        let (a, b) = (self.weight * lo, self.weight * hi);
        (a.min(b), a.max(b))
    }

    fn parts(&self) -> Vec<(String, f64)> {
        self.term.parts()
    }

    fn reset(&mut self) -> Result<()> {
        self.term.reset()
    }
}

/// A reward design: terms summed, then clipped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "SpecForm", into = "SpecObject")]
pub struct RewardSpec {
    /// The terms, summed.
    pub terms: Vec<Term>,
    /// The sum is clipped into this range, if given.
    pub clip: Option<(f64, f64)>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SpecForm {
    List(Vec<Term>),
    Object(SpecObject),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecObject {
    terms: Vec<Term>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clip: Option<(f64, f64)>,
}

impl From<SpecForm> for RewardSpec {
    fn from(form: SpecForm) -> Self {
        match form {
            SpecForm::List(terms) => Self { terms, clip: None },
            SpecForm::Object(o) => Self {
                terms: o.terms,
                clip: o.clip,
            },
        }
    }
}

impl From<RewardSpec> for SpecObject {
    fn from(spec: RewardSpec) -> Self {
        Self {
            terms: spec.terms,
            clip: spec.clip,
        }
    }
}

impl RewardSpec {
    /// Checks the design on its own (weights finite, terms that can apply, a finite ordered
    /// clip, at least one term); [`Reward::new`] checks it too.
    pub fn check(&self) -> Result<()> {
        if self.terms.is_empty() {
            return Err(EnvError::InvalidConfig {
                reason: "a reward needs at least one term".into(),
            });
        }
        for term in &self.terms {
            term.check()?;
        }
        check_clip(self.clip)
    }
}

fn check_clip(clip: Option<(f64, f64)>) -> Result<()> {
    match clip {
        Some((lo, hi)) if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
            Err(EnvError::InvalidConfig {
                reason: format!("reward clip [{lo}, {hi}] must be finite and ordered"),
            })
        }
        _ => Ok(()),
    }
}

fn one() -> f64 {
    1.0
}

/// A bundled reward term; `weight` multiplies it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "term", rename_all = "snake_case", deny_unknown_fields)]
pub enum Term {
    /// The env's own reward for the step.
    Env {
        /// Its weight.
        #[serde(default = "one")]
        weight: f64,
    },
    /// 1 on the step that ends an episode that succeeded (the env's `success` info, or a
    /// positive return on termination), 0 otherwise.
    Success {
        /// Its weight.
        #[serde(default = "one")]
        weight: f64,
    },
    /// The action's length as a fraction of `max_chars` (at most 1): its thought and its
    /// answer or tool arguments. A negative weight penalises long actions.
    Length {
        /// The length that counts fully.
        max_chars: u32,
        /// Its weight (usually negative).
        weight: f64,
    },
    /// 1 for every tool call past the first `max_calls` of the episode.
    ToolBudget {
        /// Tool calls that are free.
        max_calls: u32,
        /// Its weight (usually negative).
        weight: f64,
    },
    /// 1 when the action calls one of `tools` or its text contains one of `text`
    /// (case-insensitive), e.g. `DROP TABLE`.
    Forbidden {
        /// Tool names.
        #[serde(default)]
        tools: Vec<String>,
        /// Text fragments.
        #[serde(default)]
        text: Vec<String>,
        /// Its weight (usually negative).
        weight: f64,
    },
    /// 1 when every action of the agent since the previous accepted step was accepted: no
    /// malformed JSON, unknown tool or invalid parameters in between (a rejected action gets
    /// no step of its own, so its penalty or the bonus withheld lands on the next accepted
    /// one).
    Format {
        /// Its weight.
        #[serde(default = "one")]
        weight: f64,
    },
    /// The step's `info[key]` as a number in [0, 1]: a boolean is 0 or 1, a number is
    /// clipped into [0, 1], anything else (or no such key) is 0. Envs give graded outcomes
    /// this way: the SQL env's `execution_match` is the F1 of the answer's result rows
    /// against the gold query's (1 for a correct answer).
    Info {
        /// The info key; also the term's name in the breakdown.
        key: String,
        /// Its weight.
        #[serde(default = "one")]
        weight: f64,
    },
    /// The term `of`, paid only on the step that ends the episode (0 on every other step):
    /// a final-outcome reward instead of a per-turn one.
    Final {
        /// The term.
        of: Box<Term>,
    },
    /// A sandboxed reward component (see [`PluginTerm`]).
    Plugin(PluginTerm),
}

impl Term {
    fn weight(&self) -> f64 {
        match self {
            Term::Env { weight }
            | Term::Success { weight }
            | Term::Length { weight, .. }
            | Term::ToolBudget { weight, .. }
            | Term::Forbidden { weight, .. }
            | Term::Format { weight }
            | Term::Info { weight, .. }
            | Term::Plugin(PluginTerm { weight, .. }) => *weight,
            Term::Final { of } => of.weight(),
        }
    }

    /// The term's name in the breakdown (`info.reward_terms`): its kind (`env`, `length`,
    /// …), an `info` term's key, a `final` term's inner name, or `plugin` before a plugin is
    /// made (then the name the plugin gives itself).
    pub fn name(&self) -> &str {
        match self {
            Term::Env { .. } => "env",
            Term::Success { .. } => "success",
            Term::Length { .. } => "length",
            Term::ToolBudget { .. } => "tool_budget",
            Term::Forbidden { .. } => "forbidden",
            Term::Format { .. } => "format",
            Term::Info { key, .. } => key,
            Term::Final { of } => of.name(),
            Term::Plugin(_) => "plugin",
        }
    }

    /// The term as a [`RewardFn`]: a bundled term as it is, a plugin made by `loader`.
    pub fn build(&self, loader: &dyn PluginLoader) -> Result<Box<dyn RewardFn>> {
        self.check()?;
        Ok(match self {
            Term::Plugin(plugin) => Box::new(Weighted {
                term: loader.load(plugin)?,
                weight: plugin.weight,
            }),
            Term::Final { of } => Box::new(AtEnd {
                term: of.build(loader)?,
            }),
            bundled => Box::new(Bundled(bundled.clone())),
        })
    }

    fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(EnvError::InvalidConfig { reason });
        if !self.weight().is_finite() {
            return bad(format!(
                "reward term {}: weight must be finite",
                self.name()
            ));
        }
        match self {
            Term::Length { max_chars: 0, .. } => {
                bad("reward term length: max_chars must be positive".into())
            }
            Term::Forbidden { tools, text, .. } if tools.is_empty() && text.is_empty() => {
                bad("reward term forbidden: give tools or text".into())
            }
            Term::Forbidden { text, .. } if text.iter().any(String::is_empty) => {
                bad("reward term forbidden: empty text matches everything".into())
            }
            Term::Info { key, .. } if key.trim().is_empty() => {
                bad("reward term info: give the info key".into())
            }
            Term::Final { of } => match **of {
                Term::Final { .. } => bad("reward term final: `of` is already final".into()),
                ref inner => inner.check(),
            },
            Term::Plugin(p) if p.path.trim().is_empty() => {
                bad("reward term plugin: give the component's path".into())
            }
            _ => Ok(()),
        }
    }
}

/// A bundled term that is computed from the step alone.
struct Bundled(Term);

impl RewardFn for Bundled {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn reward(&mut self, step: &StepView<'_>) -> Result<f64> {
        let indicator = |b: bool| f64::from(u8::from(b));
        let value = match &self.0 {
            Term::Env { .. } => step.env_reward,
            Term::Success { .. } => indicator(
                step.done.is_done()
                    && episode_success(&step.observation.info, step.done, step.env_return),
            ),
            Term::Length { max_chars, .. } => {
                let chars =
                    step.action.thought.chars().count() + body_text(step.action).chars().count();
                (chars as f64 / f64::from(*max_chars)).min(1.0)
            }
            Term::ToolBudget { max_calls, .. } => indicator(
                matches!(step.action.body, ActionBody::ToolCall(_)) && step.tool_calls > *max_calls,
            ),
            Term::Forbidden { tools, text, .. } => {
                let called = match &step.action.body {
                    ActionBody::ToolCall(call) => tools.contains(&call.tool_name),
                    ActionBody::Response(_) => false,
                };
                let body = body_text(step.action).to_lowercase();
                let said = text.iter().any(|t| body.contains(&t.to_lowercase()));
                indicator(called || said)
            }
            Term::Format { .. } => indicator(step.rejected == 0),
            Term::Info { key, .. } => match step.observation.info.get(key) {
                Some(Value::Bool(b)) => indicator(*b),
                Some(Value::Number(n)) => n.as_f64().map_or(0.0, |x| x.clamp(0.0, 1.0)),
                _ => 0.0,
            },
            Term::Final { .. } | Term::Plugin(_) => {
                unreachable!("Term::build makes final and plugin terms into their own RewardFn")
            }
        };
        Ok(self.0.weight() * value)
    }

    fn range(&self, env_range: (f64, f64)) -> (f64, f64) {
        let w = self.0.weight();
        let (lo, hi) = match self.0 {
            Term::Env { .. } => env_range,
            _ => (0.0, 1.0),
        };
        let (a, b) = (w * lo, w * hi);
        (a.min(b), a.max(b))
    }
}

/// A term paid only on the step that ends the episode.
struct AtEnd {
    term: Box<dyn RewardFn>,
}

impl RewardFn for AtEnd {
    fn name(&self) -> &str {
        self.term.name()
    }

    fn reward(&mut self, step: &StepView<'_>) -> Result<f64> {
        if step.done.is_done() {
            self.term.reward(step)
        } else {
            Ok(0.0)
        }
    }

    fn range(&self, env_range: (f64, f64)) -> (f64, f64) {
        let (lo, hi) = self.term.range(env_range);
        (lo.min(0.0), hi.max(0.0))
    }

    fn parts(&self) -> Vec<(String, f64)> {
        self.term.parts()
    }

    fn reset(&mut self) -> Result<()> {
        self.term.reset()
    }
}

/// The text of an action's answer, or its tool call's arguments as JSON.
fn body_text(action: &Action) -> String {
    match &action.body {
        ActionBody::Response(text) => text.clone(),
        ActionBody::ToolCall(call) => Value::Object(call.parameters.clone()).to_string(),
    }
}

/// An env whose reward is composed of terms (see the [module](self)): [`Env::reward`] is the
/// clipped sum of the terms for the last accepted step, each step's observation carries the
/// terms in `info.reward_terms` (and the parts of terms that give them in
/// `info.reward_parts`), and the spec's reward range is the composition's.
///
/// A term that fails (an error, a NaN) ends the episode: the step returns the error, and the
/// env reports the episode truncated until the next reset.
pub struct Reward<E> {
    inner: E,
    terms: Vec<Box<dyn RewardFn>>,
    clip: Option<(f64, f64)>,
    spec: EnvSpec,
    state: EpisodeState,
}

/// What the wrapper keeps per episode (all of it in a snapshot).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct EpisodeState {
    reward: f64,
    /// What the last accepted step added to the env's info (`reward_terms`, `reward_parts`,
    /// and `success` where the env gives none), shown by `observe` as by `step`.
    added: Map<String, Value>,
    /// The reset observation's text: the records' instruction.
    instruction: String,
    /// The accepted steps so far, as the terms see them (the turn, tool-call and return
    /// counts of a [`StepView`] are theirs).
    records: Vec<StepRecord>,
    /// Why a term failed, ending the episode.
    failed: Option<String>,
    /// Actions rejected since the last accepted step.
    rejected: u32,
}

impl<E> std::fmt::Debug for Reward<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reward")
            .field("env", &self.spec.id)
            .field(
                "terms",
                &self.terms.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("clip", &self.clip)
            .finish_non_exhaustive()
    }
}

impl<E: Env> Reward<E> {
    /// `inner` rewarded as `spec` says. An invalid spec (a non-finite weight, a reversed or
    /// non-finite clip, a term that cannot apply) is an error, and so is a plugin term: those
    /// need [`with_loader`](Self::with_loader).
    pub fn new(inner: E, spec: &RewardSpec) -> Result<Self> {
        Self::with_loader(inner, spec, &NoPlugins)
    }

    /// `inner` rewarded as `spec` says, its plugin terms made by `loader`.
    pub fn with_loader(inner: E, spec: &RewardSpec, loader: &dyn PluginLoader) -> Result<Self> {
        spec.check()?;
        let terms = spec
            .terms
            .iter()
            .map(|t| t.build(loader))
            .collect::<Result<_>>()?;
        Self::with_terms(inner, terms, spec.clip)
    }

    /// `inner` rewarded by the sum of `terms`, clipped into `clip` if given.
    pub fn with_terms(
        inner: E,
        terms: Vec<Box<dyn RewardFn>>,
        clip: Option<(f64, f64)>,
    ) -> Result<Self> {
        if terms.is_empty() {
            return Err(EnvError::InvalidConfig {
                reason: "a reward needs at least one term".into(),
            });
        }
        check_clip(clip)?;
        let env_range = inner.spec().reward_range;
        let (mut lo, mut hi) = terms.iter().fold((0.0, 0.0), |(lo, hi), t| {
            let (a, b) = t.range(env_range);
            (lo + a, hi + b)
        });
        if let Some((c_lo, c_hi)) = clip {
            (lo, hi) = (lo.clamp(c_lo, c_hi), hi.clamp(c_lo, c_hi));
        }
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(EnvError::InvalidConfig {
                reason: format!("the reward's range [{lo}, {hi}] is not finite"),
            });
        }
        let spec = inner.spec().clone().with_reward_range(lo, hi);
        Ok(Self {
            inner,
            terms,
            clip,
            spec,
            state: EpisodeState::default(),
        })
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Scores the step just accepted (the last record): each term, summed and clipped, with
    /// the breakdown added to `obs`'s info.
    fn score(&mut self, obs: &mut Observation, action: &Action, env_reward: f64) -> Result<()> {
        let st = &mut self.state;
        let done = self.inner.done();
        let env_return: f64 = st.records.iter().map(|r| r.reward).sum();
        let view = StepView {
            action,
            observation: obs,
            env_reward,
            env_return,
            done,
            turn: st.records.len() as u32,
            tool_calls: st.records.iter().filter(|r| r.action.is_some()).count() as u32,
            episode: &st.records,
            rejected: st.rejected,
        };
        let mut breakdown = Map::new();
        let mut parts = Map::new();
        let mut total = 0.0;
        for term in &mut self.terms {
            let name = term.name().to_owned();
            let value = term.reward(&view)?;
            if !value.is_finite() {
                return Err(EnvError::InvalidReward {
                    term: name,
                    value: value.to_string(),
                });
            }
            total += value;
            let slot = breakdown.entry(name.clone()).or_insert(Value::from(0.0));
            *slot = Value::from(slot.as_f64().unwrap_or(0.0) + value);
            let term_parts = term.parts();
            if let Some((part, value)) = term_parts.iter().find(|(_, v)| !v.is_finite()) {
                return Err(EnvError::InvalidReward {
                    term: format!("{name}/{part}"),
                    value: value.to_string(),
                });
            }
            if !term_parts.is_empty() {
                let map = term_parts
                    .into_iter()
                    .map(|(part, value)| (part, Value::from(value)))
                    .collect();
                parts.insert(name, Value::Object(map));
            }
        }
        if let Some((lo, hi)) = self.clip {
            total = total.clamp(lo, hi);
        }
        st.reward = total;
        st.rejected = 0;
        let mut added = Map::new();
        added.insert(REWARD_TERMS.into(), Value::Object(breakdown));
        if !parts.is_empty() {
            added.insert(REWARD_PARTS.into(), Value::Object(parts));
        }
        // Success stays what the env's own reward says: an env without a `success` key is
        // judged on its own return, not on the composed one (a penalty does not turn a
        // solved task into a failure).
        if done.is_done() && !obs.info.contains_key(SUCCESS) {
            let success = episode_success(&obs.info, done, env_return);
            added.insert(SUCCESS.into(), Value::Bool(success));
        }
        obs.info
            .extend(added.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(last) = st.records.last_mut() {
            last.set_breakdown(&added);
        }
        st.added = added;
        Ok(())
    }
}

impl<E: Env> Env for Reward<E> {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let obs = self.inner.reset(seed, options)?;
        for term in &mut self.terms {
            term.reset()?;
        }
        self.state = EpisodeState {
            instruction: obs.content.clone(),
            ..EpisodeState::default()
        };
        Ok(obs)
    }

    fn observe(&self) -> Observation {
        let mut obs = self.inner.observe();
        obs.info
            .extend(self.state.added.iter().map(|(k, v)| (k.clone(), v.clone())));
        obs
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        if self.state.failed.is_some() {
            return Err(EnvError::EpisodeOver {
                done: Done::Truncated,
            });
        }
        let mut obs = match self.inner.step(action) {
            Ok(obs) => obs,
            Err(e) => {
                if e.is_invalid_action() {
                    self.state.rejected = self.state.rejected.saturating_add(1);
                }
                return Err(e);
            }
        };
        let env_reward = self.inner.reward();
        if !env_reward.is_finite() {
            return Err(EnvError::InvalidReward {
                term: "env".into(),
                value: env_reward.to_string(),
            });
        }
        let st = &mut self.state;
        let mut record = StepRecord::new(&st.instruction, action, &obs.content, env_reward);
        record.done = self.inner.done();
        st.records.push(record);
        if let Err(e) = self.score(&mut obs, action, env_reward) {
            self.state.failed = Some(e.to_string());
            self.state.reward = 0.0;
            return Err(e);
        }
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        self.state.reward
    }

    fn done(&self) -> Done {
        match self.state.failed {
            Some(_) => Done::Truncated,
            None => self.inner.done(),
        }
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let state = serde_json::to_vec(&self.state).expect("the episode state serialises");
        let mut bytes = Vec::with_capacity(4 + state.len());
        bytes.extend((state.len() as u32).to_le_bytes());
        bytes.extend(state);
        bytes.extend(self.inner.snapshot()?);
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let short = || EnvError::Snapshot {
            reason: "Reward snapshot shorter than its header".into(),
        };
        let (len, rest) = snapshot.split_first_chunk::<4>().ok_or_else(short)?;
        let len = u32::from_le_bytes(*len) as usize;
        let (state, rest) = rest.split_at_checked(len).ok_or_else(short)?;
        let state = serde_json::from_slice(state).map_err(|e| EnvError::Snapshot {
            reason: format!("Reward snapshot: its episode state is not valid: {e}"),
        })?;
        self.inner.restore(rest)?;
        self.state = state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_env;
    use crate::toy::GuessNumber;
    use serde_json::json;

    fn spec(value: Value) -> RewardSpec {
        serde_json::from_value(value).unwrap()
    }

    /// Plays guess-number to its end by bisection; `each` sees every observation before the
    /// last one, which is returned.
    fn bisect(env: &mut impl Env, mut each: impl FnMut(&Observation)) -> Observation {
        let (mut lo, mut hi) = (1, 100);
        loop {
            let guess = (lo + hi) / 2;
            let obs = env
                .step(&Action::tool("guess", json!({"number": guess})))
                .unwrap();
            if env.done().is_done() {
                return obs;
            }
            each(&obs);
            if obs.content.contains("higher") {
                lo = guess + 1
            } else {
                hi = guess - 1
            }
        }
    }

    /// A term that returns what it is told to.
    struct Fixed(f64);
    impl RewardFn for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn reward(&mut self, _: &StepView<'_>) -> Result<f64> {
            Ok(self.0)
        }
        fn range(&self, _: (f64, f64)) -> (f64, f64) {
            (0.0, 1.0)
        }
    }

    #[test]
    fn terms_sum_clip_and_show_their_breakdown() {
        let s = spec(json!({"terms": [
            {"term": "env", "weight": 2.0},
            {"term": "tool_budget", "max_calls": 1, "weight": -0.5},
            {"term": "forbidden", "text": ["\"number\":13"], "weight": -1.0}
        ], "clip": [-1.0, 1.5]}));
        let mut env = Reward::new(GuessNumber::new(), &s).unwrap();
        assert_eq!(env.spec().reward_range, (-1.0, 1.5));
        env.reset(0, &ResetOptions::default()).unwrap();
        let obs = env
            .step(&Action::tool("guess", json!({"number": 13})))
            .unwrap();
        let terms = &obs.info["reward_terms"];
        // First call: within budget; the forbidden text matched.
        assert_eq!(terms["tool_budget"], 0.0);
        assert_eq!(terms["forbidden"], -1.0);
        let expected = (2.0 * env.inner().reward() - 1.0).clamp(-1.0, 1.5);
        assert_eq!(env.reward(), expected);
        env.step(&Action::tool("guess", json!({"number": 40})))
            .unwrap();
        assert_eq!(
            env.reward(),
            (2.0 * env.inner().reward() - 0.5).clamp(-1.0, 1.5),
            "the second call is over the budget"
        );
    }

    #[test]
    fn success_counts_once_at_the_end_and_length_is_a_bounded_fraction() {
        let s = spec(json!([
            {"term": "success", "weight": 1.0},
            {"term": "length", "max_chars": 10, "weight": -0.1}
        ]));
        let mut env = Reward::new(GuessNumber::new(), &s).unwrap();
        let secret = (1..=100)
            .find(|n| {
                let mut probe = GuessNumber::new();
                probe.reset(5, &ResetOptions::default()).unwrap();
                probe
                    .step(&Action::tool("guess", json!({"number": n})))
                    .unwrap();
                probe.done() == Done::Terminated
            })
            .unwrap();
        env.reset(5, &ResetOptions::default()).unwrap();
        let obs = env
            .step(&Action::tool("guess", json!({"number": secret})))
            .unwrap();
        assert_eq!(obs.info["reward_terms"]["success"], 1.0);
        // `{"number":N}` is longer than 10 characters: the whole penalty, no more.
        assert_eq!(obs.info["reward_terms"]["length"], -0.1);
    }

    #[test]
    fn success_is_judged_on_the_envs_own_return() {
        // A penalty bigger than the win: the composed return is negative, the task solved.
        let s =
            spec(json!([{"term": "env"}, {"term": "tool_budget", "max_calls": 0, "weight": -5.0}]));
        let mut env = Reward::new(GuessNumber::new(), &s).unwrap();
        env.reset(5, &ResetOptions::default()).unwrap();
        let obs = bisect(&mut env, |_| {});
        assert!(env.reward() < 0.0);
        assert_eq!(obs.info[SUCCESS], true, "{:?}", obs.info);
        assert_eq!(env.observe().info[SUCCESS], true);
    }

    #[test]
    fn a_composed_reward_keeps_the_env_contract() {
        let s =
            spec(json!([{"term": "env"}, {"term": "tool_budget", "max_calls": 2, "weight": -0.1}]));
        let report = check_env(&mut Reward::new(GuessNumber::new(), &s).unwrap());
        assert!(report.is_ok(), "{report}");
    }

    #[test]
    fn non_finite_rewards_are_errors_and_bad_specs_are_refused() {
        let mut env =
            Reward::with_terms(GuessNumber::new(), vec![Box::new(Fixed(f64::NAN))], None).unwrap();
        env.reset(0, &ResetOptions::default()).unwrap();
        let err = env
            .step(&Action::tool("guess", json!({"number": 1})))
            .unwrap_err();
        assert!(
            matches!(err, EnvError::InvalidReward { ref term, .. } if term == "fixed"),
            "{err}"
        );
        for bad in [
            json!([]),
            json!([{"term": "length", "max_chars": 0, "weight": -1.0}]),
            json!([{"term": "forbidden", "weight": -1.0}]),
            json!([{"term": "forbidden", "text": [""], "weight": -1.0}]),
            json!({"terms": [{"term": "env"}], "clip": [1.0, -1.0]}),
        ] {
            let s: RewardSpec = serde_json::from_value(bad.clone()).unwrap();
            assert!(Reward::new(GuessNumber::new(), &s).is_err(), "{bad}");
        }
        for unparsable in [
            json!([{"term": "bonus"}]),
            json!([{"term": "env", "wieght": 2}]),
            json!({"terms": [], "clamp": [0, 1]}),
        ] {
            assert!(
                serde_json::from_value::<RewardSpec>(unparsable.clone()).is_err(),
                "{unparsable}"
            );
        }
    }

    #[test]
    fn snapshots_keep_the_episode_counters() {
        let s = spec(json!([{"term": "tool_budget", "max_calls": 1, "weight": -1.0}]));
        let mut env = Reward::new(GuessNumber::new(), &s).unwrap();
        env.reset(0, &ResetOptions::default()).unwrap();
        env.step(&Action::tool("guess", json!({"number": 10})))
            .unwrap();
        let snap = env.snapshot().unwrap();
        env.step(&Action::tool("guess", json!({"number": 20})))
            .unwrap();
        assert_eq!(env.reward(), -1.0);
        env.restore(&snap).unwrap();
        assert_eq!(env.reward(), 0.0);
        env.step(&Action::tool("guess", json!({"number": 20})))
            .unwrap();
        assert_eq!(env.reward(), -1.0, "the restored counter counts on");
        assert!(env.restore(&[1, 2]).is_err());
    }

    #[test]
    fn specs_round_trip_as_json() {
        let s = spec(json!({"terms": [{"term": "env", "weight": 0.5}], "clip": [0.0, 1.0]}));
        let back: RewardSpec = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    /// A term that fails on its `n`-th step, and sees the episode so far.
    struct FailsAt(u32);
    impl RewardFn for FailsAt {
        fn name(&self) -> &str {
            "fails"
        }
        fn reward(&mut self, step: &StepView<'_>) -> Result<f64> {
            assert_eq!(
                step.episode.len() as u32,
                step.turn,
                "one record per accepted step"
            );
            let last = step.episode.last().unwrap();
            assert_eq!(last.reward, step.env_reward);
            assert_eq!(last.done, step.done);
            if step.turn == self.0 {
                return Err(EnvError::RewardFailed {
                    term: "fails".into(),
                    reason: "on purpose".into(),
                });
            }
            Ok(0.25)
        }
        fn range(&self, _: (f64, f64)) -> (f64, f64) {
            (0.0, 0.25)
        }
        fn parts(&self) -> Vec<(String, f64)> {
            vec![("quarter".into(), 0.25)]
        }
    }

    #[test]
    fn a_failing_term_ends_the_episode_until_the_next_reset() {
        let mut env =
            Reward::with_terms(GuessNumber::new(), vec![Box::new(FailsAt(2))], None).unwrap();
        let guess = |n: u32| Action::tool("guess", json!({"number": n}));
        for seed in 0..2 {
            env.reset(seed, &ResetOptions::default()).unwrap();
            let obs = env.step(&guess(1)).unwrap();
            assert_eq!(obs.info[REWARD_PARTS]["fails"]["quarter"], 0.25);
            let err = env.step(&guess(2)).unwrap_err();
            assert!(matches!(err, EnvError::RewardFailed { .. }), "{err}");
            assert_eq!(env.done(), Done::Truncated);
            assert_eq!(env.reward(), 0.0);
            assert!(matches!(
                env.step(&guess(3)),
                Err(EnvError::EpisodeOver { .. })
            ));
        }
    }

    #[test]
    fn plugin_terms_parse_and_need_a_loader() {
        let s = spec(json!([
            {"term": "env"},
            {"term": "plugin", "path": "rubric.wasm", "config": {"tool_cost": 0.1}, "weight": 0.5}
        ]));
        let Term::Plugin(p) = &s.terms[1] else {
            panic!("{s:?}")
        };
        assert_eq!((p.path.as_str(), p.weight), ("rubric.wasm", 0.5));
        assert_eq!(p.config["tool_cost"], 0.1);
        let back: RewardSpec = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let err = Reward::new(GuessNumber::new(), &s).unwrap_err();
        assert!(err.to_string().contains("with_loader"), "{err}");

        /// A loader that makes every plugin a fixed term.
        struct Stub;
        impl PluginLoader for Stub {
            fn load(&self, _: &PluginTerm) -> Result<Box<dyn RewardFn>> {
                Ok(Box::new(Fixed(1.0)))
            }
        }
        let mut env = Reward::with_loader(GuessNumber::new(), &s, &Stub).unwrap();
        assert_eq!(
            env.spec().reward_range,
            (0.0, 1.5),
            "the plugin's range, weighted"
        );
        env.reset(0, &ResetOptions::default()).unwrap();
        let obs = env
            .step(&Action::tool("guess", json!({"number": 1})))
            .unwrap();
        assert_eq!(obs.info[REWARD_TERMS]["fixed"], 0.5);
        for bad in [
            json!([{"term": "plugin", "path": ""}]),
            json!([{"term": "plugin", "path": "x.wasm", "weight": "NaN"}]),
        ] {
            let parsed = serde_json::from_value::<RewardSpec>(bad.clone());
            assert!(parsed.map_or(true, |s| s.check().is_err()), "{bad}");
        }
        assert!(
            serde_json::from_value::<RewardSpec>(
                json!([{"term": "plugin", "path": "x", "colour": 1}])
            )
            .is_err()
        );
    }

    #[test]
    fn snapshots_keep_the_records_the_terms_see() {
        let mut env =
            Reward::with_terms(GuessNumber::new(), vec![Box::new(FailsAt(3))], None).unwrap();
        env.reset(0, &ResetOptions::default()).unwrap();
        env.step(&Action::tool("guess", json!({"number": 10})))
            .unwrap();
        let snap = env.snapshot().unwrap();
        env.step(&Action::tool("guess", json!({"number": 20})))
            .unwrap();
        env.restore(&snap).unwrap();
        // One record restored: the next step is the second, the one after fails.
        env.step(&Action::tool("guess", json!({"number": 20})))
            .unwrap();
        assert!(
            env.step(&Action::tool("guess", json!({"number": 30})))
                .is_err()
        );
    }

    #[test]
    fn format_info_and_final_terms() {
        let s = spec(json!([
            {"term": "format", "weight": 0.5},
            {"term": "final", "of": {"term": "length", "max_chars": 1000, "weight": -1.0}},
            {"term": "info", "key": "missing"}
        ]));
        let mut env = Reward::new(GuessNumber::new(), &s).unwrap();
        assert_eq!(env.spec().reward_range, (-1.0, 1.5));
        env.reset(5, &ResetOptions::default()).unwrap();
        let obs = env
            .step(&Action::tool("guess", json!({"number": 50})))
            .unwrap();
        assert_eq!(obs.info[REWARD_TERMS]["format"], 0.5);
        assert_eq!(obs.info[REWARD_TERMS]["length"], 0.0, "not final: not paid");
        assert_eq!(obs.info[REWARD_TERMS]["missing"], 0.0);
        // A rejected action withholds the next accepted step's format bonus, once.
        assert!(env.step(&Action::tool("shout", json!({}))).is_err());
        let obs = env
            .step(&Action::tool("guess", json!({"number": 25})))
            .unwrap();
        assert_eq!(obs.info[REWARD_TERMS]["format"], 0.0);
        let obs = env
            .step(&Action::tool("guess", json!({"number": 75})))
            .unwrap();
        assert_eq!(obs.info[REWARD_TERMS]["format"], 0.5);
        // Played to the end, the final term pays on the last step only.
        env.reset(5, &ResetOptions::default()).unwrap();
        let last = bisect(&mut env, |obs| {
            assert_eq!(obs.info[REWARD_TERMS]["length"], 0.0);
        });
        assert!(last.info[REWARD_TERMS]["length"].as_f64().unwrap() < 0.0);

        // `info` reads booleans and clips numbers.
        struct Says(Value);
        impl Env for Says {
            fn spec(&self) -> &EnvSpec {
                static SPEC: std::sync::OnceLock<EnvSpec> = std::sync::OnceLock::new();
                SPEC.get_or_init(|| EnvSpec::new("says-v0".parse().unwrap()))
            }
            fn reset(&mut self, _: u64, _: &ResetOptions) -> Result<Observation> {
                Ok(Observation::new("go"))
            }
            fn observe(&self) -> Observation {
                Observation::new("go")
            }
            fn step(&mut self, _: &Action) -> Result<Observation> {
                Ok(Observation::new("done").with_info("grade", self.0.clone()))
            }
            fn reward(&self) -> f64 {
                0.0
            }
            fn done(&self) -> Done {
                Done::Running
            }
        }
        for (value, want) in [
            (json!(true), 1.0),
            (json!(0.25), 0.25),
            (json!(7), 1.0),
            (json!(-2), 0.0),
            (json!("x"), 0.0),
        ] {
            let s = spec(json!([{"term": "info", "key": "grade", "weight": 2.0}]));
            let mut env = Reward::new(Says(value.clone()), &s).unwrap();
            env.reset(0, &ResetOptions::default()).unwrap();
            env.step(&Action::respond("x")).unwrap();
            assert_eq!(env.reward(), 2.0 * want, "{value}");
        }
        for bad in [
            json!([{"term": "info", "key": " "}]),
            json!([{"term": "final", "of": {"term": "final", "of": {"term": "env"}}}]),
            json!([{"term": "final", "of": {"term": "length", "max_chars": 0, "weight": 1.0}}]),
        ] {
            assert!(spec(bad.clone()).check().is_err(), "{bad}");
        }
    }
}
