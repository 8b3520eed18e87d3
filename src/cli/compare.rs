//! `sandgym compare`: the env approach and the proxy approach on the same agent, side by side
//! (the pipeline is [`sandgym::comparison::compare`]).

use std::path::PathBuf;
use std::process::ExitCode;

use sandgym::comparison::{CompareOptions, Report, compare};

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

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let options = CompareOptions {
        env: args.env.clone(),
        algo: args.algo.parse()?,
        iters: args.iters,
        out: args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("runs/compare-{}", args.env))),
        init: args.init.clone(),
        config: args.config.clone(),
        seed: args.seed,
        concurrency: args.concurrency,
    };
    let report = compare(&options, &mut |approach, m, traces| {
        let traces = traces.map_or(String::new(), |t| {
            format!(" ({} calls, {} drift)", t.calls, t.drift.total())
        });
        eprintln!(
            "{approach:<5} iter {:>3}: reward {:.3} success {:.2}{traces}",
            m.iter, m.reward_mean, m.success_rate
        );
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
        eprintln!(
            "curves in {}",
            options.out.join("compare-reward.png").display()
        );
    }
    Ok(ExitCode::SUCCESS)
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
    let mut table = sandgym::table::new(&["", "env approach", "proxy approach"]);
    for (k, a, b) in rows {
        table.add_row(vec![k.to_owned(), a, b]);
    }
    println!("{table}");
}
