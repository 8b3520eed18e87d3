//! A small reference env: guess a secret number with `higher`/`lower` hints.
//!
//! It is the shortest complete implementation of the contract (seeding, validation, ending,
//! snapshots) and the env the tests, docs and the trainer's learning test use.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    Action, ActionBody, Agent, Done, Env, EnvError, EnvId, EnvPackage, EnvSpec, Observation,
    Preset, ResetOptions, Result, Schema, SplitMix64, ToolSpec, begin_step,
};

/// guess-number as a package: its binary-search baseline, no demonstrator, no harness.
pub const PACKAGE: EnvPackage = EnvPackage {
    name: "guess-number",
    guest: "guess-number",
    register: GuessNumber::register,
    baseline: Some(|| Box::new(BinarySearch::default())),
    demonstrator: None,
    // A few short turns.
    presets: &[Preset::any(
        r#"{"rollout": {"max_turns": 8, "max_new_tokens": 48, "max_context": 700, "response_chars": 16}}"#,
    )],
    train_config: None,
    harness: None,
    source: &[],
};

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
        Action::tool("guess", serde_json::json!({"number": self.last.max(1)}))
            .with_thought("halve the range")
    }
}

/// Guess a secret integer in `1..=max` (default 100). Each `guess` returns `higher`, `lower` or
/// `correct`; a correct guess ends the episode with reward 1, any final response ends it with
/// reward 0. The secret is drawn from the reset seed.
///
/// Configuration (via [`GuessNumber::from_config`]): `{"max": 8}` for a smaller range.
#[derive(Debug)]
pub struct GuessNumber {
    spec: EnvSpec,
    max: u32,
    state: State,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    reset: bool,
    secret: u32,
    last: Observation,
    reward: f64,
    done: Done,
}

impl Default for GuessNumber {
    fn default() -> Self {
        Self::new()
    }
}

impl GuessNumber {
    /// The default env, secret in `1..=100`.
    pub fn new() -> Self {
        Self::with_max(100)
    }

    /// An env whose secret lies in `1..=max` (`max >= 1`).
    pub fn with_max(max: u32) -> Self {
        let max = max.max(1);
        let spec = EnvSpec::new(EnvId::new("guess-number", 0).expect("valid id"))
            .with_description(
                "Find a secret number from higher/lower hints. Reward 1 for finding it.",
            )
            .with_tool(
                ToolSpec::new(
                    "guess",
                    "Guess the secret number; the reply is higher, lower or correct.",
                )
                .with_parameters(Schema::object().property(
                    "number",
                    Schema::integer().with_range(1.0, f64::from(max)),
                    true,
                )),
            )
            .with_reward_range(0.0, 1.0)
            .with_max_episode_steps(max.ilog2() + 3);
        Self {
            spec,
            max,
            state: State::default(),
        }
    }

    /// Builds from a registry configuration: `{}` or `{"max": N}`.
    pub fn from_config(config: &Map<String, Value>) -> Result<Self> {
        let mut max = 100;
        for (key, value) in config {
            match (key.as_str(), value.as_u64()) {
                ("max", Some(m)) if (1..=1_000_000).contains(&m) => max = m as u32,
                _ => {
                    return Err(EnvError::InvalidConfig {
                        reason: format!(
                            "unknown or invalid option `{key}`: {value} (allowed: max, an integer 1..=1000000)"
                        ),
                    });
                }
            }
        }
        Ok(Self::with_max(max))
    }

    /// Registers `guess-number-v0` in the process-wide registry.
    pub fn register() {
        crate::register(
            "guess-number-v0",
            "Find a secret number from higher/lower hints.",
            |c| Ok(Box::new(GuessNumber::from_config(c)?)),
        )
        .expect("valid id");
    }
}

impl Env for GuessNumber {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        if let Some(task) = &options.task {
            return Err(EnvError::InvalidOptions {
                reason: format!("guess-number has no named tasks (got `{task}`)"),
            });
        }
        let secret = SplitMix64::new(seed).below(u64::from(self.max)) as u32 + 1;
        let last = Observation::new(format!(
            "Find the secret integer between 1 and {}. Call `guess` with a number; I answer higher, lower or correct.",
            self.max
        ));
        self.state = State {
            reset: true,
            secret,
            last: last.clone(),
            reward: 0.0,
            done: Done::Running,
        };
        Ok(last)
    }

    fn observe(&self) -> Observation {
        self.state.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        begin_step(self.state.reset, self.state.done, &self.spec.tools, action)?;
        let (content, reward, done) = match &action.body {
            ActionBody::Response(_) => ("You gave up.".to_owned(), 0.0, Done::Terminated),
            ActionBody::ToolCall(call) => {
                let guess = call.parameters["number"].as_f64().unwrap_or_default() as u32;
                match guess.cmp(&self.state.secret) {
                    std::cmp::Ordering::Less => ("higher".to_owned(), 0.0, Done::Running),
                    std::cmp::Ordering::Greater => ("lower".to_owned(), 0.0, Done::Running),
                    std::cmp::Ordering::Equal => ("correct".to_owned(), 1.0, Done::Terminated),
                }
            }
        };
        self.state.last = Observation::new(content);
        self.state.reward = reward;
        self.state.done = done;
        Ok(self.state.last.clone())
    }

    fn reward(&self) -> f64 {
        self.state.reward
    }

    fn done(&self) -> Done {
        self.state.done
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        serde_json::to_vec(&self.state).map_err(|e| EnvError::Snapshot {
            reason: e.to_string(),
        })
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        self.state = serde_json::from_slice(snapshot).map_err(|e| EnvError::Snapshot {
            reason: format!("not a guess-number snapshot: {e}"),
        })?;
        Ok(())
    }
}
