//! Listing, checking, running and benchmarking envs, and replaying recorded episodes.

use super::common::{assert_success, sandgym, tmp};

#[test]
fn envs_lists_ids_tools_and_schemas() {
    let out = sandgym(&["envs", "--json"]);
    assert_success(&out);
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
    assert_success(&out);
    let f: sandgym::bench::sandbox::SandboxReport = serde_json::from_slice(&out.stdout).unwrap();
    for figure in [
        f.step_native_us,
        f.step_wasm_us,
        f.step_ratio_wasm_over_native,
        f.fresh_episode_us,
        f.snapshot_us,
        f.restore_us,
        f.steps_per_s_2_threads,
    ] {
        assert!(figure > 0.0, "{f:?}");
    }
    assert!(f.snapshot_bytes > 0, "{f:?}");
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
        assert_success(&out);
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
    assert_success(&out);
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
    assert_success(&out);
    let figures: sandgym::bench::envs::EnvsReport = serde_json::from_slice(&out.stdout).unwrap();
    for env in ["sql-agent-v0", "customer-service-v0"] {
        let e = &figures.envs[env];
        for b in [&e.native, &e.wasm] {
            for figure in [b.query_step_us, b.reset_us, b.baseline_steps_per_s] {
                assert!(figure > 0.0, "{env}: {e:?}");
            }
        }
    }
    for backend in ["native", "wasm"] {
        let m = &figures.music[backend];
        assert!(m.join_step_us > 0.0 && m.reset_us > 0.0, "{m:?}");
    }
    // The generated databases: every join, grouping and nested query answers at 200 rows;
    // at 1,000 the correlated subquery (1,000 rows read per customer) passes the row budget
    // and is refused, natively and in WASM alike.
    for (rows, refused) in [(200, ""), (1000, "correlated")] {
        let case = &figures.synthetic[&rows];
        for backend in ["native", "wasm"] {
            for (name, ..) in sandgym_env_sql::SYNTHETIC_QUERIES {
                assert!(
                    case[backend].queries_ms.get(name).is_some_and(|&v| v > 0.0),
                    "{name}: {case:?}"
                );
            }
            assert_eq!(case[backend].refused, refused, "{rows} rows: {case:?}");
        }
    }
}

#[test]
fn bench_policy_reports_throughput() {
    let out = sandgym(&["bench", "policy", "--json", "--seconds", "0.05"]);
    assert_success(&out);
    let figures: sandgym::bench::policy::PolicyReport =
        serde_json::from_slice(&out.stdout).unwrap();
    for figure in [
        figures.tokens_per_s_unconstrained,
        figures.tokens_per_s_constrained,
        figures.fwd_bwd_us_per_token,
        figures.fwd_bwd_tokens_per_s,
        figures.fwd_bwd_first_pass_tokens_per_s,
    ] {
        assert!(figure > 0.0, "{figures:?}");
    }
    assert_eq!(figures.batch, 64);
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
        assert_success(&record);
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
