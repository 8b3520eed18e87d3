//! One finished step as an Agent Template record.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Action, ActionBody, Done, REWARD_PARTS, REWARD_TERMS, ToolCall};

/// One finished step in Agent Template form: the instruction the agent worked on, its thought,
/// its tool call *or* final response, what it observed and the reward.
///
/// All six template keys are always written (`action` or `response` is `null`); `episode` and
/// `done` are additions for grouping records into trajectories, and `reward_terms` /
/// `reward_parts` the breakdown of a composed reward ([`Reward`](crate::Reward)); each is
/// omitted when unset.
///
/// ```
/// use sandgym_env_api::{Action, StepRecord};
/// use serde_json::json;
/// let r = StepRecord::new("Count users.", &Action::tool("run_sql", json!({"query": "SELECT 1"})), "1", 0.0);
/// let v = serde_json::to_value(&r)?;
/// assert_eq!(v["action"]["tool_name"], "run_sql");
/// assert!(v["response"].is_null());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The task instruction of the episode.
    pub instruction: String,
    /// The agent's reasoning.
    #[serde(default)]
    pub thought: String,
    /// The tool call, when the agent called a tool.
    #[serde(default)]
    pub action: Option<ToolCall>,
    /// What the agent saw after acting (tool output, or the error its action caused).
    #[serde(default)]
    pub observation: String,
    /// The final answer, when the agent answered.
    #[serde(default)]
    pub response: Option<String>,
    /// The reward of this step.
    pub reward: f64,
    /// The episode this record belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episode: Option<String>,
    /// Whether the episode ended with this step.
    #[serde(default, skip_serializing_if = "is_running")]
    pub done: Done,
    /// The terms of a composed reward for this step (`info.reward_terms`: name → value, their
    /// sum is the reward before any clip).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub reward_terms: Map<String, Value>,
    /// The named parts of the terms that give them (a reward plugin's rubric), by term
    /// (`info.reward_parts`: term → part → value).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub reward_parts: Map<String, Value>,
}

fn is_running(done: &Done) -> bool {
    *done == Done::Running
}

impl StepRecord {
    /// A record of `action` with its observation and reward.
    pub fn new(
        instruction: impl Into<String>,
        action: &Action,
        observation: impl Into<String>,
        reward: f64,
    ) -> Self {
        let (call, response) = match &action.body {
            ActionBody::ToolCall(call) => (Some(call.clone()), None),
            ActionBody::Response(text) => (None, Some(text.clone())),
        };
        Self {
            instruction: instruction.into(),
            thought: action.thought.clone(),
            action: call,
            observation: observation.into(),
            response,
            reward,
            episode: None,
            done: Done::Running,
            reward_terms: Map::new(),
            reward_parts: Map::new(),
        }
    }

    /// The same record with the reward breakdown of the step's observation info
    /// (`reward_terms`, `reward_parts`), where a composed reward gave one.
    pub fn with_breakdown(mut self, info: &Map<String, Value>) -> Self {
        self.set_breakdown(info);
        self
    }

    /// Sets the record's reward breakdown from a step's observation info (see
    /// [`with_breakdown`](Self::with_breakdown)).
    pub fn set_breakdown(&mut self, info: &Map<String, Value>) {
        let object = |key: &str| match info.get(key) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        self.reward_terms = object(REWARD_TERMS);
        self.reward_parts = object(REWARD_PARTS);
    }

    /// The agent turn this record holds, if it holds exactly one of a call or a response.
    pub fn to_action(&self) -> Option<Action> {
        let body = match (&self.action, &self.response) {
            (Some(call), None) => ActionBody::ToolCall(call.clone()),
            (None, Some(text)) => ActionBody::Response(text.clone()),
            _ => return None,
        };
        Some(Action {
            thought: self.thought.clone(),
            body,
        })
    }
}
