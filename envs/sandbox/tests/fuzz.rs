//! Fuzzing by property: fault configs of any shape are refused with a typed error or run an
//! env through every kind of fault without a panic (`sleep` stays off: injected latency is
//! reported, not waited). (A coverage-guided fuzzer needs a nightly toolchain for its
//! sanitizer flags; these run in every `cargo test`.)

use proptest::prelude::*;
use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{Action, Env, ResetOptions};
use sandgym_sandbox::{FaultConfig, FaultKind};
use serde_json::{Value, json};

fn kind() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => prop::sample::select(FaultKind::ALL.to_vec())
            .prop_map(|k| serde_json::to_value(k).unwrap()),
        1 => ".{0,12}".prop_map(Value::String),
        1 => any::<i64>().prop_map(Value::from),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => (0.0f64..=1.0).prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => Just(Value::Null),
        1 => ".{0,6}".prop_map(Value::String),
    ]
}

fn rule() -> impl Strategy<Value = Value> {
    (
        kind(),
        number(),
        prop::option::of(prop::collection::vec(
            prop_oneof![Just("guess".to_owned()), ".{0,8}"],
            0..3,
        )),
        prop::option::weighted(0.2, (any::<u64>(), any::<u64>())),
        prop::option::weighted(0.6, (0u64..3000, 0u64..3000)),
        prop::option::weighted(0.1, ".{1,6}"),
    )
        .prop_map(|(kind, rate, tools, wild, tame, extra)| {
            let mut r = json!({"kind": kind, "rate": rate});
            if let Some(t) = tools {
                r["tools"] = json!(t);
            }
            if let Some((a, b)) = tame.or(wild) {
                r["latency_ms"] = json!([a, b]);
            }
            if let Some(k) = extra {
                r[k] = json!(1);
            }
            r
        })
}

fn config() -> impl Strategy<Value = Value> {
    (any::<u64>(), prop::collection::vec(rule(), 0..4))
        .prop_map(|(seed, rules)| json!({"seed": seed, "rules": rules, "sleep": false}))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_fault_config_is_refused_with_a_reason_or_runs_episodes_to_their_end(
        config in config(),
        seed in any::<u64>(),
        guesses in prop::collection::vec(0u64..=120, 1..12),
    ) {
        let text = config.to_string();
        let parsed = match FaultConfig::from_json(&text) {
            Ok(c) => c,
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                return Ok(());
            }
        };
        let mut env = sandgym_sandbox::FaultInjection::new(GuessNumber::new(), parsed).unwrap();
        for _ in 0..2 {
            if env.reset(seed, &ResetOptions::default()).is_err() {
                continue;
            }
            for &g in &guesses {
                match env.step(&Action::tool("guess", json!({"number": g}))) {
                    Ok(_) => {}
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
                if env.done().is_done() {
                    break;
                }
            }
        }
    }
}
