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
