//! Fault injection: deterministic, visible, and faithful to what a failed call means.

use std::collections::BTreeSet;

use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{Action, Env, ResetOptions, check_env};
use sandgym_sandbox::{FaultConfig, FaultInjection, FaultKind, FaultRule};
use serde_json::json;

fn guess(n: u32) -> Action {
    Action::tool("guess", json!({"number": n}))
}

fn run(config: &FaultConfig, seed: u64) -> Vec<(String, Option<String>, f64)> {
    let mut env = FaultInjection::new(GuessNumber::new(), config.clone()).unwrap();
    env.reset(seed, &ResetOptions::default()).unwrap();
    let mut out = Vec::new();
    for n in [10, 20, 30, 40, 60, 70, 80, 90, 15, 25] {
        if env.done().is_done() {
            break;
        }
        let obs = env.step(&guess(n)).unwrap();
        let fault = obs
            .info
            .get("fault")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        assert_eq!(env.observe(), obs);
        out.push((obs.content, fault, env.reward()));
    }
    out
}

#[test]
fn the_same_seeds_give_the_same_faults() {
    let config = FaultConfig::all(0.05, 3);
    for seed in 0..20 {
        assert_eq!(run(&config, seed), run(&config, seed));
    }
    let other = FaultConfig::all(0.05, 4);
    assert!((0..20).any(|s| run(&config, s) != run(&other, s)));
}

#[test]
fn all_fifteen_kinds_are_injected_and_reported() {
    let mut seen = BTreeSet::new();
    for kind in FaultKind::ALL {
        let config = FaultConfig {
            seed: 1,
            rules: vec![FaultRule::new(kind, 1.0)],
            sleep: false,
        };
        let mut env = FaultInjection::new(GuessNumber::new(), config).unwrap();
        env.reset(5, &ResetOptions::default()).unwrap();
        // Two calls so that a stale result has something to repeat.
        env.step(&guess(1)).unwrap();
        let obs = env.step(&guess(2)).unwrap();
        let name = obs.info["fault"].as_str().unwrap().to_owned();
        if kind.is_blocking() {
            assert!(
                obs.content.starts_with("error: "),
                "{kind:?}: {}",
                obs.content
            );
            assert_eq!(env.reward(), 0.0);
        }
        if matches!(kind, FaultKind::Latency | FaultKind::Timeout) {
            assert!(obs.info["fault_latency_ms"].as_u64().unwrap() >= 100);
        }
        if kind == FaultKind::EmptyResult {
            assert_eq!(obs.content, "");
        }
        if kind == FaultKind::MalformedJson {
            assert!(serde_json::from_str::<serde_json::Value>(&obs.content).is_err());
        }
        assert_eq!(env.injected(), 2);
        seen.insert(name);
    }
    assert_eq!(seen.len(), 15);
}

#[test]
fn blocking_faults_leave_the_env_unchanged() {
    let config = FaultConfig {
        seed: 0,
        rules: vec![FaultRule::new(FaultKind::Timeout, 1.0)],
        sleep: false,
    };
    let mut faulty = FaultInjection::new(GuessNumber::with_max(1), config).unwrap();
    faulty.reset(0, &ResetOptions::default()).unwrap();
    // The only possible guess would end the episode, but the call never reaches the env.
    for _ in 0..3 {
        let obs = faulty.step(&guess(1)).unwrap();
        assert!(obs.content.contains("timed out"));
        assert!(!faulty.done().is_done());
    }
    // Invalid actions are still the agent's error, not a fault.
    assert!(
        faulty
            .step(&Action::tool("nope", json!({})))
            .unwrap_err()
            .is_invalid_action()
    );
    // Final responses are never faulted.
    faulty.step(&Action::respond("give up")).unwrap();
    assert!(faulty.done().is_done());
}

