//! Write the generated database that `sandgym bench envs` measures the SQL env on, with a
//! task file, as an `--env-config` for `run`, `eval`, `check` or `train`.
//!
//! Run it with: `cargo run --example synthetic_db -- 10000 my-db` (rows per large table, the
//! folder), then e.g. `sandgym eval --checkpoint RUN --env-config my-db/env.json`.
//!
//! The tasks are the bench's questions (joins, grouping, nested queries) over the generated
//! data, on the test split, and a count question on the train split. Past about 40,000 rows
//! the `IN (SELECT …)` question reads more than the default row budget and the env refuses to
//! load the task file, naming that task.

use anyhow::Context;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .unwrap_or_else(|| "10000".into())
        .parse()
        .context("the first argument is the rows per large table")?;
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "synthetic-db".into()));
    std::fs::create_dir_all(&dir)?;
    let db = sandgym_env_sql::synthetic_db(rows);
    let tasks: Vec<String> = std::iter::once(db.tasks_jsonl.clone())
        .chain(
            sandgym_env_sql::SYNTHETIC_QUERIES
                .iter()
                .map(|(name, question, sql)| {
                    json!({
                        "id": format!("synthetic-{name}"),
                        "database": "synthetic",
                        "question": question,
                        "gold_sql": sql,
                        "split": "test",
                    })
                    .to_string()
                }),
        )
        .collect();
    std::fs::write(dir.join("synthetic.sql"), &db.script)?;
    std::fs::write(dir.join("tasks.jsonl"), tasks.join("\n") + "\n")?;
    let config = json!({
        "tasks_jsonl": format!("@{}", dir.join("tasks.jsonl").display()),
        "databases": {"synthetic": format!("@{}", dir.join("synthetic.sql").display())},
    });
    std::fs::write(dir.join("env.json"), config.to_string())?;
    // The env loads it: every gold query runs within the row budget.
    let config = json!({"tasks_jsonl": tasks.join("\n"), "databases": {"synthetic": db.script}});
    let env = sandgym_env_sql::SqlAgentEnv::from_config(config.as_object().expect("an object"))?;
    println!(
        "{} tasks over {rows} rows per large table: {}",
        env.tasks().tasks.len(),
        dir.join("env.json").display()
    );
    Ok(())
}
