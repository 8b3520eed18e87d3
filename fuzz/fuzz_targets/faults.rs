//! A fault config from a user and an episode from an agent, against the customer-service env
//! behind [`FaultInjection`]. The input's first line is the config (JSON), each further line an
//! action (Agent Template JSON) or `restore <snapshot>`, a snapshot from elsewhere.
//!
//! A config either fails validation or wraps the env; then no action, no injected fault and no
//! foreign snapshot panics; an injected fault is named and counted; and after every step the
//! env's own snapshot restores into a fresh env that observes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{Action, Env, FaultConfig, FaultInjection, FaultKind, ResetOptions};
use sandgym_env_support::SupportEnv;

/// At most this many lines of an input are played, so one input stays fast.
const MAX_LINES: usize = 24;

fn wrap(config: &FaultConfig) -> FaultInjection<SupportEnv> {
    static ENV: std::sync::OnceLock<SupportEnv> = std::sync::OnceLock::new();
    let env = ENV.get_or_init(SupportEnv::new).clone();
    FaultInjection::new(env, config.clone()).expect("a validated config wraps")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.lines();
    let Ok(mut config) = FaultConfig::from_json(lines.next().unwrap_or_default()) else {
        return;
    };
    // Latency is reported, never waited, under the fuzzer.
    config.sleep = false;
    let mut env = wrap(&config);
    let seed = config.seed ^ text.len() as u64;
    env.reset(seed, &ResetOptions::default())
        .expect("a bundled task resets");
    for line in lines.take(MAX_LINES) {
        if let Some(snapshot) = line.strip_prefix("restore ") {
            // Refused or taken, never a panic; the episode goes on either way.
            let _ = env.restore(snapshot.as_bytes());
            continue;
        }
        let Ok(action) = Action::from_json(line) else {
            continue;
        };
        if env.done().is_done() {
            env.reset(seed.wrapping_add(1), &ResetOptions::default())
                .expect("a bundled task resets");
        }
        let before = env.injected();
        if let Ok(obs) = env.step(&action) {
            match obs.info.get("fault") {
                Some(kind) => {
                    assert!(
                        FaultKind::ALL
                            .iter()
                            .any(|k| serde_json::to_value(k).ok().as_ref() == Some(kind)),
                        "an injected fault is named by its kind: {kind}"
                    );
                    assert_eq!(env.injected(), before + 1, "an injected fault is counted");
                }
                None => assert_eq!(env.injected(), before, "only injected faults count"),
            }
            assert!(env.reward().is_finite(), "reward {}", env.reward());
        }
        let snapshot = env.snapshot().expect("an env snapshots its own state");
        let mut copy = wrap(&config);
        copy.restore(&snapshot)
            .expect("an env's own snapshot restores");
        assert_eq!(
            copy.observe(),
            env.observe(),
            "the restored env observes the same"
        );
        assert_eq!(copy.done(), env.done());
        assert_eq!(copy.reward().to_bits(), env.reward().to_bits());
    }
});
