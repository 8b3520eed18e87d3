use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;
use serde_json::json;

fn episode(seed: u64) -> Trajectory {
    let mut env = RecordTrajectory::new(GuessNumber::new());
    env.reset(seed, &ResetOptions::default()).unwrap();
    let (mut lo, mut hi) = (1, 100);
    let _ = env.step(&Action::tool("guess", json!({"number": 0})).with_thought("oops"));
    while !env.done().is_done() {
        let mid = (lo + hi) / 2;
        let obs = env
            .step(&Action::tool("guess", json!({"number": mid})).with_thought(format!("try {mid}")))
            .unwrap();
        match obs.content.as_str() {
            "higher" => lo = mid + 1,
            "lower" => hi = mid - 1,
            _ => {}
        }
    }
    env.take_trajectory()
}

#[test]
fn recorded_episodes_have_the_agent_template_shape() {
    let t = episode(5);
    assert_eq!(t.episode, "guess-number-v0/seed=5");
    assert_eq!(t.done(), Done::Terminated);
    assert_eq!(t.total_reward(), 1.0);
    assert!(
        t.records[0].observation.contains("expected an integer")
            || t.records[0].observation.contains("below the minimum")
    );
    let v = serde_json::to_value(&t.records[1]).unwrap();
    for key in [
        "instruction",
        "thought",
        "action",
        "observation",
        "response",
        "reward",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["action"]["tool_name"], "guess");
    assert!(
        v["instruction"]
            .as_str()
            .unwrap()
            .starts_with("Find the secret integer")
    );
}

#[test]
fn several_trajectories_share_a_jsonl_file() {
    let ts: Vec<_> = (0..3).map(episode).collect();
    let mut file = Vec::new();
    for t in &ts {
        t.write_jsonl(&mut file).unwrap();
    }
    assert_eq!(Trajectory::read_jsonl(file.as_slice()).unwrap(), ts);
    let bad = b"{\"instruction\":\"x\",\"reward\":0}\nnot json\n";
    let err = Trajectory::read_jsonl(&bad[..]).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn chat_export_pairs_tool_calls_with_tool_messages() {
    let t = episode(9);
    let messages = t.to_chat_messages();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["role"], "assistant");
    let call = &messages[1]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "guess");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], call["id"]);
    let args: serde_json::Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"number": 0}));
    assert_eq!(messages.len(), 1 + 2 * t.records.len());
}
