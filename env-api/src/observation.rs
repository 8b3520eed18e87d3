//! What the agent sees.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `info` key under which a reset observation may narrow the env's response schema
/// ([`EnvSpec::response`](crate::EnvSpec::response)) for this one episode: a JSON Schema value
/// that constrained decoders use instead of the spec's for the episode's final answer (e.g.
/// the SQL agent offers only the episode's own tables, columns and the question's words as
/// string literals — what the agent has been shown, never the answer).
pub const RESPONSE_SCHEMA: &str = "response_schema";

/// What the agent sees after `reset` or `step`.
///
/// After `reset`, `content` is the task instruction; after a tool call it is the tool's output;
/// after a final response it is the env's closing message. `info` carries data for the trainer
/// and for debugging that the agent does not see (the task id, an injected fault, reward
/// components); it is never part of the prompt.
///
/// ```
/// use sandgym_env_api::Observation;
/// let obs = Observation::new("3 rows").with_info("rows", 3);
/// assert_eq!(obs.info["rows"], 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The text shown to the agent.
    pub content: String,
    /// Side information for the trainer, not shown to the agent.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub info: Map<String, Value>,
}

impl Observation {
    /// An observation with this content and no info.
    pub fn new(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            info: Map::new(),
        }
    }

    /// Adds one info entry.
    pub fn with_info(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.info.insert(key.into(), value.into());
        self
    }
}

/// Whether an episode is still going, and if not, why it stopped.
///
/// As in Gymnasium, *terminated* means the task reached an end state (the agent answered, or
/// failed for good), while *truncated* means a limit outside the task stopped it (a step
/// budget, a time limit); bootstrapping treats the two differently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Done {
    /// The episode goes on.
    #[default]
    Running,
    /// The task ended.
    Terminated,
    /// A limit ended the episode before the task did.
    Truncated,
}

impl Done {
    /// True unless [`Done::Running`].
    pub fn is_done(self) -> bool {
        self != Done::Running
    }
}
