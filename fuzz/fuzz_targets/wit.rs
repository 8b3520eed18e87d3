//! The WIT boundary: whatever a guest answers, the host turns into a value or a typed error.
//!
//! The `garbage` guest (envs/guests/garbage) takes every choice of its answers — text that is
//! JSON or not, nested past limits or past the host's output limit, rewards of any bits,
//! statuses, errors with any detail, snapshot bytes — from the tape in its configuration, so
//! libFuzzer's mutations of the input become the guest's outputs and its coverage is the
//! host's code that lifts and checks them (wasmtime's canonical ABI and `sandgym-sandbox`).
//! The host plays one fixed episode script against each tape: it never panics, a step it
//! accepts has a finite reward, every error says something, and a refused instance is an
//! error, not a crash.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{Action, Env, ResetOptions};
use sandgym_sandbox::{CpuLimit, Guest, Limits, Sandbox, SandboxConfig};

/// The garbage guest, compiled once per process under limits tight enough for a fuzzer.
fn guest() -> &'static Guest {
    static GUEST: OnceLock<Guest> = OnceLock::new();
    GUEST.get_or_init(|| {
        let sandbox = Sandbox::new(SandboxConfig {
            limits: Limits {
                cpu: CpuLimit::Deadline(Duration::from_secs(2)),
                memory_bytes: 64 << 20,
                ..Limits::default()
            },
            max_instances: 4,
            cache_dir: None,
            ..SandboxConfig::default()
        })
        .expect("the sandbox starts");
        sandbox
            .load(sandgym_guest_artifacts::GARBAGE.wasm)
            .expect("the garbage guest loads")
    })
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fuzz_target!(|data: &[u8]| {
    let config: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(serde_json::json!({ "tape": hex(data) })).expect("an object");
    let mut env = match guest().instantiate(&config) {
        Ok(env) => env,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "a refusal without a message");
            return;
        }
    };
    assert_eq!(env.spec().id.to_string(), "garbage-v0");
    for round in 0..2u64 {
        if let Err(e) = env.reset(round, &ResetOptions::default()) {
            assert!(!e.to_string().is_empty(), "{e:?}");
        }
        let _ = env.observe();
        for _ in 0..3 {
            match env.step(&Action::tool("x", serde_json::json!({}))) {
                Ok(_) => assert!(env.reward().is_finite(), "a non-finite reward passed"),
                Err(e) => assert!(!e.to_string().is_empty(), "{e:?}"),
            }
            let _ = env.done();
        }
        match env.snapshot() {
            Ok(snapshot) => {
                let _ = env.restore(&snapshot);
            }
            Err(e) => assert!(!e.to_string().is_empty(), "{e:?}"),
        }
        if let Err(e) = env.restore(&data[..data.len().min(64)]) {
            assert!(!e.to_string().is_empty(), "{e:?}");
        }
    }
});
