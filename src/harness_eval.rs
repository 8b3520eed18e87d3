//! A policy evaluated where agents run: inside the unmodified harness, served by the policy
//! server (as `sandgym serve-policy` serves it) behind the recording proxy, on the same test
//! episodes as the in-env evaluation ([`eval_plan`]: every task of the split once), greedy.
//! The harness's own prompts, sub-agent and history compression are what the policy meets.

use std::path::Path;

use sandgym_proxy::{PolicyServer, TraceReader, TraceStats, TraceStore};
use sandgym_trainer::{EvalReport, Outcome, eval_plan};
use serde::{Deserialize, Serialize};

use crate::EnvTarget;
use crate::approach::ProxySettings;
use crate::env_api::Split;
use crate::evaluation::DEFAULT_EPISODES;
use crate::harness_runner::{HarnessRunner, HarnessTotals, trace_ids};
use crate::policy::{Cpu, PolicyModel, Tokenizer};

/// A policy's figures inside the harness.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HarnessEval {
    /// Success over the episodes, with its 95% interval; a run the harness could not finish
    /// (an HTTP or tool-service error) counts as failed and as an env error.
    pub report: EvalReport,
    /// What the harness did: model calls, sub-agent calls, compressions, tokens.
    pub runs: HarnessTotals,
    /// What its traces held (segments, drift by kind).
    pub traces: TraceStats,
    /// Wall time, s.
    pub wall_s: f64,
}

/// Evaluates `model` on `split` of `target` inside its harness (`episodes` of them, or every
/// task once), recording into `db`.
pub fn harness_eval(
    target: &EnvTarget,
    model: PolicyModel<Cpu>,
    tokenizer: &Tokenizer,
    settings: &ProxySettings,
    split: Split,
    episodes: Option<usize>,
    db: &Path,
) -> anyhow::Result<HarnessEval> {
    let clock = std::time::Instant::now();
    let (seeds, options) = eval_plan(target.spec()?.tasks, split, episodes, DEFAULT_EPISODES);
    let server = PolicyServer::start(model, tokenizer.clone(), settings.server(false))?;
    let mut harness = settings.harness.clone();
    harness.temperature = 0.0;
    let runner = HarnessRunner::start(
        &target.id()?,
        &server.url(),
        db,
        harness,
        settings.concurrency,
        options,
    )?;
    let jobs: Vec<(usize, u64)> = seeds.iter().copied().enumerate().collect();
    let runs = runner.play("eval", &jobs);
    let totals = HarnessTotals::of(&runs);
    let outcomes = runs
        .iter()
        .map(|r| Outcome {
            seed: r.seed,
            task: None,
            success: r.success && r.outcome.is_ok(),
            reward: r.reward,
        })
        .collect();
    let ids = trace_ids(&runs);
    let mut reader = TraceReader::new(tokenizer.clone(), settings.limits);
    let (_, traces) = reader.read(&TraceStore::open(db)?, &ids)?;
    Ok(HarnessEval {
        report: EvalReport::of_outcomes(outcomes, totals.model_calls, totals.failed),
        runs: totals,
        traces,
        wall_s: clock.elapsed().as_secs_f64(),
    })
}
