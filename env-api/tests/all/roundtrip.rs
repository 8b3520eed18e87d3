//! Property tests: JSON round-trips, and no panic on arbitrary input.

use proptest::prelude::*;
use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;
use serde_json::{Map, Value};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn params() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

fn action() -> impl Strategy<Value = Action> {
    let call = ("[a-z_]{1,12}", params()).prop_map(|(tool_name, parameters)| {
        ActionBody::ToolCall(ToolCall {
            tool_name,
            parameters,
        })
    });
    let response = ".{0,40}".prop_map(ActionBody::Response);
    (".{0,40}", prop_oneof![call, response]).prop_map(|(thought, body)| Action { thought, body })
}

fn record() -> impl Strategy<Value = StepRecord> {
    (action(), ".{0,30}", ".{0,60}", -1e6f64..1e6)
        .prop_map(|(a, instr, obs, reward)| StepRecord::new(instr, &a, obs, reward))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn actions_round_trip(a in action()) {
        let text = a.to_json();
        prop_assert_eq!(Action::from_json(&text).unwrap(), a.clone());
        let via_serde: Action = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        prop_assert_eq!(via_serde, a);
    }

    #[test]
    fn records_round_trip(r in record()) {
        let back: StepRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.to_action().is_some(), true);
    }

    #[test]
    fn trajectories_round_trip_through_jsonl(
        episodes in prop::collection::vec(prop::collection::vec(record(), 1..5), 1..4)
    ) {
        let mut file = Vec::new();
        let mut expected = Vec::new();
        for (i, records) in episodes.into_iter().enumerate() {
            let mut t = Trajectory::new(format!("env-v0/seed={i}"));
            let n = records.len();
            for (j, mut r) in records.into_iter().enumerate() {
                if j + 1 == n { r.done = Done::Terminated; }
                t.push(r);
            }
            t.write_jsonl(&mut file).unwrap();
            expected.push(t);
        }
        prop_assert_eq!(Trajectory::read_jsonl(file.as_slice()).unwrap(), expected);
    }

    #[test]
    fn arbitrary_json_as_an_action_is_a_typed_error_or_an_action(v in json_value()) {
        match Action::from_value(v.clone()) {
            Ok(a) => prop_assert_eq!(Action::from_json(&a.to_json()).unwrap(), a),
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::InvalidAction),
        }
        // The same through text, and arbitrary text too.
        let _ = Action::from_json(&v.to_string());
    }

    #[test]
    fn arbitrary_text_as_an_action_never_panics(s in ".{0,200}") {
        if let Err(e) = Action::from_json(&s) {
            prop_assert!(e.is_invalid_action());
        }
    }

    #[test]
    fn arbitrary_actions_leave_the_toy_env_valid(actions in prop::collection::vec(action(), 1..8), seed in any::<u64>()) {
        let mut env = GuessNumber::new();
        env.reset(seed, &ResetOptions::default()).unwrap();
        for a in &actions {
            let before = (env.observe(), env.done());
            match env.step(a) {
                Ok(_) => {}
                Err(e) => {
                    prop_assert!(matches!(e.kind(), ErrorKind::InvalidAction | ErrorKind::Usage), "{e}");
                    prop_assert_eq!(before, (env.observe(), env.done()));
                }
            }
        }
    }

    #[test]
    fn the_toy_env_is_deterministic(seed in any::<u64>(), guesses in prop::collection::vec(1u32..=100, 1..8)) {
        let run = |seed| {
            let mut env = GuessNumber::new();
            let mut out = vec![env.reset(seed, &ResetOptions::default()).unwrap().content];
            for g in &guesses {
                match env.step(&Action::tool("guess", serde_json::json!({"number": g}))) {
                    Ok(o) => out.push(format!("{} {}", o.content, env.reward())),
                    Err(e) => out.push(e.to_string()),
                }
            }
            out
        };
        prop_assert_eq!(run(seed), run(seed));
    }
}

#[test]
fn validation_messages_tell_the_agent_what_to_do() {
    let env = GuessNumber::new();
    let tools = &env.spec().tools;
    let err = validate_action(
        tools,
        &Action::tool("guess", serde_json::json!({"number": "ten"})),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters for tool `guess`: parameters.number: expected an integer, got a string"
    );
    let err =
        validate_action(tools, &Action::tool("guess", serde_json::json!({"n": 3}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters for tool `guess`: parameters: missing required `number`; parameters: unexpected `n` (allowed: number)"
    );
}
