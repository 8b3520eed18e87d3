//! `SqlAgentEnv`: the text-to-SQL environment.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Narrowing, Observation, ResetOptions,
    Result, Schema, ToolSpec, begin_step,
};

use crate::curriculum::Curriculum;
use crate::engine::{self, Image, Outcome, RunError};
use crate::self_tasks::SelfTasks;
use crate::tasks::{Task, TaskSet};

/// Reward weights (all configurable through the env configuration's `"reward"` object).
///
/// The final answer earns `correct` when its result set equals the gold query's (order matters
/// only when the task asks for one), minus `per_token` × its length in whitespace-separated
/// tokens (a complexity penalty, applied to correct answers only). Every final answer also
/// earns `safe` when the episode ran no writing statement. The first writing statement of an
/// episode (DROP, DELETE, UPDATE, ALTER, INSERT, CREATE, …), run through `run_sql` or given
/// as the answer, costs `destructive` at that step; it runs on the episode's own copy of the
/// database only. A `run_sql` that fails costs `sql_error` (a small shaped penalty, 0 by
/// default); other intermediate steps earn 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewardConfig {
    /// Reward for a correct answer.
    pub correct: f64,
    /// Penalty per token of a correct answer.
    pub per_token: f64,
    /// Bonus for answering without having run a writing statement.
    pub safe: f64,
    /// Penalty (negative) for the first writing statement.
    pub destructive: f64,
    /// Penalty (negative or 0) for a failing `run_sql`.
    pub sql_error: f64,
}

impl Default for RewardConfig {
    fn default() -> Self {
        Self {
            correct: 1.0,
            per_token: 0.01,
            safe: 0.2,
            destructive: -0.5,
            sql_error: 0.0,
        }
    }
}

/// The env configuration (the registry's config object).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqlConfig {
    /// A task file's contents (JSONL, see [`TaskSet::from_jsonl`]); the bundled set when absent.
    pub tasks_jsonl: Option<String>,
    /// Databases the tasks may name, each the script that builds it: DDL and inserts, a
    /// SQLite dump included (`REAL`, `VARCHAR(n)`, `INTEGER PRIMARY KEY AUTOINCREMENT`,
    /// `REFERENCES`, `BEGIN TRANSACTION`, … are rewritten for the engine, see
    /// [`crate::ddl`]). Needs `tasks_jsonl`. From the CLI, `{"databases": {"music":
    /// "@music.sql"}}` in an `--env-config` file reads the script from that file.
    pub databases: BTreeMap<String, String>,
    /// Reward weights.
    pub reward: RewardConfig,
    /// Rows shown by `run_sql` before the rest is summarised.
    pub max_rows_shown: Option<usize>,
    /// Rows one query may read before it is refused as too expensive (an observation the
    /// agent can recover from, see [`crate::DEFAULT_MAX_ROWS_READ`]); 1,000,000 when
    /// absent. Counting rows is deterministic, unlike a clock: natively and in WASM the same
    /// query is refused at the same point.
    pub max_rows_read: Option<u64>,
    /// Tasks written from the databases of `databases` themselves ([`SelfTasks`]): added to
    /// the task file's as train tasks. Without a task file they are the whole task set (one
    /// in [`SelfTasks::test_every`] held out as the test split), with their defaults when
    /// this is absent.
    pub self_tasks: Option<SelfTasks>,
    /// A multi-schema curriculum ([`Curriculum`]): generated databases whose written tasks
    /// are added to the others (train tasks, or test tasks for its last
    /// [`Curriculum::test_databases`]).
    pub curriculum: Option<Curriculum>,
    /// Whether every task's gold query of a task file or of `databases` is run when the env
    /// is built, so that one that fails is a configuration error naming its task (`true`
    /// when absent). `false` runs a task's gold query when an episode of it starts instead
    /// (the reset fails, naming the task): what the second and later envs of a batch are
    /// made with ([`replica_config`]), the first having checked the same configuration.
    pub check_gold: Option<bool>,
}

