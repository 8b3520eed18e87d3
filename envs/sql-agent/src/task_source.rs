//! Where the SQL env's tasks come from: the configuration's task file over its databases, or
//! the bundled set, plus the tasks written from the databases themselves
//! ([`crate::self_tasks`]), and the built image of every database they use.

use std::collections::BTreeMap;

use sandgym_env_api::{EnvError, Result};

use crate::SqlConfig;
use crate::curriculum::{MAX_CURRICULUM_DATABASES, curriculum_db};
use crate::engine::{self, Image};
use crate::self_tasks::{self, SelfTasks, self_tasks};
use crate::tasks::{self, TaskSet};

/// The tasks `config` names ([`SqlConfig::task_set`]) and the built image of every database
/// they use: its task file over its databases, or the bundled tasks; plus the tasks written
/// from `databases` ([`SqlConfig::self_tasks`]; all of them when there is no task file).
pub(crate) fn task_set_and_images(
    config: &SqlConfig,
) -> Result<(TaskSet, BTreeMap<String, Image>)> {
    let mut tasks = declared(config)?;
    let mut images = BTreeMap::new();
    for (name, sql) in &tasks.databases {
        let image = engine::build(sql).map_err(|e| EnvError::InvalidConfig {
            reason: format!("database `{name}` does not build: {e}"),
        })?;
        images.insert(name.clone(), image);
    }
    add_written(config, &mut tasks, &images)?;
    add_curriculum(config, &mut tasks, &mut images)?;
    if tasks.tasks.is_empty() {
        return Err(EnvError::InvalidConfig {
            reason: "sql-agent: the configuration gives no tasks (a curriculum alone needs at least one database)".into(),
        });
    }
    Ok((tasks, images))
}

/// [`SqlConfig::task_set`]: the tasks alone. Without written tasks no database is built;
/// with them, the set is remembered for the last configuration asked (a demonstrator is made
/// per episode, and writing tasks builds and queries every database).
pub(crate) fn task_set(config: &SqlConfig) -> Result<TaskSet> {
    if writing(config).is_none() && config.curriculum.is_none() {
        return declared(config);
    }
    static LAST: std::sync::Mutex<Option<(String, TaskSet)>> = std::sync::Mutex::new(None);
    let key = serde_json::to_string(config).unwrap_or_default();
    if let Ok(last) = LAST.lock()
        && let Some((k, set)) = last.as_ref()
        && *k == key
    {
        return Ok(set.clone());
    }
    let (set, _) = task_set_and_images(config)?;
    if let Ok(mut last) = LAST.lock() {
        *last = Some((key, set.clone()));
    }
    Ok(set)
}

/// The tasks the configuration declares (its task file, or the bundled set, or none when it
/// gives databases alone or asks for the curriculum alone), with every database of
/// `databases`.
fn declared(config: &SqlConfig) -> Result<TaskSet> {
    let mut tasks = match &config.tasks_jsonl {
        Some(text) => TaskSet::from_jsonl_with(text.as_bytes(), &config.databases)?,
        None if !config.databases.is_empty()
            || config.curriculum.as_ref().is_some_and(|c| c.alone) =>
        {
            TaskSet {
                tasks: Vec::new(),
                databases: config.databases.clone(),
            }
        }
        None => tasks::bundled(),
    };
    for (name, sql) in &config.databases {
        tasks
            .databases
            .entry(name.clone())
            .or_insert_with(|| sql.clone());
    }
    Ok(tasks)
}

/// The settings tasks are written with, when the configuration asks for written tasks
/// (explicitly, or by giving databases without a task file).
fn writing(config: &SqlConfig) -> Option<SelfTasks> {
    match (&config.self_tasks, &config.tasks_jsonl) {
        (Some(s), _) => Some(s.clone()),
        (None, None) if !config.databases.is_empty() => Some(SelfTasks::default()),
        _ => None,
    }
}

/// Adds the tasks written from each database of `databases` (built in `images`) to `tasks`.
fn add_written(
    config: &SqlConfig,
    tasks: &mut TaskSet,
    images: &BTreeMap<String, Image>,
) -> Result<()> {
    let Some(settings) = writing(config) else {
        return Ok(());
    };
    let held_out = config.tasks_jsonl.is_none();
    for name in config.databases.keys() {
        let written = self_tasks(
            name,
            &images[name],
            &settings,
            config.rows_budget(),
            held_out,
        );
        if written.is_empty() {
            return Err(EnvError::InvalidConfig {
                reason: format!(
                    "sql-agent: no task could be written from database `{name}` (it has no tables)"
                ),
            });
        }
        let taken: std::collections::BTreeSet<&str> =
            tasks.tasks.iter().map(|t| t.id.as_str()).collect();
        if let Some(t) = written.iter().find(|t| taken.contains(t.id.as_str())) {
            return Err(EnvError::InvalidConfig {
                reason: format!(
                    "sql-agent: the task file already has an id `{}` of the written tasks",
                    t.id
                ),
            });
        }
        tasks.tasks.extend(written);
    }
    Ok(())
}

/// Adds the curriculum's databases ([`SqlConfig::curriculum`]), built into `images`, and the
/// tasks written from each to `tasks`.
fn add_curriculum(
    config: &SqlConfig,
    tasks: &mut TaskSet,
    images: &mut BTreeMap<String, Image>,
) -> Result<()> {
    let Some(c) = &config.curriculum else {
        return Ok(());
    };
    if c.databases > MAX_CURRICULUM_DATABASES || c.test_databases > c.databases {
        return Err(EnvError::InvalidConfig {
            reason: format!(
                "sql-agent: curriculum: {} databases with {} for test (at most {MAX_CURRICULUM_DATABASES}, and no more for test than in all)",
                c.databases, c.test_databases
            ),
        });
    }
    let settings = SelfTasks {
        per_table: c.per_table,
        seed: c.seed,
        test_every: 0,
    };
    for i in 0..c.databases {
        let db = curriculum_db(c.seed, i);
        if tasks.databases.contains_key(&db.name) {
            return Err(EnvError::InvalidConfig {
                reason: format!(
                    "sql-agent: a database of the configuration is named `{}`, as one of the curriculum's",
                    db.name
                ),
            });
        }
        let image = engine::build(&db.script).map_err(|e| EnvError::InvalidConfig {
            reason: format!("curriculum database `{}` does not build: {e}", db.name),
        })?;
        let test = i >= c.databases - c.test_databases;
        let mut written = self_tasks::write(
            &db.name,
            &image,
            &settings,
            config.rows_budget(),
            false,
            &db.vocabulary,
            self_tasks::Shapes::Schema,
        );
        for t in &mut written {
            t.id = format!(
                "{}-{}",
                db.name,
                t.id.rsplit_once("-self-").map_or(t.id.as_str(), |x| x.1)
            );
            if test {
                t.split = sandgym_env_api::Split::Test;
            }
        }
        tasks.tasks.extend(written);
        tasks.databases.insert(db.name.clone(), db.script);
        images.insert(db.name, image);
    }
    Ok(())
}
