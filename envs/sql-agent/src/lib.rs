//! `sql-agent-v0`: a text-to-SQL agent as a gymnasium-style environment.
//!
//! The agent gets a question about a database and the database's tables, may call
//! `list_tables`, `describe_table` and `run_sql` (a real embedded SQL engine, GlueSQL, runs on
//! the episode's own copy of the database), and answers with one SQL query (or the plain value)
//! as its final response. The answer is right when its result equals the gold query's.
//!
//! ```
//! use sandgym_env_api::{Action, Env, ResetOptions, Split};
//! use sandgym_env_sql::SqlAgentEnv;
//! use serde_json::json;
//!
//! let mut env = SqlAgentEnv::new()?;
//! let task = env.reset(0, &ResetOptions::split(Split::Test).with_task("shop-count_table-0-0"))?;
//! assert!(task.content.contains("How many customers are there?"));
//! let rows = env.step(&Action::tool("run_sql", json!({"query": "SELECT COUNT(*) FROM customers"})))?;
//! assert!(rows.content.contains("40"));
//! env.step(&Action::respond("SELECT COUNT(*) FROM customers"))?;
//! assert!((env.reward() - (1.0 - 0.04 + 0.2)).abs() < 1e-9);
//! # Ok::<(), sandgym_env_api::EnvError>(())
//! ```
//!
//! The bundled task set covers three databases (`shop`, `school`, `company`) with selection,
//! filters, aggregates, grouping, ordering and limits, joins and nested queries, four phrasings
//! per intent, and a train/test split whose test half holds phrasings and value combinations
//! never seen in training. Users bring their own tasks as JSONL ([`TaskSet::from_jsonl`]).
#![deny(missing_docs)]

mod baseline;
mod curriculum;
mod data;
pub mod ddl;
mod engine;
mod env;
mod fold;
mod gold;
mod inserts;
mod join_sets;
mod links;
mod literal_inserts;
mod metered;
mod named_columns;
mod package;
mod pattern;
mod self_tasks;
#[cfg(test)]
mod sqlite_parity;
mod synthetic;
mod task_source;
mod tasks;

pub use baseline::SqlBaseline;
pub use curriculum::{Curriculum, CurriculumDb, MAX_CURRICULUM_DATABASES, curriculum_db};
pub use engine::DEFAULT_MAX_ROWS_READ;
pub use env::{MAX_QUERY_CHARS, RewardConfig, SqlAgentEnv, SqlConfig, replica_config};
pub use gold::{SqlGold, without_joins};
pub use links::{Fit, JoinOn, join_links, join_links_fitting, numbered_rows};
pub use named_columns::{MAX_NAMED_COLUMNS, named_columns};
pub use package::{MAIN_JOB_CONFIG, PACKAGE};
pub use pattern::{
    Compared, TableColumns, TypedColumn, TypedTable, question_literals, question_numbers,
    question_year_days, sql_pattern, sql_pattern_for, sql_pattern_naming, sql_pattern_typed,
};
pub use self_tasks::{SelfTasks, Vocabulary};
pub use synthetic::{SYNTHETIC_CORRELATED, SYNTHETIC_QUERIES, SyntheticDb, synthetic_db};
pub use tasks::{Task, TaskSet, bundled as bundled_tasks};