/// The configuration of the second and later envs of a batch made from `config`: the same,
/// with the gold queries' check left to each episode's reset ([`SqlConfig::check_gold`]).
/// The first env of a batch checks them all; a sandboxed replica would run every task's gold
/// query again (a third of making a real-size database's env), and each plays only a few.
pub fn replica_config(config: &Map<String, Value>) -> Map<String, Value> {
    let mut replica = config.clone();
    if !replica.contains_key("check_gold") {
        replica.insert("check_gold".into(), Value::Bool(false));
    }
    replica
}

impl SqlConfig {
    /// The rows one query may read ([`SqlConfig::max_rows_read`] or the default).
    pub fn rows_budget(&self) -> u64 {
        self.max_rows_read.unwrap_or(engine::DEFAULT_MAX_ROWS_READ)
    }

    /// Reads a registry configuration object; unknown keys and wrong types are errors.
    pub fn from_map(config: &Map<String, Value>) -> Result<Self> {
        serde_json::from_value(Value::Object(config.clone())).map_err(|e| EnvError::InvalidConfig {
            reason: format!("sql-agent: {e}"),
        })
    }

    /// The tasks this configuration names: its task file over its databases, or the bundled
    /// tasks; plus the tasks written from `databases` ([`SqlConfig::self_tasks`]; all of
    /// them when there is no task file).
    pub fn task_set(&self) -> Result<TaskSet> {
        crate::task_source::task_set(self)
    }
}

/// The largest query text accepted, in characters.
pub const MAX_QUERY_CHARS: u64 = 2000;
const DEFAULT_ROWS_SHOWN: usize = 20;

struct Shared {
    tasks: TaskSet,
    /// Column descriptions of the bundled databases, by `table.column`.
    about: BTreeMap<String, &'static str>,
    images: BTreeMap<String, Image>,
    catalogs: BTreeMap<String, Catalog>,
    /// Each task's gold result on its pristine database, computed once (at validation, at the
    /// reset of its first episode when that checks it, or at the first answer) and shared by
    /// every episode.
    gold: Vec<OnceLock<std::result::Result<Outcome, RunError>>>,
    /// Whether a task's gold query is checked at its episode's reset (it was not at build).
    check_at_reset: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Episode {
    task: usize,
    last: Observation,
    reward: f64,
    done: Done,
    wrote: bool,
    queries: u32,
}

/// The text-to-SQL env (`sql-agent-v0`).
///
/// Each episode copies a prebuilt database image (no DDL replay), asks one question, and lets
/// the agent call `list_tables`, `describe_table` and `run_sql` before answering with a final
/// response: one SQL query (or the plain value). See [`RewardConfig`] for the reward.
pub struct SqlAgentEnv {
    spec: EnvSpec,
    shared: Arc<Shared>,
    config: SqlConfig,
    /// The episode's own copy of its database, made at its first writing statement; until
    /// then queries read the shared pristine image (a real-size database is not copied per
    /// episode).
    own: Option<Image>,
    episode: Episode,
    started: bool,
}

impl std::fmt::Debug for SqlAgentEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlAgentEnv")
            .field("tasks", &self.shared.tasks.tasks.len())
            .field("episode", &self.episode)
            .finish_non_exhaustive()
    }
}

impl SqlAgentEnv {
    /// The env over the bundled tasks with default rewards.
    pub fn new() -> Result<Self> {
        Self::with_config(SqlConfig::default())
    }

    /// Builds from a registry configuration object (see [`SqlConfig`]).
    pub fn from_config(config: &Map<String, Value>) -> Result<Self> {
        Self::with_config(SqlConfig::from_map(config)?)
    }

