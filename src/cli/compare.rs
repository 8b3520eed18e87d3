//! `sandgym compare`: the env approach and the proxy approach on the same agent, side by side
//! (the pipeline is [`sandgym::comparison::compare`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use sandgym::comparison::{CompareOptions, Report, compare, markdown};
use sandgym::training::ModelChoice;

/// Options of `sandgym compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The env (sql-agent-v0 or customer-service-v0: the envs that have a harness).
    #[arg(long, required_unless_present = "report")]
    env: Option<String>,
    /// Print the tables of a kept report (a run's `compare.json`) instead of running one.
    #[arg(long, conflicts_with_all = ["env", "init", "config", "json"])]
    report: Option<PathBuf>,
    /// The model both approaches start from: a known pretrained model (`sandgym model
    /// list`), `tiny`, a `.gguf` file or a Hugging Face directory.
    #[arg(long, default_value = "smollm2-135m-instruct", conflicts_with = "init")]
    model: sandgym::ModelSource,
    /// LoRA rank over a pretrained `--model` (0 trains every weight).
    #[arg(long, default_value_t = 16)]
    lora_rank: usize,
    /// The algorithm both approaches train with.
    #[arg(long, default_value = "grpo")]
    algo: String,
    /// Training iterations of each approach (default: the env's preset).
    #[arg(long)]
    iters: Option<u32>,
    /// Output directory (default `runs/compare-<env>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Start both approaches from this policy (a run or policy directory) instead of
    /// preparing each with its own SFT (the env's demonstrations for the env approach, the
    /// harness's traces with the demonstrator as teacher for the proxy approach).
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
    /// Test episodes each final policy plays in the env and in the harness (default: every
    /// test task once; 0 skips the evaluation).
    #[arg(long)]
    eval_episodes: Option<usize>,
    /// How the proxy approach trains a run whose context broke (a sub-agent, a compressed
    /// history): `segments` (each its own sample, in the context it was sampled in) or
    /// `stitched` (one sample per run, later segments behind the earlier ones); both,
    /// comma-separated (`segments,stitched`), train the proxy approach once per kind from the
    /// same warm start and report each.
    #[arg(long, default_value = "segments", value_delimiter = ',')]
    proxy_samples: Vec<sandgym::proxy::Samples>,
    /// The harness's history budget in characters, beyond which it elides its oldest tool
    /// outputs (default: twice the model's context in tokens, which the bundled envs'
    /// conversations stay under). A smaller budget makes the harness compress, the case where
    /// its context handling matters; it applies to the teacher's traces, RL and the
    /// evaluations in the harness.
    #[arg(long)]
    history_chars: Option<usize>,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Resume the comparison in `--out` where it stopped (give the options it was started
    /// with): each finished warm start, RL run and evaluation is taken from what it left, an
    /// interrupted one is done again.
    #[arg(long, conflicts_with = "report")]
    resume: bool,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.report {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report: Report = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a compare report", path.display()))?;
        print!("{}", markdown(&report));
        return Ok(ExitCode::SUCCESS);
    }
    let env = args.env.clone().context("--env is required")?;
    let options = CompareOptions {
        env: env.clone(),
        model: ModelChoice {
            model: args.model.clone(),
            lora_rank: args.lora_rank,
        },
        algo: args.algo.parse()?,
        iters: args.iters,
        out: args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("runs/compare-{env}"))),
        init: args.init.clone(),
        config: args.config.clone(),
        seed: args.seed,
        concurrency: args.concurrency,
        eval_episodes: args.eval_episodes,
        proxy_samples: args.proxy_samples.clone(),
        history_chars: args.history_chars,
        resume: args.resume,
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
        print!("{}", markdown(&report));
        eprintln!(
            "report in {}, curves in {}",
            options.out.join("compare.json").display(),
            options.out.join("compare-reward.png").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
