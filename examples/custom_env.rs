//! Implement the `Env` trait for a new task, check it, and run an episode.
//!
//! Run it with: `cargo run --example custom_env`

use sandgym::env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Observation, RecordTrajectory,
    ResetOptions, Result, Schema, SplitMix64, ToolSpec, check_env, validate_action,
};
use serde_json::json;

/// A tiny arithmetic task: the agent may call `add` and must answer with the sum.
struct AddEnv {
    spec: EnvSpec,
    numbers: (i64, i64),
    last: Observation,
    reward: f64,
    done: Done,
}

impl AddEnv {
    fn new() -> Self {
        let spec = EnvSpec::new(EnvId::new("add", 0).expect("valid id"))
            .with_description("Add two numbers, with a calculator tool.")
            .with_tool(
                ToolSpec::new("add", "Return a + b.").with_parameters(
                    Schema::object()
                        .property("a", Schema::integer(), true)
                        .property("b", Schema::integer(), true),
                ),
            )
            .with_max_episode_steps(4);
        Self {
            spec,
            numbers: (0, 0),
            last: Observation::default(),
            reward: 0.0,
            done: Done::Running,
        }
    }
}

impl Env for AddEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, _options: &ResetOptions) -> Result<Observation> {
        let mut rng = SplitMix64::new(seed); // all randomness from the seed
        self.numbers = (rng.below(100) as i64, rng.below(100) as i64);
        self.reward = 0.0;
        self.done = Done::Running;
        self.last = Observation::new(format!(
            "What is {} + {}? Answer with the number.",
            self.numbers.0, self.numbers.1
        ));
        Ok(self.last.clone())
    }

    fn observe(&self) -> Observation {
        self.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        if self.done.is_done() {
            return Err(EnvError::EpisodeOver { done: self.done });
        }
        validate_action(&self.spec.tools, action)?; // unknown tools, bad parameters
        self.last = match &action.body {
            ActionBody::ToolCall(call) => {
                let a = call.parameters["a"].as_i64().unwrap_or_default();
                let b = call.parameters["b"].as_i64().unwrap_or_default();
                Observation::new(a.wrapping_add(b).to_string())
            }
            ActionBody::Response(answer) => {
                let correct = answer.trim() == (self.numbers.0 + self.numbers.1).to_string();
                self.reward = if correct { 1.0 } else { 0.0 };
                self.done = Done::Terminated;
                Observation::new(if correct { "Correct." } else { "Wrong." })
            }
        };
        Ok(self.last.clone())
    }

    fn reward(&self) -> f64 {
        self.reward
    }

    fn done(&self) -> Done {
        self.done
    }
}

fn main() -> anyhow::Result<()> {
    let report = check_env(&mut AddEnv::new());
    print!("{report}");
    anyhow::ensure!(report.is_ok(), "AddEnv breaks the Env contract");

    let mut env = RecordTrajectory::new(AddEnv::new());
    let task = env.reset(42, &ResetOptions::default())?;
    println!("task: {}", task.content);
    let (a, b) = env.inner().numbers;
    let sum =
        env.step(&Action::tool("add", json!({"a": a, "b": b})).with_thought("use the tool"))?;
    env.step(&Action::respond(sum.content))?;
    env.take_trajectory().write_jsonl(std::io::stdout())?;
    Ok(())
}