#[test]
fn fault_configs_are_validated_and_wrapped_envs_pass_the_checker() {
    assert!(FaultConfig::from_json(r#"{"rules": [{"kind": "timeout", "rate": 2}]}"#).is_err());
    assert!(FaultConfig::from_json(r#"{"rules": [{"kind": "gremlins", "rate": 0.5}]}"#).is_err());
    // Absurd latencies are refused, not overflowed or slept for hours.
    let huge = r#"{"sleep": true, "rules": [{"kind": "latency", "rate": 1, "latency_ms": [0, 18446744073709551615]}]}"#;
    let err = FaultConfig::from_json(huge).unwrap_err();
    assert!(err.to_string().contains("over the limit"), "{err}");
    // Built in code, the same range is refused when the env is wrapped.
    let mut wide = FaultConfig::all(1.0, 3);
    for rule in &mut wide.rules {
        rule.latency_ms = (0, u64::MAX);
    }
    assert!(FaultInjection::new(GuessNumber::new(), wide).is_err());
    let mut env = FaultInjection::new(GuessNumber::new(), FaultConfig::all(0.02, 9)).unwrap();
    let report = check_env(&mut env);
    assert!(report.is_ok(), "{report}");
}

/// Each damaging kind changes a real tool output the way its name says, checked against the
/// same call on an env without faults (an identity `damage` would fail here).
#[test]
fn damaging_faults_damage_the_output_as_their_kind_says() {
    let options = ResetOptions {
        task: Some("shop-count_table-0-0".into()),
        ..ResetOptions::default()
    };
    let first = Action::tool(
        "run_sql",
        json!({"query": "SELECT name FROM customers ORDER BY id"}),
    );
    let second = Action::tool(
        "run_sql",
        json!({"query": "SELECT id, name, category, price FROM products ORDER BY id"}),
    );
    let mut clean = sandgym_env_sql::SqlAgentEnv::new().unwrap();
    clean.reset(0, &options).unwrap();
    let clean_first = clean.step(&first).unwrap().content;
    let clean_second = clean.step(&second).unwrap().content;
    assert!(clean_second.lines().count() > 5, "{clean_second}");
    let lines = |t: &str| {
        let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    for kind in [
        FaultKind::TruncatedOutput,
        FaultKind::MalformedJson,
        FaultKind::EmptyResult,
        FaultKind::StaleResult,
        FaultKind::DuplicatedOutput,
        FaultKind::CorruptedOutput,
        FaultKind::PartialOutput,
        FaultKind::ReorderedLines,
    ] {
        let config = FaultConfig {
            seed: 3,
            rules: vec![FaultRule::new(kind, 1.0)],
            sleep: false,
        };
        let mut env =
            FaultInjection::new(sandgym_env_sql::SqlAgentEnv::new().unwrap(), config).unwrap();
        env.reset(0, &options).unwrap();
        env.step(&first).unwrap();
        let got = env.step(&second).unwrap().content;
        assert_ne!(got, clean_second, "{kind:?} left the output as it was");
        let ok = match kind {
            FaultKind::TruncatedOutput => {
                got.len() < clean_second.len() && clean_second.starts_with(&got)
            }
            FaultKind::MalformedJson => {
                got.starts_with("{\"result\": \"")
                    && serde_json::from_str::<serde_json::Value>(&got).is_err()
            }
            FaultKind::EmptyResult => got.is_empty(),
            FaultKind::StaleResult => got == clean_first,
            FaultKind::DuplicatedOutput => got == format!("{clean_second}\n{clean_second}"),
            FaultKind::CorruptedOutput => {
                got.chars().count() == clean_second.chars().count()
                    && got
                        .chars()
                        .zip(clean_second.chars())
                        .all(|(g, c)| g == c || g == '\u{FFFD}')
            }
            FaultKind::PartialOutput => got
                .strip_suffix("\nerror: stream interrupted")
                .is_some_and(|head| {
                    clean_second.starts_with(head) && head.len() < clean_second.len()
                }),
            FaultKind::ReorderedLines => lines(&got) == lines(&clean_second),
            _ => unreachable!(),
        };
        assert!(ok, "{kind:?}: {got:?}\nclean: {clean_second:?}");
    }
}
