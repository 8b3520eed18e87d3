//! Agents that `sandgym run` can drive an env with.

use sandgym_env_api::{Action, EnvSpec, Narrowing, Observation, SplitMix64};
use sandgym_env_sql::{SqlBaseline, SqlGold};
use sandgym_env_support::{SupportBaseline, SupportGold};
use serde_json::json;

/// Something that picks actions from observations. It is given the reset observation (the
/// instruction) first, then each step's observation.
pub trait Agent {
    /// The next action.
    fn act(&mut self, observation: &Observation) -> Action;

    /// Why the agent could not decide its last action (e.g. its model server failed), in
    /// which case that action is a placeholder and the episode should end as failed.
    fn failure(&self) -> Option<&str> {
        None
    }

    /// Whether its last action is one to learn from: `false` for a demonstrator's deliberate
    /// mistake, which SFT shows as context but does not imitate.
    fn imitate(&self) -> bool {
        true
    }
}

/// What a demonstrator plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demonstration {
    /// Each task's solution.
    Solution,
    /// A typical mistake first, then the recovery (where the demonstrator models one).
    Recovery,
}

impl Agent for SqlBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        SqlBaseline::act(self, observation)
    }
}

impl Agent for SqlGold {
    fn act(&mut self, observation: &Observation) -> Action {
        SqlGold::act(self, observation)
    }

    fn imitate(&self) -> bool {
        !self.mistaken()
    }
}

impl Agent for SupportBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        SupportBaseline::act(self, observation)
    }
}

impl Agent for SupportGold {
    fn act(&mut self, observation: &Observation) -> Action {
        SupportGold::act(self, observation)
    }
}

/// The scripted baseline for guess-number: binary search on the hints.
#[derive(Clone, Debug, Default)]
pub struct BinarySearch {
    range: (u64, u64),
    last: u64,
}

impl Agent for BinarySearch {
    fn act(&mut self, observation: &Observation) -> Action {
        let text = observation.content.as_str();
        if let Some(max) = text
            .split("between 1 and ")
            .nth(1)
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse().ok())
        {
            self.range = (1, max);
        } else if text == "higher" {
            self.range.0 = self.last + 1;
        } else if text == "lower" {
            self.range.1 = self.last.saturating_sub(1);
        }
        self.last = (self.range.0 + self.range.1) / 2;
        Action::tool("guess", json!({"number": self.last.max(1)})).with_thought("halve the range")
    }
}

/// The scripted baseline of a bundled env, by id or name (see [`crate::registry`]).
pub fn baseline(env: &str) -> Option<Box<dyn Agent>> {
    crate::registry::bundled(env)?.baseline.map(|make| make())
}

/// The demonstrator of a bundled env made with `config` (an agent that plays each task's
/// known solution, or its recovery from a mistake), if it has one.
pub fn demonstrator(
    env: &str,
    config: &serde_json::Map<String, serde_json::Value>,
    kind: Demonstration,
) -> anyhow::Result<Option<Box<dyn Agent>>> {
    match crate::registry::bundled(env).and_then(|b| b.demonstrator) {
        Some(make) => Ok(Some(make(config, kind)?)),
        None => Ok(None),
    }
}

/// Random valid actions, for any env: each turn the final response or one of the spec's tools,
/// chosen uniformly, with parameters drawn from the tool's schema
/// ([`Schema::example`](sandgym_env_api::Schema::example)) as the episode narrows it
/// ([`Narrowing`]); the response likewise from the narrowed or the spec's response schema,
/// else empty. The floor a learned agent should clear on an env without a baseline.
///
/// ```
/// use sandgym::agents::{Agent, RandomAgent};
/// use sandgym_env_api::{Env, ResetOptions, toy::GuessNumber, validate_action};
/// let mut env = GuessNumber::new();
/// let mut agent = RandomAgent::new(env.spec(), 7);
/// let obs = env.reset(0, &ResetOptions::default()).unwrap();
/// let action = agent.act(&obs);
/// assert!(validate_action(&env.spec().tools, &action).is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct RandomAgent {
    spec: EnvSpec,
    episode: EnvSpec,
    rng: SplitMix64,
}

impl RandomAgent {
    /// An agent for envs of `spec`, its draws seeded by `seed`.
    pub fn new(spec: &EnvSpec, seed: u64) -> Self {
        Self {
            spec: spec.clone(),
            episode: spec.clone(),
            rng: SplitMix64::new(seed),
        }
    }
}

impl Agent for RandomAgent {
    fn act(&mut self, observation: &Observation) -> Action {
        // A reset observation that narrows the spec sets this episode's schemas.
        if let Ok(Some(narrowing)) = Narrowing::from_info(&observation.info) {
            self.episode = narrowing
                .apply(&self.spec)
                .unwrap_or_else(|_| self.spec.clone());
        }
        let tools = &self.episode.tools;
        // One pick past the tools is a final response, where the env takes one.
        let choices =
            tools.len() as u64 + u64::from(self.episode.accepts_response || tools.is_empty());
        let pick = self.rng.below(choices) as usize;
        match tools.get(pick) {
            Some(tool) => Action::tool(tool.name.clone(), tool.parameters.example(&mut self.rng)),
            None => {
                let response = self.episode.response.as_ref();
                let text = match response.map(|s| s.example(&mut self.rng)) {
                    Some(serde_json::Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                Action::respond(text)
            }
        }
    }
}
