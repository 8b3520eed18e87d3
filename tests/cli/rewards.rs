//! Composed rewards and sandboxed reward plugins.

use super::common::{assert_success, sandgym, tmp};

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
        assert_success(&out);
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
    assert_success(&eval);
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
        assert_success(&out);
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
    assert_success(&trained);
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
    let mut costs = 0;
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        // An iteration in which the (untrained, tiny) policy made no tool call has no cost
        // part; the plugin's term is then 0 and nothing else.
        let cost = m["reward_parts"]["rubric/tool_cost"]
            .as_f64()
            .unwrap_or(0.0);
        let term = m["reward_terms"]["rubric"]
            .as_f64()
            .unwrap_or_else(|| panic!("no rubric term: {m}"));
        assert!(cost <= 0.0 && (cost - term).abs() < 1e-9, "{m}");
        costs += usize::from(cost < 0.0);
        let mean = m["reward_mean"].as_f64().unwrap();
        let env = m["reward_terms"]["env"].as_f64().unwrap();
        assert!((env + term - mean).abs() < 1e-9, "{m}");
        assert_eq!(m["env_errors"], 0, "{m}");
    }
    assert!(costs > 0, "no iteration made a tool call: {metrics}");
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
    assert_success(&trained);
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
    assert_success(&run);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["failed_episodes"], 3, "{summary}");
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("panics on purpose"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
