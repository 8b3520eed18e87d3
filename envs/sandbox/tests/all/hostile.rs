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
    fault_in(crate::sandbox(), kind)
}

/// [`fault`] in an env of `sandbox`.
fn fault_in(sandbox: &Sandbox, kind: &str) -> SandboxError {
    let mut env = env_in(sandbox);
    let start = Instant::now();
    let err = attack(&mut env, kind).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{kind} took {:?}",
        start.elapsed()
    );
    assert!(
        !err.to_string().contains('\n'),
        "{kind}: the error is not one line: {err}"
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
    // A deadline far past what filling 128 MiB takes, so that on a loaded machine the memory
    // limit, not the shared sandbox's 300 ms, is what stops it.
    let sandbox = Sandbox::new(crate::test_config(CpuLimit::Deadline(Duration::from_secs(
        10,
    ))))
    .unwrap();
    let err = fault_in(&sandbox, "alloc");
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
    // 8 MiB: the copy out of the guest stops at the limit (plus slack) and is refused.
    let err = fault("big-output");
    assert!(
        matches!(err, SandboxError::TransferTooLarge { limit } if limit == 1 << 20),
        "{err}"
    );
    // Just over the limit (1,000 bytes of text more, in its JSON wrapping): copied, measured
    // and refused.
    let err = fault("over-limit-output");
    assert!(
        matches!(err, SandboxError::OutputTooLarge { limit, bytes } if limit == 1 << 20 && bytes > limit + 1000 && bytes < limit + 2000),
        "{err}"
    );
}

#[test]
fn a_multi_megabyte_error_detail_is_refused() {
    let err = fault("huge-error");
    assert!(
        matches!(err, SandboxError::TransferTooLarge { limit } if limit == 1 << 20),
        "{err}"
    );
}

/// Runs `f` on another thread and fails (instead of hanging) when it takes longer than `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|e| panic!("still running after {limit:?}: {e}"))
}

#[test]
fn blocking_wasi_calls_return_at_once_in_virtual_time() {
    let fuel = Sandbox::new(crate::test_config(CpuLimit::Fuel(50_000_000))).unwrap();
    for sandbox in [crate::sandbox().clone(), fuel] {
        let answers = within(Duration::from_secs(20), move || {
            let mut env = env_in(&sandbox);
            ["sleep", "poll-duration", "poll-instant", "stdin"]
                .map(|kind| attack(&mut env, kind).map_err(|e| format!("{kind}: {e}")))
        });
        assert_eq!(
            answers,
            [
                Ok("slept".to_owned()),
                Ok("polled".to_owned()),
                Ok("polled".to_owned()),
                Ok("stdin 0".to_owned())
            ]
        );
    }
}

#[test]
fn loops_through_wasi_end_at_the_deadline() {
    let limit = Duration::from_secs(1);
    let sandbox = Sandbox::new(crate::test_config(CpuLimit::Deadline(limit))).unwrap();
    for kind in ["loop", "sleep-loop", "clock-loop"] {
        let sandbox = sandbox.clone();
        let (err, took) = within(Duration::from_secs(20), move || {
            let mut env = env_in(&sandbox);
            let start = Instant::now();
            let err = attack(&mut env, kind).unwrap_err();
            (err, start.elapsed())
        });
        assert!(
            matches!(
                SandboxError::from_env_error(&err),
                Some(SandboxError::Timeout { .. })
            ),
            "{kind}: {err}"
        );
        // The deadline is compared with the clock at every epoch tick (1 ms): the call ends
        // at the deadline, not 25-70 % after it as when ticks were counted.
        assert!(
            took >= limit && took <= limit.mul_f64(1.1),
            "{kind} ended after {took:?} with a deadline of {limit:?}"
        );
    }
    let fuel = Sandbox::new(crate::test_config(CpuLimit::Fuel(50_000_000))).unwrap();
    let err = within(Duration::from_secs(20), move || {
        attack(&mut env_in(&fuel), "sleep-loop").unwrap_err()
    });
    assert!(
        matches!(
            SandboxError::from_env_error(&err),
            Some(SandboxError::OutOfFuel { .. })
        ),
        "{err}"
    );
}

