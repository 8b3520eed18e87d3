//! Training, SFT, evaluation, the closing table, resume and crash recovery.

use super::common::{assert_success, sandgym, tmp};

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
    assert_success(&compare);
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
    assert_success(&eval);
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
    assert_success(&resume);
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
    assert_success(&run);
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
fn train_killed_at_random_moments_resumes_to_a_whole_run() {
    // `bench crash` kills `train` with SIGKILL at random moments and resumes it; the README's
    // figure is its 20-trial run, CI runs two.
    let out = sandgym(&["bench", "crash", "--trials", "2", "--seed", "7", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: sandgym::bench::crash::CrashReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.trials, 2, "{report:?}");
    assert_eq!(report.whole_after, 2, "{report:?}\n{stderr}");
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(report.killed.values().sum::<usize>(), 2, "{report:?}");
}
