//! `sandgym compare`: the env approach and the proxy approach on the same agent, from the same
//! initial policy, on the same tasks and seeds with the same budget, side by side.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use sandgym::Backend;
use sandgym::approach::{HarnessTotals, ProxyApproach, ProxyIteration, ProxySettings};
use sandgym::env_api::{ResetOptions, Split};
use sandgym::policy::{CpuTrain, checkpoint};
use sandgym::proxy::{TraceStats, TraceStore};
use sandgym::trainer::plot::{Series, line_chart};
use sandgym::trainer::{Algo, IterMetrics, Trainer, policy_dir};
use sandgym::training::env_batch;
use serde::Serialize;
use serde_json::json;

use sandgym::approach::percentile;
use sandgym::training::{fresh_policy, settings};

/// Options of `sandgym compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The env (sql-agent-v0 or customer-service-v0: the envs that have a harness).
    #[arg(long)]
    env: String,
    /// The algorithm both approaches train with.
    #[arg(long, default_value = "grpo")]
    algo: String,
    /// Training iterations of each approach.
    #[arg(long, default_value_t = 5)]
    iters: u32,
    /// Output directory (default `runs/compare-<env>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The initial policy (a run or policy directory); without it, the preset's SFT
    /// warm-start is run once and both approaches start from its result.
    #[arg(long)]
    init: Option<PathBuf>,
    /// A JSON file of settings overriding the env's preset.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed of tasks, sampling and initial weights.
    #[arg(long)]
    seed: Option<u64>,
    /// Harness runs at a time in the proxy approach.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
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
    /// Model calls whose tokens reached training exactly as sampled.
    pub calls_captured_exactly: usize,
    /// Tokens the policy generated.
    pub generated_tokens: u64,
    /// Generated tokens that reached training exactly as sampled.
    pub tokens_captured_exactly: u64,
    /// Breaks between a call and the context the next call was given (sub-agent switches,
    /// compression, re-tokenisation).
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

