//! The hostile guest: every attack ends in its own typed error within bounded time, and the
//! host and other instances go on.

use std::time::{Duration, Instant};

use sandgym_env_api::{Action, Env, EnvError, ResetOptions};
use sandgym_sandbox::{CpuLimit, Sandbox, SandboxError, WasmEnv};
use serde_json::json;

fn env_in(sandbox: &Sandbox) -> WasmEnv {
    let mut env = sandbox
        .load(sandgym_guest_artifacts::HOSTILE.wasm)
        .unwrap()
        .instantiate(&Default::default())
        .unwrap();
    env.reset(0, &ResetOptions::default()).unwrap();
    env
}

fn env() -> WasmEnv {
    env_in(crate::sandbox())
}

fn attack(env: &mut WasmEnv, kind: &str) -> Result<String, EnvError> {
    env.step(&Action::tool("attack", json!({"kind": kind})))
        .map(|o| o.content)
}

/// Runs an attack that must fault the guest; returns the typed error and checks recovery.
fn fault(kind: &str) -> SandboxError {
    let mut env = env();
    let start = Instant::now();
    let err = attack(&mut env, kind).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{kind} took {:?}",
        start.elapsed()
    );
    assert_eq!(
        err.kind(),
        sandgym_env_api::ErrorKind::Episode,
        "{kind}: {err}"
    );
    assert!(env.done().is_done());
    // The instance is gone: stepping reports it, reset brings a fresh one that works.
    let again = env.step(&Action::tool("ping", json!({}))).unwrap_err();
    assert!(
        matches!(
            SandboxError::from_env_error(&again),
            Some(SandboxError::Poisoned { .. })
        ),
        "{again}"
    );
    let before = env.instances_created();
    env.reset(1, &ResetOptions::default()).unwrap();
    assert_eq!(env.instances_created(), before + 1);
    assert_eq!(
        env.step(&Action::tool("ping", json!({}))).unwrap().content,
        "pong 1"
    );
    match err {
        EnvError::Backend(inner) => *inner.downcast::<SandboxError>().unwrap(),
        other => panic!("{kind}: expected a sandbox error, got {other}"),
    }
}

#[test]
fn an_infinite_loop_hits_the_deadline() {
    let err = fault("loop");
    assert!(
        matches!(err, SandboxError::Timeout { limit } if limit == Duration::from_millis(300)),
        "{err}"
    );
}

#[test]
fn an_infinite_loop_runs_out_of_fuel() {
    let sandbox = Sandbox::new(crate::test_config(CpuLimit::Fuel(50_000_000))).unwrap();
    let mut env = env_in(&sandbox);
    assert_eq!(attack(&mut env, "clock").unwrap(), "clock 0");
    let err = attack(&mut env, "loop").unwrap_err();
    assert!(
        matches!(
            SandboxError::from_env_error(&err),
            Some(SandboxError::OutOfFuel { fuel: 50_000_000 })
        ),
        "{err}"
    );
}

#[test]
fn unbounded_allocation_hits_the_memory_limit() {
    let err = fault("alloc");
    assert!(
        matches!(err, SandboxError::MemoryLimit { limit, .. } if limit == 128 << 20),
        "{err}"
    );
}

#[test]
fn deep_recursion_overflows_the_stack() {
    let err = fault("recurse");
    assert!(matches!(err, SandboxError::StackOverflow), "{err}");
    let err = fault("recurse-big-frames");
    assert!(
        matches!(err, SandboxError::StackOverflow | SandboxError::Trap { .. }),
        "{err}"
    );
}

#[test]
fn a_panic_comes_back_with_its_message() {
    let err = fault("panic");
    match err {
        SandboxError::GuestPanic { message } => {
            assert!(
                message.contains("hostile guest panics on purpose"),
                "{message}"
            )
        }
        other => panic!("expected a guest panic, got {other}"),
    }
}

#[test]
fn a_multi_megabyte_observation_is_refused() {
    let err = fault("big-output");
    assert!(
        matches!(err, SandboxError::OutputTooLarge { limit, .. } if limit == 1 << 20),
        "{err}"
    );
}

#[test]
fn nothing_outside_is_reachable() {
    let mut env = env();
    for kind in ["open-file", "create-file", "socket"] {
        let err = attack(&mut env, kind).unwrap_err();
        assert!(
            matches!(err, EnvError::ActionRejected { .. }),
            "{kind}: {err}"
        );
        assert!(
            err.to_string().contains(&format!("{kind} denied")),
            "{kind}: {err}"
        );
    }
    assert_eq!(attack(&mut env, "clock").unwrap(), "clock 0");
    assert_eq!(attack(&mut env, "env-vars").unwrap(), "env []");
    // OS randomness is a fixed stream: two fresh instances see the same "random" hash keys.
    let a = attack(&mut env, "random").unwrap();
    let b = attack(&mut crate::hostile::env(), "random").unwrap();
    assert_eq!(a, b);
    // The env is still usable after refused attempts.
    assert_eq!(
        env.step(&Action::tool("ping", json!({}))).unwrap().content,
        "pong 1"
    );
}

#[test]
fn other_instances_keep_serving_while_one_spins() {
    let spinner = std::thread::spawn(|| {
        let mut env = env();
        let start = Instant::now();
        let err = attack(&mut env, "loop").unwrap_err();
        (err.to_string(), start.elapsed())
    });
    let mut env = env();
    let start = Instant::now();
    let mut pongs = 0;
    while start.elapsed() < Duration::from_millis(250) {
        env.step(&Action::tool("ping", json!({}))).unwrap();
        pongs += 1;
    }
    let (err, took) = spinner.join().unwrap();
    assert!(err.contains("time limit"), "{err}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(
        pongs > 10,
        "only {pongs} steps served while the other guest spun"
    );
}
