//! Rewards composed outside the env: terms over each step (the env's own reward, the episode's
//! success, the action's length, a tool-call budget, forbidden tools or text), weighted,
//! summed and clipped, wrapped around any env with [`Reward`] — so a reward design changes
//! between runs without touching the env.
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
//! reward.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Action, ActionBody, Done, Env, EnvError, EnvSpec, Observation, ResetOptions, Result, SUCCESS,
    episode_success,
};

/// The info key under which each step's terms are given (`{"env": 1.0, "length": -0.02}`).
pub const REWARD_TERMS: &str = "reward_terms";

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
}

/// A reward term: a number per accepted step.
pub trait RewardFn: Send {
    /// The term's name in the breakdown (`reward_terms` in the observation's info).
    fn name(&self) -> &str;

    /// The term's value for this step (before nothing: weights are the term's own).
    fn reward(&mut self, step: &StepView<'_>) -> f64;

    /// The bounds of [`reward`](Self::reward) for any step, given the env's own reward range.
    fn range(&self, env_range: (f64, f64)) -> (f64, f64);

    /// Called at every reset (terms that keep state per episode start over).
    fn reset(&mut self) {}
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
}

impl Term {
    fn weight(&self) -> f64 {
        match self {
            Term::Env { weight }
            | Term::Success { weight }
            | Term::Length { weight, .. }
            | Term::ToolBudget { weight, .. }
            | Term::Forbidden { weight, .. } => *weight,
        }
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
            _ => Ok(()),
        }
    }
}

impl RewardFn for Term {
    fn name(&self) -> &str {
        match self {
            Term::Env { .. } => "env",
            Term::Success { .. } => "success",
            Term::Length { .. } => "length",
            Term::ToolBudget { .. } => "tool_budget",
            Term::Forbidden { .. } => "forbidden",
        }
    }

    fn reward(&mut self, step: &StepView<'_>) -> f64 {
        let indicator = |b: bool| f64::from(u8::from(b));
        let value = match self {
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
        };
        self.weight() * value
    }

