//! The same env, natively and in WASM, gives identical trajectories; snapshots fork episodes.

use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{Action, Env, RecordTrajectory, ResetOptions, SplitMix64, Trajectory};
use serde_json::json;

fn wasm() -> sandgym_sandbox::WasmEnv {
    crate::sandbox()
        .load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)
        .unwrap()
        .instantiate(&Default::default())
        .unwrap()
}

/// A random action sequence with invalid actions mixed in.
fn actions(seed: u64) -> Vec<Action> {
    let mut rng = SplitMix64::new(seed);
    (0..12)
        .map(|_| match rng.below(10) {
            0 => Action::tool("shout", json!({})),
            1 => Action::tool("guess", json!({"number": "many"})),
            2 => Action::respond("I give up").with_thought("tired"),
            _ => Action::tool("guess", json!({"number": rng.below(100) + 1})).with_thought("hmm"),
        })
        .collect()
}

fn play(env: impl Env, seed: u64) -> Trajectory {
    let mut env = RecordTrajectory::new(env);
    env.reset(seed, &ResetOptions::default()).unwrap();
    for a in actions(seed) {
        let _ = env.step(&a);
    }
    env.take_trajectory()
}

#[test]
fn native_and_wasm_give_identical_trajectories() {
    let mut guest = wasm();
    for seed in 0..40 {
        let native = play(GuessNumber::new(), seed);
        let sandboxed = play(&mut guest, seed);
        assert_eq!(native, sandboxed, "seed {seed}");
        assert!(!native.records.is_empty());
    }
}

#[test]
fn snapshot_restore_into_a_new_instance_continues_identically() {
    for seed in 0..10 {
        let script = actions(seed + 100);
        let mut original = wasm();
        original.reset(seed, &ResetOptions::default()).unwrap();
        let _ = original.step(&Action::tool("guess", json!({"number": 50})));
        let snap = original.snapshot().unwrap();
        let mut fork = wasm();
        fork.restore(&snap).unwrap();
        assert_eq!(fork.observe(), original.observe());
        assert_eq!(
            (fork.reward(), fork.done()),
            (original.reward(), original.done())
        );
        for a in &script {
            let x = original.step(a).map_err(|e| e.to_string());
            let y = fork.step(a).map_err(|e| e.to_string());
            assert_eq!(x, y, "seed {seed}");
            assert_eq!(
                (original.reward(), original.done()),
                (fork.reward(), fork.done())
            );
        }
        // A native env restores the guest's snapshot too (the bytes are the env's own
        // format), and then plays on exactly as the guest did.
        let mut native = GuessNumber::new();
        native.restore(&snap).unwrap();
        let mut again = wasm();
        again.restore(&snap).unwrap();
        assert_eq!(native.observe(), again.observe(), "seed {seed}");
        for a in &script {
            let x = native.step(a).map_err(|e| e.to_string());
            let y = again.step(a).map_err(|e| e.to_string());
            assert_eq!(x, y, "seed {seed}");
            assert_eq!(
                (native.reward(), native.done()),
                (again.reward(), again.done())
            );
        }
    }
}

/// Seeds `0..n` with `cycle` play each of a split's `n` tasks exactly once, natively and in
/// the sandbox (the options cross the WIT boundary), for both envs with task lists.
#[test]
fn cycling_seeds_play_every_task_of_a_split_once() {
    use sandgym_env_api::Split;
    use std::collections::BTreeSet;
    let envs: [(Box<dyn Env>, sandgym_guest_artifacts::Guest); 2] = [
        (
            Box::new(sandgym_env_sql::SqlAgentEnv::new().unwrap()),
            sandgym_guest_artifacts::SQL_AGENT,
        ),
        (
            Box::new(sandgym_env_support::SupportEnv::new()),
            sandgym_guest_artifacts::CUSTOMER_SERVICE,
        ),
    ];
    for (mut native, guest) in envs {
        let mut wasm = crate::sandbox()
            .load(guest.wasm)
            .unwrap()
            .instantiate(&Default::default())
            .unwrap();
        let counts = native.spec().tasks.expect("a fixed task list");
        assert_eq!(wasm.spec().tasks, Some(counts));
        for split in [Split::Train, Split::Test] {
            let n = counts.get(split);
            assert!(n > 0);
            let options = ResetOptions::split(split).cycling();
            let mut seen = BTreeSet::new();
            for seed in 0..n {
                let a = native.reset(seed, &options).unwrap();
                let b = wasm.reset(seed, &options).unwrap();
                assert_eq!(a, b);
                seen.insert(a.info["task"].as_str().unwrap().to_owned());
            }
            assert_eq!(seen.len() as u64, n, "{} {split:?}", native.spec().id);
            // Drawn by seed instead, as many episodes miss some tasks and repeat others.
            let drawn: BTreeSet<String> = (0..n)
                .map(|seed| {
                    let obs = native.reset(seed, &ResetOptions::split(split)).unwrap();
                    obs.info["task"].as_str().unwrap().to_owned()
                })
                .collect();
            assert!(drawn.len() < seen.len());
        }
    }
}
