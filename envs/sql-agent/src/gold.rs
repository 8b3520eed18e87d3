//! The gold demonstrator: an agent that answers every task with its gold query.

use std::collections::HashMap;

use sandgym_env_api::{Action, Agent, Observation, Result};
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
/// use sandgym_env_api::{Agent, Env, ResetOptions};
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
    recovering: bool,
    planned: Option<String>,
    /// Whether the last action was the deliberate mistake of a recovery demonstration.
    mistaken: bool,
    /// Whether the gold query still has to run (after a mistake).
    repair: bool,
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
            recovering: false,
            planned: None,
            mistaken: false,
            repair: false,
        }
    }

    /// This demonstrator playing recoveries: on a task whose gold query joins tables it first
    /// runs the query without its `JOIN … ON` clauses ([`without_joins`]), a mistake the
    /// constrained decoder admits (a qualified column may name any table of the database) and
    /// the engine rejects; it reads the error, runs the gold query and answers. Other tasks it
    /// plays as before.
    ///
    /// ```
    /// use sandgym_env_api::{Agent, Env, ResetOptions, Split};
    /// use sandgym_env_sql::{SqlAgentEnv, SqlGold};
    /// let mut env = SqlAgentEnv::new()?;
    /// let options = ResetOptions::split(Split::Train).cycling();
    /// let train = env.tasks().tasks.iter().filter(|t| t.split == Split::Train).count();
    /// let (mut recovered, mut joins) = (0, 0);
    /// for seed in 0..train as u64 {
    ///     let mut agent = SqlGold::from_config(&Default::default())?.recovering();
    ///     let mut obs = env.reset(seed, &options)?;
    ///     let mut mistake = false;
    ///     while !env.done().is_done() {
    ///         let action = agent.act(&obs);
    ///         let wrong = agent.mistaken();
    ///         obs = env.step(&action)?;
    ///         // The engine rejects the mistake; the agent reads the error.
    ///         assert!(!wrong || obs.content.starts_with("error:"), "{}", obs.content);
    ///         mistake |= wrong;
    ///     }
    ///     assert_eq!(obs.info["success"], true);
    ///     recovered += usize::from(mistake);
    ///     joins += usize::from(env.task().gold_sql.contains(" JOIN "));
    /// }
    /// // A mistake on every join task, and only there.
    /// assert!(recovered > 0);
    /// assert_eq!(recovered, joins);
    /// # Ok::<(), sandgym_env_api::EnvError>(())
    /// ```
    pub fn recovering(mut self) -> Self {
        self.recovering = true;
        self
    }

    /// Whether the last action was a deliberate mistake (not one to learn).
    pub fn mistaken(&self) -> bool {
        self.mistaken
    }
}

impl Agent for SqlGold {
    fn act(&mut self, observation: &Observation) -> Action {
        self.mistaken = false;
        if let Some(query) = observation
            .info
            .get("task")
            .and_then(Value::as_str)
            .and_then(|id| self.gold.get(id))
        {
            self.planned = Some(query.clone());
            self.repair = false;
            if self.recovering
                && let Some(wrong) = without_joins(query)
            {
                self.mistaken = true;
                self.repair = true;
                return Action::tool("run_sql", serde_json::json!({"query": wrong}))
                    .with_thought("Check the query before answering.");
            }
            return Action::tool("run_sql", serde_json::json!({"query": query}))
                .with_thought("Check the query before answering.");
        }
        if self.repair {
            self.repair = false;
            let query = self.planned.clone().unwrap_or_else(|| "SELECT 1".into());
            return Action::tool("run_sql", serde_json::json!({"query": query}))
                .with_thought("The query failed; join the table it names.");
        }
        let query = self.planned.take().unwrap_or_else(|| "SELECT 1".into());
        Action::respond(query).with_thought("The query ran; answer with it.")
    }

    fn imitate(&self) -> bool {
        !self.mistaken
    }
}

/// `query` without its `JOIN table ON a = b` clauses, or `None` when it has none of that
/// shape: the mistake of forgetting a join while still naming the joined table's columns.
///
/// ```
/// use sandgym_env_sql::without_joins;
/// let q = "SELECT COUNT(*) FROM orders JOIN customers ON orders.customer_id = customers.id WHERE customers.city = 'Oslo'";
/// assert_eq!(
///     without_joins(q).as_deref(),
///     Some("SELECT COUNT(*) FROM orders WHERE customers.city = 'Oslo'")
/// );
/// assert_eq!(without_joins("SELECT name FROM users"), None);
/// ```
pub fn without_joins(query: &str) -> Option<String> {
    let words: Vec<&str> = query.split(' ').collect();
    let mut kept = Vec::with_capacity(words.len());
    let mut i = 0;
    let mut dropped = false;
    while i < words.len() {
        let join = words[i].eq_ignore_ascii_case("JOIN")
            && words
                .get(i + 2)
                .is_some_and(|w| w.eq_ignore_ascii_case("ON"))
            && words.get(i + 4) == Some(&"=");
        if join && i + 5 < words.len() {
            i += 6;
            dropped = true;
        } else {
            kept.push(words[i]);
            i += 1;
        }
    }
    dropped.then(|| kept.join(" "))
}
