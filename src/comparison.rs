//! The comparison behind `sandgym compare`: the env approach and the proxy approach on the
//! same agent, from the same initial policy, on the same tasks and seeds with the same budget,
//! each measured the same way.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use crate::approach::{HarnessTotals, ProxyApproach, ProxyIteration, ProxySettings, percentile};
use crate::env_api::{ResetOptions, Split};
use crate::policy::{CpuTrain, load};
use crate::proxy::{TraceStats, TraceStore};
use crate::trainer::plot::{Series, line_chart};
use crate::trainer::{Algo, IterMetrics, NewRun, RunDir, Trainer};
use crate::training::{env_batch, fresh_policy, settings};
use crate::{Backend, EpisodeSource};

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The env (one with a harness: sql-agent-v0 or customer-service-v0).
    pub env: String,
    /// The algorithm both approaches train with.
    pub algo: Algo,
    /// Training iterations of each approach.
    pub iters: u32,
    /// Output directory: `env/` and `proxy/` runs, `compare.json`, `compare-reward.png`.
    pub out: PathBuf,
    /// The initial policy (a run or policy directory); without it, the preset's SFT
    /// warm-start is run once and both approaches start from its result.
    pub init: Option<PathBuf>,
    /// A JSON file of settings overriding the env's preset.
    pub config: Option<PathBuf>,
    /// Seed of tasks, sampling and initial weights.
    pub seed: Option<u64>,
    /// Harness runs at a time in the proxy approach.
    pub concurrency: usize,
}

/// One approach's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    /// Lines of code written or changed to bring the agent to training.
    pub integration_lines: usize,
    /// What those lines are.
    pub integration: String,
    /// Model calls made by the agent.
    pub model_calls: usize,
    /// Model calls whose tokens reached the update exactly as sampled: each trained turn
    /// checked against the sampler's own journal (the rollout engine's in the env approach,
    /// the policy server's in the proxy approach), each journal entry matched once.
    pub calls_captured_exactly: usize,
    /// Tokens the policy generated.
    pub generated_tokens: u64,
    /// Generated tokens that reached the update exactly as sampled (as above).
    pub tokens_captured_exactly: u64,
    /// Breaks between a call and the context the next call was given (sub-agent switches,
    /// compression, re-tokenisation), found in the proxy's traces. In the env approach an
    /// episode is one token sequence that each turn extends, so there is none to find; the
    /// same holds for sub-agent calls and compressions, which the rewritten harness dropped.
    pub drift: usize,
    /// Of which by history compression.
    pub drift_compressed: usize,
    /// Of which by re-tokenisation of earlier answers.
    pub drift_retokenised: usize,
    /// Calls made by sub-agents (a harness behaviour an env refactor drops).
    pub sub_agent_calls: usize,
    /// History compressions (likewise).
    pub compressions: usize,
    /// Latency the approach adds to a model call, median, ms (`null`: in-process).
    pub added_latency_p50_ms: Option<f64>,
    /// 99th percentile of it.
    pub added_latency_p99_ms: Option<f64>,
    /// Episodes (harness runs) per second of playing wall time.
    pub episodes_per_s: f64,
    /// Env steps per second of time spent inside env steps (env approach only: in the proxy
    /// approach env calls happen inside the harness, between model calls).
    pub env_steps_per_s: Option<f64>,
    /// Model calls per second while playing.
    pub calls_per_s: f64,
    /// Wall time of the whole approach, s.
    pub wall_s: f64,
    /// Mean reward per iteration.
    pub reward_curve: Vec<f64>,
    /// Success rate per iteration.
    pub success_curve: Vec<f64>,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The env.
    pub env: String,
    /// Iterations of each approach.
    pub iters: u32,
    /// Episodes (harness runs) per iteration.
    pub episodes_per_iter: usize,
    /// The env approach.
    pub env_approach: Side,
    /// The proxy approach.
    pub proxy_approach: Side,
}

/// One iteration of one approach, as it finishes: `"env"` or `"proxy"`, its metrics and, for
/// the proxy approach, what its traces held.
pub type OnIteration<'a> = &'a mut dyn FnMut(&str, &IterMetrics, Option<&TraceStats>);

