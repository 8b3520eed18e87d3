//! `unit-convert-v0`: convert a quantity between units, with a `factor` tool.
//!
//! An env written the way the README's "Write your own environment" shows, that lives outside
//! sandgym's bundled list: it is not registered anywhere, and exists only as this guest
//! component. The CLI tests check, run, evaluate and train it by its `.wasm` path, the way a
//! user's own env is used.
//!
//! Each episode asks to convert a whole number of one unit (length, mass or time) into
//! another. `factor {from, to}` answers how many `to` make one `from`; the final response is
//! the number. Reward 1 when it equals the exact conversion (relative error ≤ 1e-6), else 0.
//! The train and test splits draw their questions from different seeds' streams.
//! Configuration: `{"max_value": N}` (default 50) bounds the quantity.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Narrowing, Observation, ResetOptions,
    Result, Schema, Split, SplitMix64, ToolSpec, begin_step,
};

/// Units by family, each with its size in the family's base unit.
const UNITS: [(&str, &str, f64); 9] = [
    ("length", "mm", 0.001),
    ("length", "cm", 0.01),
    ("length", "m", 1.0),
    ("length", "km", 1000.0),
    ("mass", "g", 1.0),
    ("mass", "kg", 1000.0),
    ("time", "s", 1.0),
    ("time", "min", 60.0),
    ("time", "h", 3600.0),
];

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct State {
    reset: bool,
    value: u64,
    from: usize,
    to: usize,
    last: Observation,
    reward: f64,
    done: Done,
}

/// The env.
pub struct UnitConvert {
    spec: EnvSpec,
    max_value: u64,
    state: State,
}

impl UnitConvert {
    /// Builds from its configuration: `{}` or `{"max_value": N}` (1..=1,000,000).
    pub fn from_config(config: &Map<String, Value>) -> Result<Self> {
        let mut max_value = 50;
        for (key, value) in config {
            match (key.as_str(), value.as_u64()) {
                ("max_value", Some(n)) if (1..=1_000_000).contains(&n) => max_value = n,
                _ => {
                    return Err(EnvError::InvalidConfig {
                        reason: format!(
                            "unknown or invalid option `{key}`: {value} (allowed: max_value, an integer 1..=1000000)"
                        ),
                    });
                }
            }
        }
        let units = || Schema::string().with_enum(UNITS.iter().map(|u| u.1));
        let factor = ToolSpec::new("factor", "How many `to` units make one `from` unit.")
            .with_parameters(Schema::object().property("from", units(), true).property(
                "to",
                units(),
                true,
            ));
        let spec = EnvSpec::new(EnvId::new("unit-convert", 0).expect("a valid id"))
            .with_description("Convert a quantity between units; answer with the number.")
            .with_tool(factor)
            .with_reward_range(0.0, 1.0)
            .with_max_episode_steps(4);
        Ok(Self {
            spec,
            max_value,
            state: State::default(),
        })
    }
}

/// The conversion factor from unit `a` to unit `b`, when they measure the same thing.
fn factor(a: usize, b: usize) -> Option<f64> {
    (UNITS[a].0 == UNITS[b].0).then(|| UNITS[a].2 / UNITS[b].2)
}

/// A number as people write it: no trailing zeros, at most 6 decimals.
fn show(x: f64) -> String {
    let s = format!("{:.6}", x);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

impl Env for UnitConvert {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        if let Some(task) = &options.task {
            return Err(EnvError::InvalidOptions {
                reason: format!("unit-convert has no named tasks (got `{task}`)"),
            });
        }
        let salt = match options.split {
            Split::Train => 0,
            Split::Test => 0x5EED_7E57,
        };
        let mut rng = SplitMix64::new(seed ^ salt);
        let from = rng.below(UNITS.len() as u64) as usize;
        let same: Vec<usize> = (0..UNITS.len())
            .filter(|&u| u != from && factor(from, u).is_some())
            .collect();
        let to = *rng.choose(&same);
        let value = rng.below(self.max_value) + 1;
        // This episode's narrowing: `factor` between its own two units, a number as answer.
        let units = || Schema::string().with_enum([UNITS[from].1, UNITS[to].1]);
        let narrowing = Narrowing::default()
            .tool(
                "factor",
                Schema::object()
                    .property("from", units(), true)
                    .property("to", units(), true),
            )
            .response(Schema::string().with_pattern("-?[0-9]{1,12}(\\.[0-9]{1,6})?"));
        let last = Observation::new(format!(
            "Convert {value} {} to {}. Answer with the number only.",
            UNITS[from].1, UNITS[to].1
        ))
        .with_narrowing(&narrowing);
        self.state = State {
            reset: true,
            value,
            from,
            to,
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
        let unit = |name: &Value| {
            UNITS
                .iter()
                .position(|u| Some(u.1) == name.as_str())
                .unwrap_or(0)
        };
        let s = &mut self.state;
        let (content, reward, done) = match &action.body {
            ActionBody::ToolCall(call) => {
                let (a, b) = (unit(&call.parameters["from"]), unit(&call.parameters["to"]));
                let text = match factor(a, b) {
                    Some(f) => format!("1 {} = {} {}", UNITS[a].1, show(f), UNITS[b].1),
                    None => format!("{} and {} measure different things", UNITS[a].1, UNITS[b].1),
                };
                (text, 0.0, Done::Running)
            }
            ActionBody::Response(answer) => {
                let truth = s.value as f64 * factor(s.from, s.to).unwrap_or(f64::NAN);
                let right = answer
                    .trim()
                    .parse::<f64>()
                    .is_ok_and(|x| (x - truth).abs() <= 1e-6 * truth.abs().max(1.0));
                let text = if right { "Correct." } else { "Wrong." };
                let obs = Observation::new(text).with_info("success", right);
                s.last = obs.clone();
                s.reward = f64::from(u8::from(right));
                s.done = Done::Terminated;
                return Ok(obs);
            }
        };
        s.last = Observation::new(content);
        s.reward = reward;
        s.done = done;
        Ok(s.last.clone())
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
            reason: format!("not a unit-convert snapshot: {e}"),
        })?;
        Ok(())
    }
}

sandgym_guest::export_env!(UnitConvert::from_config);
