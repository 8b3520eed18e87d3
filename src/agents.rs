//! Agents that `sandgym run` can drive an env with.

use sandgym_env_api::{Action, Observation};
use sandgym_env_sql::SqlBaseline;
use sandgym_env_support::SupportBaseline;
use serde_json::json;

/// Something that picks actions from observations. It is given the reset observation (the
/// instruction) first, then each step's observation.
pub trait Agent {
    /// The next action.
    fn act(&mut self, observation: &Observation) -> Action;
}

impl Agent for SqlBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        SqlBaseline::act(self, observation)
    }
}

impl Agent for SupportBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        SupportBaseline::act(self, observation)
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

/// The scripted baseline of a bundled env, by id name.
pub fn baseline(env: &str) -> Option<Box<dyn Agent>> {
    let name = env
        .parse::<sandgym_env_api::EnvId>()
        .map_or(env.to_owned(), |id| id.name);
    match name.as_str() {
        "sql-agent" => Some(Box::new(SqlBaseline::default())),
        "customer-service" => Some(Box::new(SupportBaseline::default())),
        "guess-number" => Some(Box::new(BinarySearch::default())),
        _ => None,
    }
}