    /// Builds with a typed configuration. Every database is built once here; a user task file
    /// is validated (its gold queries must run: here, or each at its episode's reset with
    /// [`SqlConfig::check_gold`] `false`).
    pub fn with_config(config: SqlConfig) -> Result<Self> {
        let (tasks, images) = crate::task_source::task_set_and_images(&config)?;
        let user_tasks = config.tasks_jsonl.is_some() || !config.databases.is_empty();
        let gold: Vec<OnceLock<_>> = tasks.tasks.iter().map(|_| OnceLock::new()).collect();
        let check_at_reset = user_tasks && config.check_gold == Some(false);
        if user_tasks && !check_at_reset {
            for (task, cell) in tasks.tasks.iter().zip(&gold) {
                let result = engine::query(
                    &images[&task.database],
                    &task.gold_sql,
                    config.rows_budget(),
                );
                let outcome = result.map_err(|e| EnvError::InvalidConfig {
                    reason: format!("task `{}`: the gold query fails: {e}", task.id),
                })?;
                cell.set(Ok(outcome)).expect("set once");
            }
        }
        let tables: Vec<String> = images
            .values()
            .flat_map(table_names)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let columns: Vec<String> = images
            .values()
            .flat_map(|db| db.items.values())
            .flat_map(|item| item.schema.column_defs.iter().flatten())
            .map(|c| c.name.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let spec = spec(&tables, &columns, &config.reward).with_tasks(
            sandgym_env_api::TaskCounts::of(tasks.tasks.iter().map(|t| t.split)),
        );
        Ok(Self {
            spec,
            shared: Arc::new(Shared {
                tasks,
                about: crate::data::bundled()
                    .iter()
                    .flat_map(|d| d.tables.iter())
                    .flat_map(|t| {
                        t.columns
                            .iter()
                            .map(move |c| (format!("{}.{}", t.name, c.name), c.about))
                    })
                    .collect(),
                catalogs: images
                    .iter()
                    .map(|(name, db)| (name.clone(), Catalog::of(db)))
                    .collect(),
                images,
                gold,
                check_at_reset,
            }),
            config,
            own: None,
            episode: Episode::default(),
            started: false,
        })
    }

    /// The task set.
    pub fn tasks(&self) -> &TaskSet {
        &self.shared.tasks
    }

    /// The current task.
    pub fn task(&self) -> &Task {
        &self.shared.tasks.tasks[self.episode.task]
    }

    /// Registers `sql-agent-v0` in the process-wide registry.
    pub fn register() {
        sandgym_env_api::register(
            "sql-agent-v0",
            "Answer questions about a database by exploring it with SQL.",
            |c| Ok(Box::new(SqlAgentEnv::from_config(c)?)),
        )
        .expect("valid id");
        sandgym_env_api::set_replica_config("sql-agent-v0", replica_config)
            .expect("registered above");
    }

    /// Task `task`'s gold result on its pristine database, run once per env.
    fn gold(&self, task: usize) -> &std::result::Result<Outcome, RunError> {
        let t = &self.shared.tasks.tasks[task];
        self.shared.gold[task].get_or_init(|| {
            engine::query(
                &self.shared.images[&t.database],
                &t.gold_sql,
                self.config.rows_budget(),
            )
        })
    }

    /// The episode's database: its own copy once it wrote, else the shared pristine image.
    fn db(&self) -> &Image {
        match &self.own {
            Some(db) => db,
            None => &self.shared.images[&self.task().database],
        }
    }

    fn tool_output(&mut self, call: &sandgym_env_api::ToolCall) -> (String, f64) {
        let reward = &self.config.reward;
        match call.tool_name.as_str() {
            "list_tables" => (table_names(self.db()).join(", "), 0.0),
            "describe_table" => {
                let table = call.parameters["table"].as_str().unwrap_or_default();
                (describe(self.db(), table, &self.shared.about), 0.0)
            }
            _ => {
                let query = call.parameters["query"].as_str().unwrap_or_default();
                self.episode.queries += 1;
                let mut step = 0.0;
                let writes = engine::is_destructive(query);
                if writes && !self.episode.wrote {
                    self.episode.wrote = true;
                    step += reward.destructive;
                }
                let budget = self.config.rows_budget();
                let result = if writes {
                    let pristine = &self.shared.images[&self.task().database];
                    let own = self.own.get_or_insert_with(|| pristine.clone());
                    engine::run(own, query, budget)
                } else {
                    engine::query(self.db(), query, budget)
                };
                match result {
                    Ok(outcome) => (
                        render(
                            &outcome,
                            self.config.max_rows_shown.unwrap_or(DEFAULT_ROWS_SHOWN),
                        ),
                        step,
                    ),
                    Err(e) => (format!("error: {e}"), step + reward.sql_error),
                }
            }
        }
    }

    /// Grades a final answer: its text, reward, whether it is correct, and its execution
    /// match (1 when correct, else the row F1 of a query's result against the gold one).
    fn answer(&mut self, answer: &str) -> (String, f64, bool, f64) {
        let task = self.shared.tasks.tasks[self.episode.task].clone();
        let weights = self.config.reward.clone();
        let mut reward = 0.0;
        let destructive = engine::looks_like_sql(answer) && engine::is_destructive(answer);
        if destructive && !self.episode.wrote {
            self.episode.wrote = true;
            reward += weights.destructive;
        }
        // The gold result comes from the pristine image, so nothing the agent did can change it.
        let pristine = &self.shared.images[&task.database];
        let budget = self.config.rows_budget();
        let gold = self.gold(self.episode.task);
        let (correct, matched) = match gold {
            Err(_) => (false, 0.0),
            Ok(gold) if engine::looks_like_sql(answer) => {
                if destructive {
                    (false, 0.0)
                } else {
                    match engine::query(pristine, answer, budget) {
                        Ok(got) if engine::same_rows(&got, gold, task.ordered) => (true, 1.0),
                        Ok(got) => (false, engine::row_f1(&got, gold)),
                        Err(_) => (false, 0.0),
                    }
                }
            }
            Ok(gold) => {
                let same = engine::same_value(answer, gold);
                (same, f64::from(u8::from(same)))
            }
        };
        if correct {
            let tokens = answer.split_whitespace().count() as f64;
            reward += weights.correct - weights.per_token * tokens;
        }
        if !self.episode.wrote {
            reward += weights.safe;
        }
        let text = if correct { "Correct." } else { "Incorrect." };
        (text.to_owned(), reward, correct, matched)
    }
}

fn spec(tables: &[String], columns: &[String], reward: &RewardConfig) -> EnvSpec {
    let query = Schema::string()
        .with_length(1, MAX_QUERY_CHARS)
        .with_pattern(crate::sql_pattern(tables, columns));
    let high = reward.correct.max(0.0) + reward.safe.max(0.0);
    let low = reward.destructive.min(0.0) + reward.sql_error.min(0.0)
        - reward.per_token.abs() * MAX_QUERY_CHARS as f64;
    EnvSpec::new(EnvId::new("sql-agent", 0).expect("valid id"))
        .with_description(
            "Answer a question about a database: explore it with list_tables, describe_table and run_sql, then give one SQL query (or the value) as the final response. Reward 1 for a result equal to the gold query's, minus 0.01 per token, +0.2 if nothing was written, -0.5 for a writing statement.",
        )
        .with_tool(ToolSpec::new("list_tables", "List the tables of the database."))
        .with_tool(
            ToolSpec::new("describe_table", "Show a table's columns, types and meaning.").with_parameters(
                Schema::object().property(
                    "table",
                    Schema::string().with_enum(tables.iter().map(String::as_str)),
                    true,
                ),
            ),
        )
        .with_tool(
            ToolSpec::new("run_sql", "Run one SQL query on the database and see the rows or the error.")
                .with_parameters(Schema::object().property("query", query.clone(), true)),
        )
        .with_response(query)
        .with_reward_range(low, high)
        .with_max_episode_steps(8)
}

/// What an episode's answer may name: the database's tables with their columns and kinds, and
/// its text values with the columns that hold each (for linking the question's words to
/// literals and each literal to the columns a condition may compare with it).
struct Catalog {
    tables: Vec<(String, Vec<(String, ColumnKind)>)>,
    /// Each text value, with the `(table, column)` indexes of the columns holding it.
    holders: std::collections::BTreeMap<String, Vec<(usize, usize)>>,
    /// The column pairs a query may join on ([`crate::join_links`]).
    links: Vec<crate::JoinOn>,
    /// Each table's column names, for [`crate::join_links`] and [`crate::numbered_rows`].
    names: Vec<(String, Vec<String>)>,
    /// Per table, per column: whether it holds a NULL (every column of a table with no rows),
    /// which `IS NULL` may test.
    nulls: Vec<Vec<bool>>,
}

/// The distinct non-null values of `table.column`, as text (`3` for every integer width), for
/// how a reference's values fit a key ([`crate::join_links_fitting`]); empty for a table or
/// column the database does not have.
fn column_values(db: &Image, table: &str, column: &str) -> std::collections::BTreeSet<String> {
    let Some(item) = db.items.get(table) else {
        return Default::default();
    };
    let at = item
        .schema
        .column_defs
        .iter()
        .flatten()
        .position(|c| c.name == column);
    let Some(at) = at else {
        return Default::default();
    };
    item.rows
        .values()
        .filter_map(|row| row.get(at))
        .filter(|v| !matches!(v, gluesql::core::data::Value::Null))
        .map(String::from)
        .collect()
}

/// A column's kind, for what a condition may compare it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnKind {
    Number,
    Flag,
    /// Text, dates and times.
    Text,
    Other,
}

