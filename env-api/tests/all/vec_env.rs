use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;
use serde_json::json;

use crate::broken::{Broken, Flaw};

fn guess(n: u32) -> Option<Action> {
    Some(Action::tool("guess", json!({"number": n})))
}

#[test]
fn one_panicking_env_among_eight_does_not_stop_the_others() {
    let envs: Vec<BoxEnv> = (0..8)
        .map(|i| -> BoxEnv {
            if i == 3 {
                Box::new(Broken::new(Flaw::PanicsOnStep))
            } else {
                Box::new(GuessNumber::new())
            }
        })
        .collect();
    let mut vec = VecEnv::new(envs, 3, AutoReset::Disabled);
    let seeds: Vec<(usize, u64)> = (0..8).map(|i| (i, 100 + i as u64)).collect();
    assert!(
        vec.reset(&seeds, &ResetOptions::default())
            .iter()
            .all(|(_, r)| r.is_ok())
    );
    for round in 0..3 {
        let results = vec.step(vec![guess(50); 8]);
        for (i, r) in results.into_iter().enumerate() {
            let r = r.expect("every env got an action");
            if i == 3 {
                let err = r.unwrap_err();
                assert!(matches!(err, EnvError::Panicked { .. }), "{err}");
                assert!(err.to_string().contains("always panics"), "{err}");
            } else if round == 0 {
                assert!(r.is_ok(), "env {i}: {r:?}");
            }
        }
    }
    // The failed slot works again after a reset; the others kept their episodes: their next
    // step is what the same env, stepped alone with the same actions, gives.
    let again = vec.reset(&[(3, 1)], &ResetOptions::default());
    assert!(again[0].1.is_ok());
    let mut actions = vec![guess(25); 8];
    actions[3] = None;
    let next = vec.step(actions);
    for (i, r) in next.into_iter().enumerate() {
        if i == 3 {
            assert!(r.is_none());
            continue;
        }
        let mut alone = GuessNumber::new();
        alone
            .reset(100 + i as u64, &ResetOptions::default())
            .unwrap();
        for _ in 0..3 {
            let _ = alone.step(&guess(50).unwrap());
        }
        let want = alone.step(&guess(25).unwrap());
        let got = r.expect("env {i} got an action");
        match (got, want) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.observation.content, b.content, "env {i}");
                assert_eq!(a.reward, alone.reward(), "env {i}");
                assert_eq!(a.done, alone.done(), "env {i}");
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "env {i}"),
            (a, b) => panic!("env {i}: {a:?} vs {b:?}"),
        }
    }
}

#[test]
fn results_match_sequential_stepping() {
    let n = 6;
    let mut vec = VecEnv::new(
        (0..n)
            .map(|_| Box::new(GuessNumber::new()) as BoxEnv)
            .collect(),
        2,
        AutoReset::Disabled,
    );
    let seeds: Vec<(usize, u64)> = (0..n).map(|i| (i, i as u64 * 7)).collect();
    vec.reset(&seeds, &ResetOptions::default());
    let mut singles: Vec<GuessNumber> = (0..n).map(|_| GuessNumber::new()).collect();
    for (i, env) in singles.iter_mut().enumerate() {
        env.reset(i as u64 * 7, &ResetOptions::default()).unwrap();
    }
    for g in [50, 25, 75] {
        // Skip env 0 on odd guesses to exercise `None` slots.
        let actions: Vec<Option<Action>> = (0..n)
            .map(|i| if i == 0 && g == 25 { None } else { guess(g) })
            .collect();
        let results = vec.step(actions.clone());
        for (i, (r, a)) in results.into_iter().zip(actions).enumerate() {
            match a {
                None => assert!(r.is_none()),
                Some(a) => {
                    let expect = singles[i]
                        .step(&a)
                        .map(|o| (o, singles[i].reward(), singles[i].done()));
                    let got = r.unwrap().map(|t| (t.observation, t.reward, t.done));
                    assert_eq!(format!("{got:?}"), format!("{expect:?}"), "env {i}");
                }
            }
        }
    }
}

#[test]
fn next_step_autoreset_resets_with_a_fresh_seed() {
    let mut vec = VecEnv::new(
        vec![
            Box::new(GuessNumber::with_max(1)) as BoxEnv,
            Box::new(GuessNumber::with_max(1)),
        ],
        2,
        AutoReset::NextStep,
    );
    vec.reset(&[(0, 5), (1, 6)], &ResetOptions::default());
    let first = vec.step(vec![guess(1), guess(1)]);
    for r in &first {
        let t = r.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            (t.done, t.reward, t.autoreset),
            (Done::Terminated, 1.0, false)
        );
    }
    let second = vec.step(vec![guess(1), None]);
    let t = second[0].as_ref().unwrap().as_ref().unwrap();
    assert!(t.autoreset);
    assert_eq!((t.done, t.reward), (Done::Running, 0.0));
    assert!(t.observation.content.starts_with("Find the secret"));
    assert!(second[1].is_none());
}
