//! `sandgym bench envs`: the bundled envs natively and in WASM — a representative query step,
//! a reset, baseline episodes — and the SQL env at real sizes ([`EnvsReport`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Map, json};

use super::{per_call, ratio, sql_scale, us};
use crate::env_api::{Action, DEFAULT_MAX_STEPS, Env, RecordTrajectory, ResetOptions, play};

pub use super::sql_scale::{DumpFigures, SyntheticFigures};

/// What `bench envs` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvsReport {
    /// Per bundled env id.
    pub envs: BTreeMap<String, EnvFigures>,
    /// sql-agent-v0 over a real-size SQLite dump (the music fixture), by backend.
    pub music: BTreeMap<String, DumpFigures>,
    /// sql-agent-v0 over generated databases, by rows per large table, then by backend.
    pub synthetic: BTreeMap<usize, BTreeMap<String, SyntheticFigures>>,
}

/// One env on both backends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvFigures {
    /// In this process.
    pub native: BackendFigures,
    /// In the sandbox.
    pub wasm: BackendFigures,
    /// The query step's time, WASM over native.
    pub query_step_ratio_wasm_over_native: f64,
}

/// One env on one backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendFigures {
    /// A representative query step (µs).
    pub query_step_us: f64,
    /// A reset (µs).
    pub reset_us: f64,
    /// Env steps per second of baseline episodes (resets included).
    pub baseline_steps_per_s: f64,
}

/// Runs the benchmark: about `budget` per figure; the generated SQL databases at each of
/// `rows`, under a row budget of `max_rows_read` per query.
pub fn run(budget: Duration, rows: &[usize], max_rows_read: u64) -> anyhow::Result<EnvsReport> {
    let cases = [
        (
            "sql-agent-v0",
            "shop-count_table-0-0",
            Action::tool(
                "run_sql",
                json!({"query": "SELECT status, COUNT(*) FROM orders GROUP BY status"}),
            ),
        ),
        (
            "customer-service-v0",
            "support-0000",
            Action::tool("search_kb", json!({"query": "refund after return"})),
        ),
    ];
    let mut envs = BTreeMap::new();
    for (id, task, action) in cases {
        let mut sides = Vec::new();
        for backend in [crate::Backend::Native, crate::Backend::Wasm] {
            let mut env = crate::make_env(id, backend, &Map::new())?;
            let options = ResetOptions::default().with_task(task);
            env.reset(0, &options)?;
            env.step(&action)?;
            let step = per_call(budget, || {
                env.step(&action).expect("step");
            });
            let mut seed = 0;
            let reset = per_call(budget, || {
                seed += 1;
                env.reset(seed, &ResetOptions::default()).expect("reset");
            });
            let episodes = baseline_steps_per_s(env, id, budget)?;
            sides.push((
                step,
                BackendFigures {
                    query_step_us: us(step),
                    reset_us: us(reset),
                    baseline_steps_per_s: episodes.round(),
                },
            ));
        }
        let (wasm_step, wasm) = sides.pop().expect("two backends");
        let (native_step, native) = sides.pop().expect("two backends");
        envs.insert(
            id.to_owned(),
            EnvFigures {
                native,
                wasm,
                query_step_ratio_wasm_over_native: ratio(
                    wasm_step.as_secs_f64(),
                    native_step.as_secs_f64(),
                ),
            },
        );
    }
    Ok(EnvsReport {
        envs,
        music: sql_scale::sqlite_dump(budget)?,
        synthetic: sql_scale::run(rows, max_rows_read)?,
    })
}

/// Env steps per second of baseline episodes (reset included), for about `budget`.
fn baseline_steps_per_s(
    env: crate::env_api::BoxEnv,
    id: &str,
    budget: Duration,
) -> anyhow::Result<f64> {
    let mut env = RecordTrajectory::new(env);
    let start = Instant::now();
    let (mut steps, mut seed) = (0usize, 0u64);
    let limit = env.spec().max_episode_steps.unwrap_or(DEFAULT_MAX_STEPS);
    while start.elapsed() < budget {
        let mut agent = crate::registry::baseline(id).context("no baseline")?;
        let episode = play(&mut env, &mut agent, seed, &ResetOptions::default(), limit)?;
        anyhow::ensure!(episode.error.is_none(), "{id}: {:?}", episode.error);
        seed += 1;
        steps += episode.steps;
    }
    Ok(steps as f64 / start.elapsed().as_secs_f64())
}
