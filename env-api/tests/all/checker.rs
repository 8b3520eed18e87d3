use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;

use crate::broken::{Broken, Flaw};

fn check(flaw: Flaw) -> CheckReport {
    let report = check_env(&mut Broken::new(flaw));
    eprintln!("{report}");
    report
}

fn failed(report: &CheckReport, check: &str) -> bool {
    report.failures.iter().any(|f| f.check == check)
}

#[test]
fn the_toy_env_passes_with_snapshots() {
    let report = check_env(&mut GuessNumber::new());
    assert!(report.is_ok(), "{report}");
    assert!(report.warnings.is_empty(), "{report}");
    assert!(report.checks_run.contains(&"snapshot"));
    assert!(check(Flaw::None).is_ok());
}

#[test]
fn catches_an_env_that_ignores_its_seed() {
    let r = check(Flaw::IgnoresSeed);
    assert!(failed(&r, "determinism"), "{r}");
}

#[test]
fn catches_a_nan_reward() {
    let r = check(Flaw::NanReward);
    assert!(failed(&r, "rewards"), "{r}");
    assert!(
        r.failures.iter().any(|f| f.message.contains("non-finite")),
        "{r}"
    );
}

#[test]
fn catches_steps_after_terminal() {
    let r = check(Flaw::StepsAfterTerminal);
    assert!(failed(&r, "termination"), "{r}");
    assert!(
        r.failures
            .iter()
            .any(|f| f.message.contains("was accepted")),
        "{r}"
    );
}

#[test]
fn catches_a_panic_on_an_invalid_action() {
    let r = check(Flaw::PanicsOnInvalidAction);
    assert!(failed(&r, "invalid-actions"), "{r}");
    assert!(
        r.failures.iter().any(|f| f.message.contains("panicked")),
        "{r}"
    );
}

#[test]
fn catches_a_reward_outside_the_declared_range() {
    let r = check(Flaw::RewardOutOfRange);
    assert!(failed(&r, "rewards"), "{r}");
    assert!(
        r.failures
            .iter()
            .any(|f| f.message.contains("outside the declared range")),
        "{r}"
    );
}

#[test]
fn catches_state_changed_by_an_invalid_action() {
    let r = check(Flaw::MutatesOnInvalidAction);
    assert!(failed(&r, "invalid-actions"), "{r}");
}

#[test]
fn catches_a_step_panic_and_a_bad_spec() {
    let r = check(Flaw::PanicsOnStep);
    assert!(failed(&r, "step"), "{r}");

    struct BadSpec(GuessNumber, EnvSpec);
    impl Env for BadSpec {
        fn spec(&self) -> &EnvSpec {
            &self.1
        }
        fn reset(&mut self, seed: u64, o: &ResetOptions) -> Result<Observation> {
            self.0.reset(seed, o)
        }
        fn observe(&self) -> Observation {
            self.0.observe()
        }
        fn step(&mut self, a: &Action) -> Result<Observation> {
            self.0.step(a)
        }
        fn reward(&self) -> f64 {
            self.0.reward()
        }
        fn done(&self) -> Done {
            self.0.done()
        }
    }
    let inner = GuessNumber::new();
    let mut spec = inner.spec().clone();
    spec.tools.push(spec.tools[0].clone());
    spec.tools.push(ToolSpec::new("bad name!", "x"));
    spec.reward_range = (1.0, 0.0);
    let r = check_env(&mut BadSpec(inner, spec));
    let spec_failures = r.failures.iter().filter(|f| f.check == "spec").count();
    assert_eq!(spec_failures, 3, "{r}");
}

#[test]
fn a_constant_env_is_warned_about() {
    // An env with a single task is legal, but all seeds giving the same episode is suspicious.
    let options = CheckOptions {
        actions: Some(vec![Action::respond("no idea")]),
        ..CheckOptions::default()
    };
    let r = check_env_with(&mut GuessNumber::new(), &options);
    assert!(r.is_ok(), "{r}");
    assert!(r.flagged("determinism"), "{r}");
}

#[test]
fn checks_an_episodes_narrowing_against_the_spec() {
    let good = check(Flaw::NarrowsWell);
    assert!(good.is_ok(), "{good}");
    assert!(good.checks_run.contains(&"narrowing"), "{good}");
    let unknown = check(Flaw::NarrowsAnUnknownTool);
    assert!(failed(&unknown, "narrowing"), "{unknown}");
    assert!(unknown.to_string().contains("shout"), "{unknown}");
    let wider = check(Flaw::NarrowsWider);
    assert!(failed(&wider, "narrowing"), "{wider}");
    assert!(wider.to_string().contains("not the tool's"), "{wider}");
    // The toy env narrows nothing and has no narrowing check.
    assert!(!check(Flaw::None).checks_run.contains(&"narrowing"));
}