    fn range(&self, env_range: (f64, f64)) -> (f64, f64) {
        let w = self.weight();
        let (lo, hi) = match self {
            Term::Env { .. } => env_range,
            _ => (0.0, 1.0),
        };
        let (a, b) = (w * lo, w * hi);
        (a.min(b), a.max(b))
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
/// terms in `info.reward_terms`, and the spec's reward range is the composition's.
pub struct Reward<E> {
    inner: E,
    terms: Vec<Box<dyn RewardFn>>,
    clip: Option<(f64, f64)>,
    spec: EnvSpec,
    reward: f64,
    env_return: f64,
    turn: u32,
    tool_calls: u32,
    /// What the last accepted step added to the env's info (`reward_terms`, and `success`
    /// where the env gives none), shown by `observe` as by `step`.
    added: Map<String, Value>,
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
    /// non-finite clip, a term that cannot apply) is an error.
    pub fn new(inner: E, spec: &RewardSpec) -> Result<Self> {
        spec.check()?;
        let terms = spec
            .terms
            .iter()
            .cloned()
            .map(|t| Box::new(t) as Box<dyn RewardFn>)
            .collect();
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
            reward: 0.0,
            env_return: 0.0,
            turn: 0,
            tool_calls: 0,
            added: Map::new(),
        })
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Env> Env for Reward<E> {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let obs = self.inner.reset(seed, options)?;
        self.terms.iter_mut().for_each(|t| t.reset());
        (self.reward, self.env_return, self.turn, self.tool_calls) = (0.0, 0.0, 0, 0);
        self.added = Map::new();
        Ok(obs)
    }

    fn observe(&self) -> Observation {
        let mut obs = self.inner.observe();
        obs.info
            .extend(self.added.iter().map(|(k, v)| (k.clone(), v.clone())));
        obs
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        let mut obs = self.inner.step(action)?;
        let env_reward = self.inner.reward();
        if !env_reward.is_finite() {
            return Err(EnvError::InvalidReward {
                term: "env".into(),
                value: env_reward.to_string(),
            });
        }
        self.turn += 1;
        self.tool_calls += u32::from(matches!(action.body, ActionBody::ToolCall(_)));
        self.env_return += env_reward;
        let view = StepView {
            action,
            observation: &obs,
            env_reward,
            env_return: self.env_return,
            done: self.inner.done(),
            turn: self.turn,
            tool_calls: self.tool_calls,
        };
        let mut breakdown = Map::new();
        let mut total = 0.0;
        for term in &mut self.terms {
            let value = term.reward(&view);
            if !value.is_finite() {
                return Err(EnvError::InvalidReward {
                    term: term.name().to_owned(),
                    value: value.to_string(),
                });
            }
            total += value;
            let slot = breakdown
                .entry(term.name().to_owned())
                .or_insert(Value::from(0.0));
            *slot = Value::from(slot.as_f64().unwrap_or(0.0) + value);
        }
        if let Some((lo, hi)) = self.clip {
            total = total.clamp(lo, hi);
        }
        self.reward = total;
        let mut added = Map::new();
        added.insert(REWARD_TERMS.into(), Value::Object(breakdown));
        // Success stays what the env's own reward says: an env without a `success` key is
        // judged on its own return, not on the composed one (a penalty does not turn a
        // solved task into a failure).
        if view.done.is_done() && !obs.info.contains_key(SUCCESS) {
            let success = episode_success(&obs.info, view.done, self.env_return);
            added.insert(SUCCESS.into(), Value::Bool(success));
        }
        obs.info
            .extend(added.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.added = added;
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        self.reward
    }

    fn done(&self) -> Done {
        self.inner.done()
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let terms = serde_json::to_vec(&self.added).expect("a JSON map serialises");
        let mut bytes = Vec::with_capacity(28 + terms.len());
        bytes.extend(self.reward.to_le_bytes());
        bytes.extend(self.env_return.to_le_bytes());
        bytes.extend(self.turn.to_le_bytes());
        bytes.extend(self.tool_calls.to_le_bytes());
        bytes.extend((terms.len() as u32).to_le_bytes());
        bytes.extend(terms);
        bytes.extend(self.inner.snapshot()?);
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let short = || EnvError::Snapshot {
            reason: "Reward snapshot shorter than its header".into(),
        };
        let (reward, rest) = snapshot.split_first_chunk::<8>().ok_or_else(short)?;
        let (env_return, rest) = rest.split_first_chunk::<8>().ok_or_else(short)?;
        let (turn, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
        let (calls, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
        let len = u32::from_le_bytes(*len) as usize;
        let (terms, rest) = rest.split_at_checked(len).ok_or_else(short)?;
        let added = serde_json::from_slice(terms).map_err(|e| EnvError::Snapshot {
            reason: format!("Reward snapshot: its terms are not JSON: {e}"),
        })?;
        self.inner.restore(rest)?;
        self.added = added;
        self.reward = f64::from_le_bytes(*reward);
        self.env_return = f64::from_le_bytes(*env_return);
        self.turn = u32::from_le_bytes(*turn);
        self.tool_calls = u32::from_le_bytes(*calls);
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

    /// A term that returns what it is told to.
    struct Fixed(f64);
    impl RewardFn for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn reward(&mut self, _: &StepView<'_>) -> f64 {
            self.0
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
        let (mut lo, mut hi) = (1, 100);
        let obs = loop {
            let guess = (lo + hi) / 2;
            let obs = env
                .step(&Action::tool("guess", json!({"number": guess})))
                .unwrap();
            if env.done().is_done() {
                break obs;
            }
            if obs.content.contains("higher") {
                lo = guess + 1
            } else {
                hi = guess - 1
            }
        };
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
}