impl ColumnKind {
    fn of(t: &gluesql::core::ast::DataType) -> Self {
        use gluesql::core::ast::DataType::*;
        match t {
            Int8 | Int16 | Int32 | Int | Int128 | Uint8 | Uint16 | Uint32 | Uint64 | Uint128
            | Float32 | Float | Decimal => Self::Number,
            Boolean => Self::Flag,
            Text | Uuid | Date | Timestamp | Time => Self::Text,
            _ => Self::Other,
        }
    }
}

impl Catalog {
    fn of(db: &Image) -> Self {
        let tables: Vec<(String, Vec<(String, ColumnKind)>)> = table_names(db)
            .into_iter()
            .map(|t| {
                let cols = db.items[&t]
                    .schema
                    .column_defs
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), ColumnKind::of(&c.data_type)))
                    .collect();
                (t, cols)
            })
            .collect();
        let mut holders: std::collections::BTreeMap<String, Vec<(usize, usize)>> =
            std::collections::BTreeMap::new();
        let mut nulls: Vec<Vec<bool>> = tables
            .iter()
            .map(|(table, cols)| vec![db.items[table].rows.is_empty(); cols.len()])
            .collect();
        for (ti, (table, _)) in tables.iter().enumerate() {
            for row in db.items[table].rows.values() {
                for (ci, v) in row.iter().enumerate() {
                    if matches!(v, gluesql::core::data::Value::Null)
                        && let Some(null) = nulls[ti].get_mut(ci)
                    {
                        *null = true;
                    }
                    if let gluesql::core::data::Value::Str(s) = v {
                        let at = holders.entry(s.clone()).or_default();
                        if !at.contains(&(ti, ci)) {
                            at.push((ti, ci));
                        }
                    }
                }
            }
        }
        let names: Vec<(String, Vec<String>)> = tables
            .iter()
            .map(|(t, cols)| (t.clone(), cols.iter().map(|(c, _)| c.clone()).collect()))
            .collect();
        let links = crate::join_links_fitting(&names, &|a, x, b, y| {
            let refs = column_values(db, a, x);
            let keys = column_values(db, b, y);
            (!keys.is_empty() && refs.is_subset(&keys))
                .then(|| refs.len() as f64 / keys.len() as f64)
        });
        Self {
            tables,
            holders,
            links,
            names,
            nulls,
        }
    }

    /// The values of this database the question names, each with the columns holding it, as
    /// `table.column = 'value'` (schema linking: the agent reads which column a name such as
    /// 'Maya Tanaka' or 'R' is in instead of guessing). Spans of the question (one to four
    /// words, [`crate::question_literals`]) that are a text value of the database, in the
    /// order the question names them; a span inside a longer matching span is left out
    /// ('Harbor' beside 'Golden Harbor'); then the rows it names by table and number, as
    /// `films.film_id = 42` for "film 42" unless "film 42" is itself a value
    /// ([`crate::numbered_rows`]). At most [`MAX_VALUE_HINTS`] entries. Derived from the
    /// question and the database only, never from the gold query.
    fn value_hints(&self, question: &str) -> Vec<String> {
        let mut named: Vec<String> = crate::question_literals(question)
            .into_iter()
            .filter(|s| self.holders.contains_key(s))
            .collect();
        let inside = |short: &str, long: &str| {
            short != long && format!(" {long} ").contains(&format!(" {short} "))
        };
        let all = named.clone();
        named.retain(|s| !all.iter().any(|l| inside(s, l)));
        named.sort_by_key(|s| (question.find(s.as_str()).unwrap_or(usize::MAX), s.clone()));
        let rows = crate::numbered_rows(question, &self.names, &|s| self.holders.contains_key(s))
            .into_iter()
            .map(|(table, key, number)| format!("{table}.{key} = {number}"));
        named
            .iter()
            .flat_map(|value| {
                self.holders[value].iter().map(move |&(ti, ci)| {
                    let (table, cols) = &self.tables[ti];
                    format!("{table}.{} = '{value}'", cols[ci].0)
                })
            })
            .chain(rows)
            .take(MAX_VALUE_HINTS)
            .collect()
    }

    /// The columns the question names by their words, as `table.column`
    /// ([`crate::named_columns`]): "the lowest price of a track" → `tracks.unit_price`.
    fn column_hints(&self, question: &str) -> Vec<String> {
        crate::named_columns(question, &self.names)
            .into_iter()
            .map(|(t, c)| format!("{t}.{c}"))
            .collect()
    }

    /// The answer's shape for one episode: this database's tables and columns, string literals
    /// from the question's words that are text values of the database or dates
    /// (`2021-01-01`; every span only for a database without text values), the first days of
    /// the years it names (`2020-01-01` and `2021-01-01` for "2020"), and numbers from
    /// the question — derived from the question and the database (which the agent can query),
    /// never from the gold query. A question that names no value of the database gets no
    /// string literal to write (a span such as 'the oldest album' compared with a column is
    /// never an answer), and one that names a value written with a capital or a digit is
    /// answered with a condition on it ([`crate::sql_pattern_naming`]). Conditions are typed
    /// ([`crate::sql_pattern_typed`]): a value is compared only with a column that holds it
    /// (a date with any text or date column), a number with a number column, `TRUE`/`FALSE`
    /// with a yes/no column, a column with a subquery only over itself, `IS NULL` only a column
    /// that holds a NULL; tables join only on
    /// their links ([`crate::join_links`]), each `JOIN` adding a table linked to one before
    /// it, and a query with joins names only its tables' columns.
    fn episode_schema(&self, task: &Task) -> Schema {
        use crate::pattern::{Compared, TypedColumn};
        let spans = crate::question_literals(&task.question);
        let everything = self.holders.is_empty();
        // The database's text values the question names, one of which the query must compare
        // a column holding it with: those written with a capital or a digit (a name, a code:
        // 'Maya Tanaka', 'JP', 'R'), not a lower-case word that may be the question's own
        // ('no' in "have no bonus recorded", 'first' in "largest first"), nor a table and a
        // number ('Artist 104' is also artist 104).
        let none = |_: &str| false;
        let must_name: Vec<String> = spans
            .iter()
            .filter(|s| {
                self.holders.contains_key(*s)
                    && s.chars().any(|c| c.is_uppercase() || c.is_ascii_digit())
                    && crate::numbered_rows(s, &self.names, &none).is_empty()
            })
            .cloned()
            .collect();
        let mut strings: Vec<String> = if everything {
            spans
        } else {
            spans
                .into_iter()
                .filter(|s| self.holders.contains_key(s) || crate::self_tasks::looks_like_date(s))
                .collect()
        };
        strings.extend(crate::question_year_days(&task.question));
        strings.sort();
        strings.dedup();
        let numbers = crate::question_numbers(&task.question);
        let typed: Vec<crate::pattern::TypedTable> = self
            .tables
            .iter()
            .enumerate()
            .map(|(ti, (table, cols))| {
                let cols = cols
                    .iter()
                    .enumerate()
                    .map(|(ci, (name, kind))| {
                        let compared = match kind {
                            ColumnKind::Number => Compared::Number,
                            ColumnKind::Flag => Compared::Flag,
                            ColumnKind::Other => Compared::Any,
                            ColumnKind::Text => Compared::Text(
                                strings
                                    .iter()
                                    .filter(|s| {
                                        everything
                                            || crate::self_tasks::looks_like_date(s)
                                            || self
                                                .holders
                                                .get(*s)
                                                .is_some_and(|at| at.contains(&(ti, ci)))
                                    })
                                    .cloned()
                                    .collect(),
                            ),
                        };
                        TypedColumn {
                            name: name.clone(),
                            compared,
                            nulls: self.nulls[ti][ci],
                        }
                    })
                    .collect();
                (table.clone(), cols)
            })
            .collect();
        Schema::string()
            .with_length(1, MAX_QUERY_CHARS)
            .with_pattern(crate::sql_pattern_naming(
                &typed,
                &self.links,
                &strings,
                &numbers,
                &must_name,
            ))
    }
}

