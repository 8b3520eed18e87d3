use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;
use serde_json::json;

#[test]
fn time_limit_truncates_and_terminated_wins_on_the_last_turn() {
    let mut env = TimeLimit::new(GuessNumber::with_max(4), 3);
    env.reset(1, &ResetOptions::default()).unwrap();
    assert_eq!(env.spec().max_episode_steps, Some(3));
    // Find the secret by elimination, wasting turns first.
    let _ = env.step(&Action::tool("nope", json!({})));
    let _ = env.step(&Action::tool("guess", json!({"number": 9})));
    assert_eq!(env.elapsed_steps(), 2);
    assert_eq!(env.done(), Done::Running);
    let obs = env
        .step(&Action::tool("guess", json!({"number": 2})))
        .unwrap();
    let expected = if obs.content == "correct" {
        Done::Terminated
    } else {
        Done::Truncated
    };
    assert_eq!(env.done(), expected);
    assert!(matches!(
        env.step(&Action::respond("x")),
        Err(EnvError::EpisodeOver { .. })
    ));
    // Reset starts a new budget.
    env.reset(2, &ResetOptions::default()).unwrap();
    assert_eq!((env.elapsed_steps(), env.done()), (0, Done::Running));
}

#[test]
fn wrapped_envs_still_pass_the_checker() {
    let mut env = RecordTrajectory::new(TimeLimit::from_spec(GuessNumber::new()));
    let report = check_env(&mut env);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn time_limit_snapshots_carry_the_counter() {
    let mut env = TimeLimit::new(GuessNumber::new(), 5);
    env.reset(3, &ResetOptions::default()).unwrap();
    let _ = env.step(&Action::tool("guess", json!({"number": 1})));
    let snap = env.snapshot().unwrap();
    let mut other = TimeLimit::new(GuessNumber::new(), 5);
    other.restore(&snap).unwrap();
    assert_eq!(other.elapsed_steps(), 1);
    assert_eq!(other.observe(), env.observe());
    assert!(other.restore(&[1, 2]).is_err());
}

#[test]
fn registry_resolves_versions_and_reports_unknown_ids() {
    GuessNumber::register();
    let env = make("guess-number-v0").unwrap();
    assert_eq!(env.spec().id.to_string(), "guess-number-v0");
    let env = make_with("guess-number", json!({"max": 8}).as_object().unwrap()).unwrap();
    assert!(env.spec().tools[0].parameters.properties["number"].maximum == Some(8.0));
    let err = make("nope-v1").err().unwrap();
    assert!(matches!(err, EnvError::UnknownEnv { .. }));
    assert!(err.to_string().contains("guess-number-v0"), "{err}");
    let err = make_with("guess-number-v0", json!({"colour": 1}).as_object().unwrap())
        .err()
        .unwrap();
    assert!(err.to_string().contains("colour"), "{err}");
    assert!(registered().iter().any(|r| r.id.name == "guess-number"));
}