/// Lines of Rust code (not blank, not comments) of the env an agent was refactored into.
/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let algo: Algo = args.algo.parse()?;
    let target = sandgym::EnvTarget::new(args.env.clone());
    let config = settings(
        &args.env,
        algo,
        &sandgym::training::ModelChoice::tiny(),
        args.config.as_deref(),
        Some(args.iters),
        args.seed,
    )?;
    sandgym::approach::HarnessKind::for_env(&args.env)
        .with_context(|| format!("{} has no harness to compare with", args.env))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("runs/compare-{}", args.env)));
    let device = Default::default();
    let (policy_config, model, tokenizer) = match &args.init {
        Some(dir) => checkpoint::load::<CpuTrain>(&policy_dir(dir), &device)?,
        None => fresh_policy::<CpuTrain>(
            &target,
            &config,
            &device,
            Some(&out.join("init")),
            &Default::default(),
        )?,
    };
    let n = config.episodes_per_iter();
    let run_info = |source: &str| json!({"env": args.env, "backend": "wasm", "source": source});

    // The env approach: the env's rollout engine, envs in the WASM sandbox.
    let clock = Instant::now();
    let mut trainer = Trainer::<CpuTrain>::new(
        &out.join("env"),
        run_info("env"),
        config.clone(),
        policy_config.clone(),
        model.clone(),
        tokenizer.clone(),
        env_batch(&target, Backend::Wasm, n)?,
        ResetOptions::split(Split::Train),
        device,
    )?;
    let mut env_history: Vec<IterMetrics> = Vec::new();
    trainer.run(|m| {
        eprintln!(
            "env   iter {:>3}: reward {:.3} success {:.2}",
            m.iter, m.reward_mean, m.success_rate
        );
        env_history.push(m.clone());
    })?;
    let env_wall = clock.elapsed().as_secs_f64();
    // Its envs (sandbox instances, which the pool caps) are not needed any more.
    drop(trainer);

    // The proxy approach: the harness, the policy server, the recording proxy.
    let clock = Instant::now();
    let mut trainer = Trainer::<CpuTrain>::new(
        &out.join("proxy"),
        run_info("proxy"),
        config.clone(),
        policy_config,
        model,
        tokenizer.clone(),
        env_batch(&target, Backend::Native, n)?,
        ResetOptions::split(Split::Train),
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
        eprintln!(
            "proxy iter {:>3}: reward {:.3} success {:.2} ({} calls, {} drift)",
            it.metrics.iter,
            it.metrics.reward_mean,
            it.metrics.success_rate,
            it.traces.calls,
            it.traces.drift.total()
        );
        proxy_history.push(it);
    }
    sandgym::trainer::write_plots(trainer.out())?;
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
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
        eprintln!("curves in {}", out.join("compare-reward.png").display());
    }
    Ok(ExitCode::SUCCESS)
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
        integration_lines: sandgym::approach::integration_lines(env).unwrap_or(0),
        integration: "the harness rewritten as an Env (its env.rs)".into(),
        model_calls: calls,
        calls_captured_exactly: calls,
        generated_tokens: tokens.round() as u64,
        tokens_captured_exactly: tokens.round() as u64,
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
    let mut added: Vec<u64> = store
        .added_latencies_us()?
        .into_iter()
        .map(|v| v.max(0) as u64)
        .collect();
    added.sort_unstable();
    let ms = |us: u64| us as f64 / 1000.0;
    let rollout_s: f64 = history.iter().map(|it| it.rollout_s).sum();
    Ok(Side {
        integration_lines: 0,
        integration: "none in the harness: its base URL (configuration) points at the proxy".into(),
        model_calls: harness.model_calls,
        calls_captured_exactly: traces.calls_exact,
        generated_tokens: harness.completion_tokens,
        tokens_captured_exactly: traces.completion_tokens as u64,
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

fn print(r: &Report) {
    let (e, p) = (&r.env_approach, &r.proxy_approach);
    let opt = |v: Option<f64>| v.map_or("in-process".to_owned(), |v| format!("{v:.3}"));
    let last = |v: &[f64]| v.last().map_or("-".to_owned(), |x| format!("{x:.3}"));
    let first = |v: &[f64]| v.first().map_or("-".to_owned(), |x| format!("{x:.3}"));
    println!(
        "{} — {} iterations × {} episodes",
        r.env, r.iters, r.episodes_per_iter
    );
    println!("{:<40} {:>16} {:>16}", "", "env approach", "proxy approach");
    let rows: Vec<(&str, String, String)> = vec![
        (
            "integration lines",
            e.integration_lines.to_string(),
            p.integration_lines.to_string(),
        ),
        (
            "model calls",
            e.model_calls.to_string(),
            p.model_calls.to_string(),
        ),
        (
            "calls captured exactly",
            e.calls_captured_exactly.to_string(),
            p.calls_captured_exactly.to_string(),
        ),
        (
            "generated tokens",
            e.generated_tokens.to_string(),
            p.generated_tokens.to_string(),
        ),
        (
            "tokens captured exactly",
            e.tokens_captured_exactly.to_string(),
            p.tokens_captured_exactly.to_string(),
        ),
        (
            "drift (context breaks)",
            e.drift.to_string(),
            p.drift.to_string(),
        ),
        (
            "  of which compression",
            e.drift_compressed.to_string(),
            p.drift_compressed.to_string(),
        ),
        (
            "  of which re-tokenisation",
            e.drift_retokenised.to_string(),
            p.drift_retokenised.to_string(),
        ),
        (
            "sub-agent calls kept",
            e.sub_agent_calls.to_string(),
            p.sub_agent_calls.to_string(),
        ),
        (
            "history compressions kept",
            e.compressions.to_string(),
            p.compressions.to_string(),
        ),
        (
            "added latency p50 (ms)",
            opt(e.added_latency_p50_ms),
            opt(p.added_latency_p50_ms),
        ),
        (
            "added latency p99 (ms)",
            opt(e.added_latency_p99_ms),
            opt(p.added_latency_p99_ms),
        ),
        (
            "episodes/s while playing",
            format!("{:.2}", e.episodes_per_s),
            format!("{:.2}", p.episodes_per_s),
        ),
        (
            "env steps/s inside the env",
            e.env_steps_per_s.map_or("-".into(), |v| format!("{v:.0}")),
            p.env_steps_per_s
                .map_or("in the harness".into(), |v| format!("{v:.0}")),
        ),
        (
            "model calls/s",
            format!("{:.1}", e.calls_per_s),
            format!("{:.1}", p.calls_per_s),
        ),
        (
            "wall time (s)",
            format!("{:.0}", e.wall_s),
            format!("{:.0}", p.wall_s),
        ),
        (
            "reward, first iteration",
            first(&e.reward_curve),
            first(&p.reward_curve),
        ),
        (
            "reward, last iteration",
            last(&e.reward_curve),
            last(&p.reward_curve),
        ),
        (
            "success, first iteration",
            first(&e.success_curve),
            first(&p.success_curve),
        ),
        (
            "success, last iteration",
            last(&e.success_curve),
            last(&p.success_curve),
        ),
    ];
    for (k, a, b) in rows {
        println!("{k:<40} {a:>16} {b:>16}");
    }
}