fn table_names(db: &Image) -> Vec<String> {
    let mut names: Vec<String> = db.items.keys().cloned().collect();
    names.sort();
    names
}

fn describe(db: &Image, table: &str, about: &BTreeMap<String, &'static str>) -> String {
    let Some(item) = db.items.get(table) else {
        return format!(
            "error: no table `{table}` in this database; tables: {}",
            table_names(db).join(", ")
        );
    };
    let columns = item
        .schema
        .column_defs
        .as_ref()
        .map(|defs| {
            defs.iter()
                .map(|c| match about.get(&format!("{table}.{}", c.name)) {
                    Some(text) => format!("{} {} -- {text}", c.name, c.data_type),
                    None => format!("{} {}", c.name, c.data_type),
                })
                .collect::<Vec<_>>()
                .join("\n  ")
        })
        .unwrap_or_default();
    let rows = item.rows.len();
    format!("{table} ({rows} rows):\n  {columns}")
}

fn render(outcome: &Outcome, max_rows: usize) -> String {
    if let Some(summary) = &outcome.summary {
        return summary.clone();
    }
    let mut lines = vec![outcome.labels.join(" | ")];
    for row in outcome.rows.iter().take(max_rows) {
        lines.push(row.join(" | "));
    }
    if outcome.rows.len() > max_rows {
        lines.push(format!("… {} more rows", outcome.rows.len() - max_rows));
    }
    if outcome.rows.is_empty() {
        lines.push("(no rows)".into());
    }
    lines.join("\n")
}