#[test]
fn stderr_chatter_never_fills_and_a_later_panic_keeps_its_message() {
    let mut env = env();
    // 400 steps of ~500 bytes: several times the 64 KiB of stderr kept, across episodes.
    for episode in 0..4 {
        env.reset(episode, &ResetOptions::default()).unwrap();
        for _ in 0..100 {
            assert_eq!(attack(&mut env, "chatter").unwrap(), "chatted");
        }
    }
    assert_eq!(env.instances_created(), 1);
    let err = attack(&mut env, "panic").unwrap_err();
    match SandboxError::from_env_error(&err) {
        Some(SandboxError::GuestPanic { message }) => {
            assert_eq!(message, "hostile guest panics on purpose")
        }
        other => panic!("expected the guest's panic, got {other:?}"),
    }
}

#[test]
fn leaked_handles_hit_the_handle_limit() {
    let err = fault("handles");
    assert!(
        matches!(err, SandboxError::HandleLimit { limit: 10_000 }),
        "{err}"
    );
}

#[test]
fn non_finite_rewards_are_invalid_output() {
    for (kind, shown) in [("nan-reward", "NaN"), ("inf-reward", "inf")] {
        match fault(kind) {
            SandboxError::InvalidOutput { reason } => assert!(reason.contains(shown), "{reason}"),
            other => panic!("{kind}: expected invalid output, got {other}"),
        }
    }
}

#[test]
fn absurd_schema_bounds_in_a_spec_are_reported_not_allocated() {
    let guest = crate::sandbox()
        .load(sandgym_guest_artifacts::HOSTILE.wasm)
        .unwrap();
    let config = json!({"spec": "absurd-bounds"});
    let mut env = guest.instantiate(config.as_object().unwrap()).unwrap();
    let report = within(Duration::from_secs(60), move || {
        sandgym_env_api::check_env(&mut env)
    });
    assert!(!report.is_ok());
    let spec_problems: Vec<&str> = report
        .failures
        .iter()
        .filter(|f| f.check == "spec")
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        spec_problems
            .iter()
            .any(|m| m.contains("minLength 1000000000000000")),
        "{report}"
    );
    assert!(
        spec_problems
            .iter()
            .any(|m| m.contains("minItems 1099511627776")),
        "{report}"
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

#[test]
fn making_an_instance_has_its_own_cpu_budget() {
    let mut config = crate::test_config(CpuLimit::Deadline(Duration::from_millis(100)));
    config.limits.init_cpu = Some(CpuLimit::Deadline(Duration::from_millis(700)));
    let sandbox = Sandbox::new(config).unwrap();
    let guest = sandbox.load(sandgym_guest_artifacts::HOSTILE.wasm).unwrap();
    let spin = json!({"init": "spin"});
    let started = Instant::now();
    let err = within(Duration::from_secs(20), move || {
        guest.instantiate(spin.as_object().unwrap()).unwrap_err()
    });
    let took = started.elapsed();
    assert!(
        matches!(err, SandboxError::Timeout { limit } if limit == Duration::from_millis(700)),
        "{err}"
    );
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // Unset, it is INIT_CPU_FACTOR times the per-call budget, of the same kind.
    let limits = sandgym_sandbox::Limits {
        cpu: CpuLimit::Fuel(1000),
        ..Default::default()
    };
    assert_eq!(
        limits.init_budget(),
        CpuLimit::Fuel(1000 * u64::from(sandgym_sandbox::INIT_CPU_FACTOR))
    );
    let mut mixed = crate::test_config(CpuLimit::Fuel(1000));
    mixed.limits.init_cpu = Some(CpuLimit::Deadline(Duration::from_secs(1)));
    let err = Sandbox::new(mixed).unwrap_err();
    assert!(matches!(err, SandboxError::InvalidConfig { .. }), "{err}");
}
