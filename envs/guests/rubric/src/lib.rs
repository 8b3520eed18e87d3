//! A rubric as a reward plugin: criteria over what the agent said to the user, rules on the
//! order of its tool calls, a cost per tool call and a bonus for success, each a named part of
//! the score. Its defaults grade `customer-service-v0`'s replies (courtesy, next steps, the
//! identity check before any change to an order); every part is configurable, so the same
//! plugin rewards other envs:
//!
//! ```json
//! {"name": "rubric",
//!  "criteria": [{"name": "courtesy", "any": ["thank", "sorry"], "weight": 0.1}],
//!  "rules": [{"name": "identity_first", "require": "lookup_customer",
//!             "before": ["cancel_order"], "weight": -0.25}],
//!  "tool_cost": 0.02, "success": 0.0}
//! ```
//!
//! A criterion scores `weight` at the end of the episode when any of its phrases is in the
//! agent's messages (its final response and the `message_params` of its tool calls,
//! case-insensitive); a rule scores `weight` at the end when a tool of `before` was called
//! before `require` ever was; every tool call costs `tool_cost`; `success` is paid at the end
//! when the env says the episode succeeded.

use sandgym_env_api::{StepRecord, episode_success};
use sandgym_reward_guest::{RewardPlugin, Score};
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Criterion {
    name: String,
    any: Vec<String>,
    weight: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    name: String,
    require: String,
    before: Vec<String>,
    weight: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Rubric {
    name: String,
    criteria: Vec<Criterion>,
    rules: Vec<Rule>,
    /// Tool parameters that hold a message to the user.
    message_params: Vec<String>,
    tool_cost: f64,
    success: f64,
}

impl Default for Rubric {
    fn default() -> Self {
        let criterion = |name: &str, any: &[&str], weight| Criterion {
            name: name.into(),
            any: any.iter().map(|s| s.to_string()).collect(),
            weight,
        };
        Self {
            name: "rubric".into(),
            criteria: vec![
                criterion(
                    "courtesy",
                    &[
                        "thank",
                        "sorry",
                        "apolog",
                        "please",
                        "happy to help",
                        "can help",
                        "glad to",
                    ],
                    0.1,
                ),
                criterion(
                    "next_steps",
                    &["business day", "within", "you will", "you'll", "tracking"],
                    0.1,
                ),
            ],
            rules: vec![Rule {
                name: "identity_first".into(),
                require: "lookup_customer".into(),
                before: [
                    "cancel_order",
                    "create_return",
                    "update_address",
                    "send_email",
                ]
                .map(String::from)
                .to_vec(),
                weight: -0.25,
            }],
            message_params: vec!["message".into(), "body".into()],
            tool_cost: 0.0,
            success: 0.0,
        }
    }
}

impl Rubric {
    fn from_config(config: &Map<String, Value>) -> Result<Self, String> {
        let rubric: Rubric = serde_json::from_value(Value::Object(config.clone()))
            .map_err(|e| format!("rubric configuration: {e}"))?;
        let weights = rubric
            .criteria
            .iter()
            .map(|c| (c.name.as_str(), c.weight))
            .chain(rubric.rules.iter().map(|r| (r.name.as_str(), r.weight)))
            .chain([("tool_cost", rubric.tool_cost), ("success", rubric.success)]);
        for (name, weight) in weights {
            if !weight.is_finite() {
                return Err(format!("rubric: the weight of {name} is not finite"));
            }
        }
        if rubric.tool_cost < 0.0 {
            return Err("rubric: tool_cost is a cost, give it as a non-negative number".into());
        }
        if let Some(c) = rubric
            .criteria
            .iter()
            .find(|c| c.any.iter().any(String::is_empty))
        {
            return Err(format!("rubric: criterion {} has an empty phrase", c.name));
        }
        Ok(rubric)
    }

    /// The weights paid (at most once each) at the end of an episode.
    fn final_weights(&self) -> impl Iterator<Item = f64> + '_ {
        self.criteria
            .iter()
            .map(|c| c.weight)
            .chain(self.rules.iter().map(|r| r.weight))
            .chain([self.success])
    }

    fn messages(&self, episode: &[StepRecord]) -> String {
        let mut said = String::new();
        for record in episode {
            if let Some(response) = &record.response {
                said.push_str(response);
                said.push('\n');
            }
            if let Some(call) = &record.action {
                for param in &self.message_params {
                    if let Some(Value::String(text)) = call.parameters.get(param) {
                        said.push_str(text);
                        said.push('\n');
                    }
                }
            }
        }
        said.to_lowercase()
    }
}

impl RewardPlugin for Rubric {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn range(&self) -> (f64, f64) {
        let (neg, pos) = self.final_weights().fold((0.0, 0.0), |(neg, pos), w: f64| {
            (neg + w.min(0.0), pos + w.max(0.0))
        });
        (neg - self.tool_cost, pos)
    }

    fn score(
        &mut self,
        episode: &[StepRecord],
        info: &Map<String, Value>,
    ) -> Result<Score, String> {
        let last = episode.last().ok_or("the episode has no step")?;
        let mut score = Score::default();
        if last.action.is_some() && self.tool_cost != 0.0 {
            score = score.with_part("tool_cost", -self.tool_cost);
        }
        if last.done.is_done() {
            let said = self.messages(episode);
            for c in &self.criteria {
                if c.any.iter().any(|p| said.contains(&p.to_lowercase())) {
                    score = score.with_part(c.name.clone(), c.weight);
                }
            }
            let calls: Vec<&str> = episode
                .iter()
                .filter_map(|r| r.action.as_ref().map(|a| a.tool_name.as_str()))
                .collect();
            for rule in &self.rules {
                let required = calls.iter().position(|t| *t == rule.require);
                let changed = calls
                    .iter()
                    .position(|t| rule.before.iter().any(|b| b == t));
                if changed.is_some_and(|c| required.is_none_or(|r| c < r)) {
                    score = score.with_part(rule.name.clone(), rule.weight);
                }
            }
            let total: f64 = episode.iter().map(|r| r.reward).sum();
            if self.success != 0.0 && episode_success(info, last.done, total) {
                score = score.with_part("success", self.success);
            }
        }
        score.reward = score.parts.iter().map(|(_, v)| v).sum();
        Ok(score)
    }
}

sandgym_reward_guest::export_reward!(Rubric::from_config);
