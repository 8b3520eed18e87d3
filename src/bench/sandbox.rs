//! `sandgym bench sandbox`: the WASM sandbox against native — a step's round trip, fresh
//! episodes, snapshots, threads ([`SandboxReport`]).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{per_call, ratio, us};
use crate::env_api::toy::GuessNumber;
use crate::env_api::{Action, Env, ResetOptions};
use crate::sandbox::{Guest, Sandbox, SandboxConfig};

/// What `bench sandbox` measured: times in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxReport {
    /// A guess-number step natively.
    pub step_native_us: f64,
    /// The same step in the sandbox.
    pub step_wasm_us: f64,
    /// The native step plus the JSON work the boundary does: what remains of the WASM time is
    /// the component call and the guest's slower code.
    pub step_native_with_boundary_json_us: f64,
    /// WASM over native.
    pub step_ratio_wasm_over_native: f64,
    /// A fresh instance and its reset.
    pub fresh_episode_us: f64,
    /// A reset of an instance in use.
    pub reset_reused_instance_us: f64,
    /// A snapshot.
    pub snapshot_us: f64,
    /// A restore.
    pub restore_us: f64,
    /// A snapshot's size.
    pub snapshot_bytes: usize,
    /// Steps per second on two threads, an instance each.
    pub steps_per_s_2_threads: f64,
}

/// Runs the benchmark, about `budget` per figure.
pub fn run(budget: Duration) -> anyhow::Result<SandboxReport> {
    let config = json!({"max": 1_000_000});
    let config = config.as_object().expect("an object");
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let guest = sandbox.load(
        crate::bundled_guest("guess-number-v0")
            .expect("bundled")
            .wasm,
    )?;
    // Guessing 1 keeps the episode going (the secret is almost never 1), so every step is the
    // same valid tool call with the same reply.
    let action = Action::tool("guess", json!({"number": 1})).with_thought("binary search next");
    let seed = 1;
    let mut native = GuessNumber::from_config(config)?;
    let mut wasm = guest.instantiate(config)?;
    native.reset(seed, &ResetOptions::default())?;
    wasm.reset(seed, &ResetOptions::default())?;
    anyhow::ensure!(
        native.step(&action)?.content == "higher",
        "seed {seed} has secret 1"
    );
    wasm.step(&action)?;

    let step_native = per_call(budget, || {
        native.step(&action).expect("native step");
    });
    let step_wasm = per_call(budget, || {
        wasm.step(&action).expect("wasm step");
    });
    // The same step natively plus the JSON work the boundary does (action encoded and decoded,
    // observation encoded and decoded): what remains of the WASM time is the component call
    // itself and the guest's slower code.
    let step_native_json = per_call(budget, || {
        let parsed = Action::from_json(&action.to_json()).expect("valid");
        let obs = native.step(&parsed).expect("native step");
        let text = serde_json::to_string(&obs).expect("serialisable");
        let _: crate::env_api::Observation = serde_json::from_str(&text).expect("parses");
    });
    let fresh = per_call(budget, || {
        let mut env = guest.instantiate(config).expect("instantiate");
        env.reset(seed, &ResetOptions::default()).expect("reset");
    });
    let reset_reused = per_call(budget, || {
        wasm.reset(seed, &ResetOptions::default()).expect("reset");
    });
    let snap = wasm.snapshot()?;
    let snapshot = per_call(budget, || {
        wasm.snapshot().expect("snapshot");
    });
    let restore = per_call(budget, || {
        wasm.restore(&snap).expect("restore");
    });
    let steps_per_s = parallel_steps(&guest, config, &action, 2, budget)?;

    Ok(SandboxReport {
        step_native_us: us(step_native),
        step_wasm_us: us(step_wasm),
        step_native_with_boundary_json_us: us(step_native_json),
        step_ratio_wasm_over_native: ratio(step_wasm.as_secs_f64(), step_native.as_secs_f64()),
        fresh_episode_us: us(fresh),
        reset_reused_instance_us: us(reset_reused),
        snapshot_us: us(snapshot),
        restore_us: us(restore),
        snapshot_bytes: snap.len(),
        steps_per_s_2_threads: steps_per_s.round(),
    })
}

fn parallel_steps(
    guest: &Guest,
    config: &Map<String, Value>,
    action: &Action,
    threads: usize,
    budget: Duration,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let total: anyhow::Result<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<u64> {
                    let mut env = guest.instantiate(config)?;
                    env.reset(1, &ResetOptions::default())?;
                    let mut n = 0;
                    while start.elapsed() < budget {
                        env.step(action)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .sum()
    });
    Ok(total? as f64 / start.elapsed().as_secs_f64())
}