/// Runs both approaches and writes `compare.json` and `compare-reward.png` into `args.out`.
pub fn compare(args: &CompareOptions, on_iteration: OnIteration<'_>) -> anyhow::Result<Report> {
    let algo = args.algo;
    let target = crate::EnvTarget::new(args.env.clone());
    let config = settings(
        &args.env,
        algo,
        &crate::training::ModelChoice::tiny(),
        args.config.as_deref(),
        Some(args.iters),
        args.seed,
    )?;
    crate::approach::HarnessKind::for_env(&args.env)
        .with_context(|| format!("{} has no harness to compare with", args.env))?;
    let out = args.out.clone();
    let device = Default::default();
    let (policy_config, model, tokenizer) = match &args.init {
        Some(dir) => load::checkpoint::<CpuTrain>(&RunDir::new(dir).policy(), &device)?,
        None => fresh_policy::<CpuTrain>(
            &target,
            &config,
            &device,
            Some(&out.join("init")),
            &Default::default(),
        )?,
    };
    let n = config.episodes_per_iter();
    let meta = |source, backend| crate::RunMeta {
        backend,
        init: args.init.clone(),
        source,
        ..crate::RunMeta::new(&target, crate::ModelSource::Tiny)
    };
    let start = |source, backend, model, envs| NewRun {
        meta: meta(source, backend).to_value(),
        config: config.clone(),
        policy_config: policy_config.clone(),
        model,
        tokenizer: tokenizer.clone(),
        envs,
        options: ResetOptions::split(Split::Train),
    };

    // The env approach: the env's rollout engine, envs in the WASM sandbox.
    let clock = Instant::now();
    let envs = env_batch(&target, Backend::Wasm, n)?;
    let mut trainer = Trainer::<CpuTrain>::new(
        &out.join("env"),
        start(EpisodeSource::Env, Backend::Wasm, model.clone(), envs),
        device,
    )?;
    let mut env_history: Vec<IterMetrics> = Vec::new();
    trainer.run(|m| {
        on_iteration("env", m, None);
        env_history.push(m.clone());
    })?;
    let env_wall = clock.elapsed().as_secs_f64();
    // Its envs (sandbox instances, which the pool caps) are not needed any more.
    drop(trainer);

    // The proxy approach: the harness, the policy server, the recording proxy.
    let clock = Instant::now();
    let envs = env_batch(&target, Backend::Native, n)?;
    let mut trainer = Trainer::<CpuTrain>::new(
        &out.join("proxy"),
        start(EpisodeSource::Proxy, Backend::Native, model, envs),
        device,
    )?;
    let db = out.join("proxy").join("traces.db");
    let mut approach = ProxyApproach::start(
        &args.env,
        trainer.inference_model(),
        tokenizer,
        &db,
        ProxySettings::for_config(&config, args.concurrency),
    )?;
    let mut proxy_history: Vec<ProxyIteration> = Vec::new();
    while !trainer.finished() {
        let it = approach.iteration(&mut trainer)?;
        on_iteration("proxy", &it.metrics, Some(&it.traces));
        proxy_history.push(it);
    }
    crate::trainer::write_plots(trainer.out())?;
    let proxy_wall = clock.elapsed().as_secs_f64();
    drop(approach);

    let report = Report {
        env: args.env.clone(),
        iters: args.iters,
        episodes_per_iter: n,
        env_approach: env_side(&args.env, &env_history, env_wall),
        proxy_approach: proxy_side(&proxy_history, &TraceStore::open(&db)?, proxy_wall)?,
    };
    let curve = |name: &str, ys: &[f64]| {
        Series::new(
            name,
            ys.iter()
                .enumerate()
                .map(|(i, &y)| ((i + 1) as f64, y))
                .collect(),
        )
    };
    line_chart(
        &out.join("compare-reward.png"),
        "mean reward per iteration",
        "iteration",
        &[
            curve("env approach", &report.env_approach.reward_curve),
            curve("proxy approach", &report.proxy_approach.reward_curve),
        ],
    )?;
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

fn env_side(env: &str, history: &[IterMetrics], wall_s: f64) -> Side {
    let turns: f64 = history
        .iter()
        .map(|m| m.turns_mean * m.episodes as f64)
        .sum();
    let tokens: f64 = history
        .iter()
        .map(|m| m.response_tokens_mean * m.episodes as f64)
        .sum();
    let rollout_s: f64 = history.iter().map(|m| m.rollout_s).sum();
    let calls = turns.round() as usize;
    Side {
        integration_lines: crate::approach::integration_lines(env).unwrap_or(0),
        integration: "the harness rewritten as an Env (its env.rs)".into(),
        model_calls: calls,
        calls_captured_exactly: history.iter().map(|m| m.calls_trained_exactly).sum(),
        generated_tokens: tokens.round() as u64,
        tokens_captured_exactly: history
            .iter()
            .map(|m| m.tokens_trained_exactly as u64)
            .sum(),
        episodes_per_s: history.iter().map(|m| m.episodes as f64).sum::<f64>()
            / rollout_s.max(1e-9),
        env_steps_per_s: Some(
            history.iter().map(|m| m.env_steps_per_s).sum::<f64>() / history.len().max(1) as f64,
        ),
        calls_per_s: calls as f64 / rollout_s.max(1e-9),
        wall_s,
        reward_curve: history.iter().map(|m| m.reward_mean).collect(),
        success_curve: history.iter().map(|m| m.success_rate).collect(),
        ..Side::default()
    }
}

fn proxy_side(history: &[ProxyIteration], store: &TraceStore, wall_s: f64) -> anyhow::Result<Side> {
    let mut traces = TraceStats::default();
    let mut harness = HarnessTotals::default();
    for it in history {
        traces.merge(&it.traces);
        harness.merge(&it.harness);
    }
    let added = store.added_latencies_us()?;
    let ms = |us: u64| us as f64 / 1000.0;
    let rollout_s: f64 = history.iter().map(|it| it.rollout_s).sum();
    Ok(Side {
        integration_lines: 0,
        integration: "none in the harness: its base URL (configuration) points at the proxy".into(),
        model_calls: harness.model_calls,
        calls_captured_exactly: history
            .iter()
            .map(|it| it.metrics.calls_trained_exactly)
            .sum(),
        generated_tokens: harness.completion_tokens,
        tokens_captured_exactly: history
            .iter()
            .map(|it| it.metrics.tokens_trained_exactly as u64)
            .sum(),
        drift: traces.drift.total(),
        drift_compressed: traces.drift.compressed,
        drift_retokenised: traces.drift.retokenised,
        sub_agent_calls: harness.sub_agent_calls,
        compressions: harness.compressions,
        added_latency_p50_ms: Some(ms(percentile(&added, 0.5))),
        added_latency_p99_ms: Some(ms(percentile(&added, 0.99))),
        episodes_per_s: harness.runs as f64 / rollout_s.max(1e-9),
        env_steps_per_s: None,
        calls_per_s: harness.model_calls as f64 / rollout_s.max(1e-9),
        wall_s,
        reward_curve: history.iter().map(|it| it.metrics.reward_mean).collect(),
        success_curve: history.iter().map(|it| it.metrics.success_rate).collect(),
    })
}
