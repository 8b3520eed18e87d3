//! What an env is: its id, tools and declared limits.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{EnvError, Result, Schema, ToolSpec};

/// A versioned env id such as `sql-agent-v0`: a name of lowercase ASCII letters, digits and
/// `-`/`_`, then `-v` and a version number. Bump the version whenever a change could alter
/// episodes or rewards, so results stay comparable.
///
/// ```
/// use sandgym_env_api::EnvId;
/// let id: EnvId = "sql-agent-v0".parse()?;
/// assert_eq!((id.name.as_str(), id.version), ("sql-agent", 0));
/// assert!("sql-agent".parse::<EnvId>().is_err());
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EnvId {
    /// The name without the version suffix.
    pub name: String,
    /// The version number.
    pub version: u32,
}

impl EnvId {
    /// Builds an id, checking the name.
    pub fn new(name: impl Into<String>, version: u32) -> Result<Self> {
        let name = name.into();
        check_name(&name).map_err(|reason| EnvError::InvalidId {
            id: format!("{name}-v{version}"),
            reason,
        })?;
        Ok(Self { name, version })
    }
}

fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "`{c}` is not allowed (use lowercase letters, digits, - and _)"
        ));
    }
    Ok(())
}

impl FromStr for EnvId {
    type Err = EnvError;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = |reason: &str| EnvError::InvalidId {
            id: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (name, version) = s
            .rsplit_once("-v")
            .ok_or_else(|| invalid("expected `name-vN`, e.g. `sql-agent-v0`"))?;
        let version = version
            .parse()
            .map_err(|_| invalid("the version after `-v` must be a number"))?;
        EnvId::new(name, version)
            .map_err(|_| invalid(&check_name(name).expect_err("EnvId::new only fails on the name")))
    }
}

impl fmt::Display for EnvId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-v{}", self.name, self.version)
    }
}

impl Serialize for EnvId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EnvId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The static description of an env: id, tools and the bounds it promises to respect.
///
/// `check_env` verifies the promises (rewards inside `reward_range`, tools valid).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    /// The versioned id.
    pub id: EnvId,
    /// One paragraph for humans: what the agent must do and how it is rewarded.
    #[serde(default)]
    pub description: String,
    /// The tools the agent may call, in a stable order.
    pub tools: Vec<ToolSpec>,
    /// Inclusive bounds of every reward `reward()` returns.
    pub reward_range: (f64, f64),
    /// The step budget after which wrappers such as `TimeLimit` truncate, if the env has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_episode_steps: Option<u32>,
    /// The shape of a final response, when the env expects a particular one (a string schema,
    /// typically with a `pattern`, e.g. "one SQL query over these tables"). Like a parameter
    /// pattern it is carried to constrained decoders, which enforce it while sampling; the env
    /// still checks the response itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Schema>,
    /// How many tasks each split holds, for an env with a fixed task list (`None` when
    /// episodes are generated from the seed). Evaluators play seeds `0..n` with
    /// [`ResetOptions::cycle`](crate::ResetOptions::cycle) to play every task once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<TaskCounts>,
    /// Whether the env takes a final response at all (`true` for most; `false` for an env
    /// whose episodes end only when the env says so, e.g. an OpenEnv env of MCP tools).
    /// Constrained decoders then allow tool calls only.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub accepts_response: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

/// The sizes of an env's task splits (see [`EnvSpec::tasks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskCounts {
    /// Tasks of the train split.
    pub train: u64,
    /// Tasks of the test split.
    pub test: u64,
}

impl TaskCounts {
    /// The counts of a task list given by each task's split.
    pub fn of(splits: impl IntoIterator<Item = crate::Split>) -> Self {
        let mut counts = Self::default();
        for split in splits {
            match split {
                crate::Split::Train => counts.train += 1,
                crate::Split::Test => counts.test += 1,
            }
        }
        counts
    }

    /// The number of tasks in `split`.
    pub fn get(&self, split: crate::Split) -> u64 {
        match split {
            crate::Split::Train => self.train,
            crate::Split::Test => self.test,
        }
    }
}

impl EnvSpec {
    /// A spec with no tools, rewards in `[0, 1]` and no step budget.
    pub fn new(id: EnvId) -> Self {
        Self {
            id,
            description: String::new(),
            tools: Vec::new(),
            reward_range: (0.0, 1.0),
            max_episode_steps: None,
            response: None,
            tasks: None,
            accepts_response: true,
        }
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds a tool.
    pub fn with_tool(mut self, tool: ToolSpec) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the reward range.
    pub fn with_reward_range(mut self, low: f64, high: f64) -> Self {
        self.reward_range = (low, high);
        self
    }

    /// Sets the step budget.
    pub fn with_max_episode_steps(mut self, steps: u32) -> Self {
        self.max_episode_steps = Some(steps);
        self
    }

    /// Declares that the env takes no final response (see [`EnvSpec::accepts_response`]).
    pub fn without_response(mut self) -> Self {
        self.accepts_response = false;
        self
    }

    /// Declares the schema of a final response (see [`EnvSpec::response`]).
    pub fn with_response(mut self, schema: Schema) -> Self {
        self.response = Some(schema);
        self
    }

    /// Declares the sizes of a fixed task list (see [`EnvSpec::tasks`]).
    pub fn with_tasks(mut self, counts: TaskCounts) -> Self {
        self.tasks = Some(counts);
        self
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tool names, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}
