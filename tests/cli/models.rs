//! Pretrained models: listing, serving a model to `run`, training with LoRA.

use super::common::{assert_success, sandgym, spawn, tiny_llama, tmp};

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
    assert_success(&sft);
    let summary = |output: &std::process::Output| -> serde_json::Value {
        assert_success(output);
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
    assert_success(&eval);
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
    assert_success(&run);
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
    assert_success(&eval);
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}
