//! The gold demonstrator: an agent that answers every task with its gold query.

use std::collections::HashMap;

use sandgym_env_api::{Action, Observation, Result};
use serde_json::{Map, Value};

use crate::SqlConfig;
use crate::tasks::TaskSet;

/// Plays the gold solution of each task: it runs the task's gold query once (as an agent
/// checking its answer would), then answers with it. Its episodes are demonstrations for a
/// supervised warm-start that cover every intent, joins included — which the scripted
/// [`SqlBaseline`](crate::SqlBaseline) never answers right. It reads the task from the reset
/// observation's `task` info, so it plays the env built from the same configuration.
///
/// ```
/// use sandgym_env_api::{Env, ResetOptions};
/// use sandgym_env_sql::{SqlAgentEnv, SqlGold};
/// let mut env = SqlAgentEnv::new()?;
/// let mut agent = SqlGold::from_config(&Default::default())?;
/// let mut obs = env.reset(5, &ResetOptions::default())?;
/// while !env.done().is_done() {
///     obs = env.step(&agent.act(&obs))?;
/// }
/// assert_eq!(obs.info["success"], true);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SqlGold {
    gold: HashMap<String, String>,
    planned: Option<String>,
}

impl SqlGold {
    /// The demonstrator of the tasks of an env configuration (see [`SqlConfig`]).
    pub fn from_config(config: &Map<String, Value>) -> Result<Self> {
        let set = SqlConfig::from_map(config)?.task_set()?;
        Ok(Self::new(&set))
    }

    /// The demonstrator of `tasks`.
    pub fn new(tasks: &TaskSet) -> Self {
        Self {
            gold: tasks
                .tasks
                .iter()
                .map(|t| (t.id.clone(), t.gold_sql.clone()))
                .collect(),
            planned: None,
        }
    }

    /// The next action given the latest observation (the instruction starts an episode).
    pub fn act(&mut self, observation: &Observation) -> Action {
        if let Some(query) = observation
            .info
            .get("task")
            .and_then(Value::as_str)
            .and_then(|id| self.gold.get(id))
        {
            self.planned = Some(query.clone());
            return Action::tool("run_sql", serde_json::json!({"query": query}))
                .with_thought("Check the query before answering.");
        }
        let query = self.planned.take().unwrap_or_else(|| "SELECT 1".into());
        Action::respond(query).with_thought("The query ran; answer with it.")
    }
}
