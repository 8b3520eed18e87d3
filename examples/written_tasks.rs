//! Write five databases as an `--env-config` whose tasks the SQL env writes itself (see "Your
//! own database" in the README): the music fixture, the generated database of `bench envs`
//! (1,000 rows per large table) and the bundled `shop`, `school` and `company` databases, each
//! a script in the folder, one written task in three held out as the test split.
//!
//! Run it with: `cargo run --example written_tasks -- written`, then
//! `sandgym train --env sql-agent-v0 --env-config written/env.json --algo grpo --config
//! configs/sql-agent-rl-written-tasks.json` (the README's measurement of RL after SFT on them).

use anyhow::Context;
use serde_json::{Map, Value, json};

/// The music fixture (a SQLite dump, nine tables).
const MUSIC: &str = include_str!("../envs/sql-agent/tests/data/music.sql");

fn main() -> anyhow::Result<()> {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "written-tasks".into()),
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut scripts = vec![
        ("music".to_owned(), MUSIC.to_owned()),
        (
            "synthetic".to_owned(),
            sandgym_env_sql::synthetic_db(1000).script,
        ),
    ];
    scripts.extend(sandgym_env_sql::bundled_tasks().databases);
    let mut databases = Map::new();
    for (name, script) in &scripts {
        std::fs::write(dir.join(format!("{name}.sql")), script)?;
        databases.insert(name.clone(), Value::String(format!("@{name}.sql")));
    }
    let config = json!({
        "databases": databases,
        "self_tasks": {"per_table": 24, "test_every": 3},
    });
    std::fs::write(dir.join("env.json"), serde_json::to_string_pretty(&config)?)?;
    // The env loads it and writes its tasks.
    let inline = json!({
        "databases": scripts
            .into_iter()
            .map(|(name, script)| (name, Value::String(script)))
            .collect::<Map<String, Value>>(),
        "self_tasks": config["self_tasks"],
    });
    let tasks =
        sandgym_env_sql::SqlConfig::from_map(inline.as_object().expect("an object"))?.task_set()?;
    let test = tasks
        .tasks
        .iter()
        .filter(|t| t.split == sandgym::env_api::Split::Test)
        .count();
    println!(
        "{}: {} tasks written over {} databases ({test} held out)",
        dir.join("env.json").display(),
        tasks.tasks.len(),
        tasks.databases.len()
    );
    Ok(())
}
