//! [`RandomAgent`]: random valid actions for any env.

use serde_json::Value;

use crate::{Action, Agent, EnvSpec, Narrowing, Observation, SplitMix64};

/// Random valid actions, for any env: each turn the final response or one of the spec's tools,
/// chosen uniformly, with parameters drawn from the tool's schema
/// ([`Schema::example`](crate::Schema::example)) as the episode narrows it ([`Narrowing`]);
/// the response likewise from the narrowed or the spec's response schema, else empty. The
/// floor a learned agent should clear on an env without a baseline.
///
/// ```
/// use sandgym_env_api::{Agent, Env, RandomAgent, ResetOptions, toy::GuessNumber, validate_action};
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
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                Action::respond(text)
            }
        }
    }
}