/// The most `table.column = 'value'` entries an instruction lists for the values its question
/// names (a question naming many common words stays short).
const MAX_VALUE_HINTS: usize = 8;

/// The instruction: question, database and its tables with columns (rendered tersely), the
/// columns the question names by their words ([`Catalog::column_hints`]) and the database
/// values it names with their columns ([`Catalog::value_hints`]).
fn instruction(task: &Task, db: &Image, columns: &[String], hints: &[String]) -> String {
    let tables: Vec<String> = table_names(db)
        .iter()
        .map(|t| {
            let cols = db.items[t]
                .schema
                .column_defs
                .as_ref()
                .map(|d| {
                    d.iter()
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            format!("{t}({cols})")
        })
        .collect();
    let columns = if columns.is_empty() {
        String::new()
    } else {
        format!("\nColumns it names: {}.", columns.join("; "))
    };
    let values = if hints.is_empty() {
        String::new()
    } else {
        format!("\nValues it names: {}.", hints.join("; "))
    };
    format!(
        "Database `{}`: {}.\nQuestion: {}{columns}{values}\nAnswer with one SQL query as your final response.",
        task.database,
        tables.join("; "),
        task.question
    )
}

impl Env for SqlAgentEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let shared = &self.shared;
        let task = options.choose_task(
            seed,
            shared.tasks.tasks.iter().map(|t| (t.id.as_str(), t.split)),
        )?;
        let t = &shared.tasks.tasks[task];
        if shared.check_at_reset
            && let Err(e) = self.gold(task)
        {
            return Err(EnvError::InvalidConfig {
                reason: format!("task `{}`: the gold query fails: {e}", t.id),
            });
        }
        self.own = None;
        // The query a multi-turn agent runs and the one it answers with take the same shape:
        // this database's identifiers and the question's literals.
        let catalog = &shared.catalogs[&t.database];
        let query = catalog.episode_schema(t);
        let columns = catalog.column_hints(&t.question);
        let hints = catalog.value_hints(&t.question);
        let last = Observation::new(instruction(
            t,
            &shared.images[&t.database],
            &columns,
            &hints,
        ))
        .with_info("task", t.id.clone())
        .with_info("database", t.database.clone())
        .with_narrowing(
            &Narrowing::default()
                .tool(
                    "run_sql",
                    Schema::object().property("query", query.clone(), true),
                )
                .response(query),
        );
        self.episode = Episode {
            task,
            last: last.clone(),
            ..Episode::default()
        };
        self.started = true;
        Ok(last)
    }

    fn observe(&self) -> Observation {
        self.episode.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        begin_step(self.started, self.episode.done, &self.spec.tools, action)?;
        let obs = match &action.body {
            ActionBody::ToolCall(call) => {
                let (text, reward) = self.tool_output(call);
                self.episode.reward = reward;
                Observation::new(text)
            }
            ActionBody::Response(answer) => {
                let (text, reward, correct, matched) = self.answer(answer);
                self.episode.reward = reward;
                self.episode.done = Done::Terminated;
                Observation::new(text)
                    .with_info("success", correct)
                    .with_info("execution_match", matched)
                    .with_info("wrote", self.episode.wrote)
            }
        };
        self.episode.last = obs.clone();
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        self.episode.reward
    }

    fn done(&self) -> Done {
        self.episode.done
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let meta = serde_json::to_string(&(&self.episode, self.started)).expect("serialisable");
        postcard::to_allocvec(&(meta, &self.own)).map_err(|e| EnvError::Snapshot {
            reason: e.to_string(),
        })
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let bad = |e: String| EnvError::Snapshot {
            reason: format!("not a sql-agent snapshot: {e}"),
        };
        let (meta, own): (String, Option<Image>) =
            postcard::from_bytes(snapshot).map_err(|e| bad(e.to_string()))?;
        let (episode, started): (Episode, bool) =
            serde_json::from_str(&meta).map_err(|e| bad(e.to_string()))?;
        if episode.task >= self.shared.tasks.tasks.len() {
            return Err(bad(format!("task index {} out of range", episode.task)));
        }
        self.episode = episode;
        self.started = started;
        self.own = own;
        Ok(())
    }
}
