//! A user's own env file and a user's own SQLite database.

use super::common::{assert_success, sandgym, tmp};

/// A user's env: `unit-convert-v0` is in no registry and has no native build or baseline; it
/// is a guest component file, run, trained, resumed and evaluated by its path.
#[test]
fn a_users_env_file_is_checked_run_trained_and_evaluated() {
    let dir = tmp("user-env");
    std::fs::create_dir_all(&dir).unwrap();
    let wasm = dir.join("unit_convert.wasm");
    std::fs::write(&wasm, sandgym_guest_artifacts::UNIT_CONVERT.wasm).unwrap();
    let wasm = wasm.to_str().unwrap();
    let config = dir.join("env.json");
    std::fs::write(&config, r#"{"max_value": 9}"#).unwrap();
    let config = config.to_str().unwrap();

    let check = sandgym(&["check", wasm, "--env-config", config]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );

    let run = sandgym(&[
        "run",
        "--env",
        wasm,
        "--env-config",
        config,
        "--agent",
        "random",
        "--episodes",
        "5",
        "--json",
    ]);
    assert_success(&run);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["env"], "unit-convert-v0", "{summary}");
    assert_eq!(summary["episodes"], 5);
    let baseline = sandgym(&["run", "--env", wasm, "--agent", "baseline"]);
    assert!(!baseline.status.success());
    assert!(String::from_utf8_lossy(&baseline.stderr).contains("--agent random"));
    let native = sandgym(&["run", "--env", wasm, "--native", "--agent", "random"]);
    assert!(String::from_utf8_lossy(&native.stderr).contains("only in the sandbox"));

    let out = dir.join("run");
    let train_config = dir.join("train.json");
    std::fs::write(
        &train_config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 2, "max_new_tokens": 24}, "schedule": {"save_every": 1}}"#,
    )
    .unwrap();
    let train = sandgym(&[
        "train",
        "--env",
        wasm,
        "--model",
        "tiny",
        "--env-config",
        r#"{"max_value": 9}"#,
        "--iters",
        "1",
        "--config",
        train_config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "3",
    ]);
    let stderr = String::from_utf8_lossy(&train.stderr);
    assert!(train.status.success(), "{stderr}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(saved["run"]["env"], wasm);
    assert_eq!(saved["run"]["env_config"]["max_value"], 9);
    assert_eq!(
        std::fs::read_to_string(out.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    // The run remembers its env and configuration: eval needs no --env.
    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--episodes",
        "3",
        "--json",
    ]);
    assert_success(&eval);
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert_eq!(report["policy"]["episodes"], 3, "{report}");
    assert!(report["baseline"].is_null(), "{report}");
    let resume = sandgym(&[
        "train",
        "--resume",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert_success(&resume);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The second held-out set's 62 hand-written questions over the film service: every gold
/// answer is one the constrained decoder can write — including "the three longest" (a number
/// spelled out), "R-rated films" (a value inside a hyphenated word) and "released in 2020 or
/// later" (the first day of a year the question names).
#[test]
fn every_hand_written_film_question_fits_the_grammar() {
    let dir = tmp("films-narrowing");
    std::fs::create_dir_all(&dir).unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/envs/sql-agent/tests/data");
    let config = dir.join("films.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "tasks_jsonl": format!("@{data}/films_questions.jsonl"),
            "databases": {"films": format!("@{data}/films.sql")},
        })
        .to_string(),
    )
    .unwrap();
    let check = sandgym(&[
        "check",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
        "--narrowing",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let narrowing = &report["narrowing"];
    assert_eq!(narrowing["tasks"], 62, "{narrowing}");
    assert_eq!(narrowing["actions"], 124, "{narrowing}");
    assert_eq!(
        narrowing["outside"].as_array().unwrap().len(),
        0,
        "{narrowing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The SQL env over a user's own database: a SQLite dump and a task file named by an
/// `--env-config` file, played in the sandbox under the default limits.
#[test]
fn the_sql_env_runs_on_a_users_sqlite_dump() {
    let dir = tmp("user-db");
    std::fs::create_dir_all(&dir).unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/envs/sql-agent/tests/data");
    let config = dir.join("music.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "tasks_jsonl": format!("@{data}/music_tasks.jsonl"),
            "databases": {"music": format!("@{data}/music.sql")},
        })
        .to_string(),
    )
    .unwrap();
    let run = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
        "--split",
        "test",
        "--episodes",
        "8",
        "--json",
    ]);
    assert_success(&run);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["backend"], "wasm");
    assert_eq!(summary["episodes"], 8);
    assert!(summary["steps"].as_u64().unwrap() >= 8, "{summary}");
    // Under the default limits no episode ends on an env failure (the sandbox's time or memory
    // limit, a trap): a real-size database answers every query of the baseline.
    assert_eq!(summary["failed_episodes"], 0, "{summary}");
    // Every test task once: the file holds 4 (tasks 3, 6, 9 and 12).
    let every = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
        "--split",
        "test",
        "--every-task",
        "--json",
    ]);
    assert_success(&every);
    let summary: serde_json::Value = serde_json::from_slice(&every.stdout).unwrap();
    assert_eq!(summary["episodes"], 4, "{summary}");
    assert_eq!(summary["failed_episodes"], 0, "{summary}");
    let (lo, hi) = (
        summary["success_ci95"][0].as_f64().unwrap(),
        summary["success_ci95"][1].as_f64().unwrap(),
    );
    let rate = summary["success_rate"].as_f64().unwrap();
    assert!(lo <= rate && rate <= hi && hi - lo > 0.3, "{summary}");
    // `check --narrowing`: which gold answers the constrained decoder could not write. The
    // fixture's answers with `IS NULL`, `= FALSE`, `HAVING`, arithmetic in an aggregate and
    // the first day of a year the question names ("before 1980") fit; those with table
    // aliases (`tracks t`) or `LIKE` do not.
    let check = sandgym(&[
        "check",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
        "--narrowing",
        "--json",
    ]);
    assert_success(&check);
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let narrowing = &report["narrowing"];
    assert_eq!(narrowing["tasks"], 12, "{narrowing}");
    assert_eq!(narrowing["actions"], 24, "{narrowing}");
    let outside: std::collections::BTreeSet<&str> = narrowing["outside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["task"].as_str().unwrap())
        .collect();
    for task in [
        "music-unrated",
        "music-unpaid_total",
        "music-items_revenue",
        "music-tracks_count",
        "music-old_albums",
    ] {
        assert!(!outside.contains(task), "{task}: {narrowing}");
    }
    for task in ["music-genre_tracks", "music-may_invoices"] {
        assert!(outside.contains(task), "{task}: {narrowing}");
    }
    assert_eq!(outside.len(), 5, "{narrowing}");
    // The database alone: the env writes its own tasks from it, every one of whose gold
    // answers the grammar can write, some held out as a test split the baseline plays.
    let own = dir.join("own.json");
    std::fs::write(
        &own,
        serde_json::json!({"databases": {"music": format!("@{data}/music.sql")}}).to_string(),
    )
    .unwrap();
    let check = sandgym(&[
        "check",
        "sql-agent-v0",
        "--env-config",
        own.to_str().unwrap(),
        "--narrowing",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let narrowing = &report["narrowing"];
    assert!(narrowing["tasks"].as_u64().unwrap() >= 40, "{narrowing}");
    assert_eq!(
        narrowing["outside"].as_array().unwrap().len(),
        0,
        "{narrowing}"
    );
    let every = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-config",
        own.to_str().unwrap(),
        "--split",
        "test",
        "--every-task",
        "--json",
    ]);
    assert_success(&every);
    let summary: serde_json::Value = serde_json::from_slice(&every.stdout).unwrap();
    assert!(summary["episodes"].as_u64().unwrap() >= 8, "{summary}");
    assert_eq!(summary["failed_episodes"], 0, "{summary}");
    // A database with no table to write tasks from is a clear error that names it.
    std::fs::write(dir.join("empty.sql"), "-- no tables yet\n").unwrap();
    std::fs::write(
        &own,
        serde_json::json!({"databases": {"bare": format!("@{}", dir.join("empty.sql").display())}})
            .to_string(),
    )
    .unwrap();
    let bad = sandgym(&[
        "check",
        "sql-agent-v0",
        "--env-config",
        own.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("`bare`"),
        "{stderr}"
    );
    // A config that names a missing file says which.
    std::fs::write(&config, r#"{"tasks_jsonl": "@nowhere.jsonl"}"#).unwrap();
    let bad = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nowhere.jsonl"));
    std::fs::remove_dir_all(&dir).unwrap();
}
