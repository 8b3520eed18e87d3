//! `sandgym sft`: supervised warm-start of a policy on recorded episodes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use sandgym::env_api::Trajectory;
use sandgym::policy::{DeviceKind, OnDevice, checkpoint, load};
use sandgym::trainer::sft::SftExample;
use sandgym::trainer::{Algo, RunDir};

/// Options of `sandgym sft`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    env: crate::cli::env_args::EnvArgs,
    /// Where to write the policy checkpoint.
    #[arg(long)]
    out: PathBuf,
    /// Agent Template JSONL to learn from, or a dashboard's `labels.jsonl` (its good episodes
    /// and the corrected steps of its bad ones). Default: the scripted baseline's train-split
    /// episodes.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Baseline episodes to record when no `--data` is given (default: the env's preset).
    #[arg(long)]
    episodes: Option<usize>,
    /// Passes over the data (default: the env's preset).
    #[arg(long)]
    epochs: Option<u32>,
    /// Continue from this policy instead of a fresh one (the settings follow it: a pretrained
    /// base's demonstrations, epochs and learning rate when it records one).
    #[arg(long)]
    init: Option<PathBuf>,
    /// Seed of the initial weights and the data order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// cpu, or cuda (a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: DeviceKind,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    struct Sft<'a>(&'a Args);
    impl OnDevice for Sft<'_> {
        type Output = anyhow::Result<ExitCode>;
        fn run<B: AutodiffBackend>(self, device: B::Device) -> Self::Output {
            sft_on::<B>(self.0, device)
        }
    }
    args.device.dispatch(Sft(args))?
}

fn sft_on<B: AutodiffBackend>(args: &Args, device: B::Device) -> anyhow::Result<ExitCode> {
    let target = args.env.target()?;
    // The preset follows the checkpoint continued from, as in `train --init`: a pretrained
    // model's (its demonstrations, epochs and LoRA-sized rate) when it records a base.
    let base = match &args.init {
        Some(dir) => checkpoint::read_config(&RunDir::new(dir).policy())?.base,
        None => None,
    };
    let preset_model = match base {
        Some(base) => sandgym::training::ModelChoice {
            model: base.source.parse().map_err(anyhow::Error::msg)?,
            lora_rank: 0,
        },
        None => sandgym::training::ModelChoice::tiny(),
    };
    let mut config = sandgym::training::settings(
        &target.id()?,
        Algo::Grpo,
        &preset_model,
        None,
        None,
        Some(args.seed),
    )?;
    if let Some(n) = args.episodes {
        config.sft.episodes = n;
    }
    if let Some(e) = args.epochs {
        config.sft.epochs = e;
    }
    if args.data.is_none() && args.init.is_none() {
        // A fresh policy warm-started on the baseline: the same path `train` takes.
        sandgym::training::fresh_policy::<B>(
            &target,
            &config,
            &device,
            Some(&args.out),
            &Default::default(),
        )?;
        eprintln!("policy written to {}", args.out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let (policy_config, model, tokenizer) = match &args.init {
        Some(dir) => load::checkpoint::<B>(&RunDir::new(dir).policy(), &device)?,
        None => {
            let tok = sandgym::training::default_tokenizer()?;
            let pc = sandgym::policy::PolicyConfig::new(tok.vocab_size());
            B::seed(&device, args.seed);
            let m = pc.init::<B>(&device);
            (pc, m, tok)
        }
    };
    let examples: Vec<SftExample> = match &args.data {
        Some(path) if sandgym::labels::is_labels_file(path) => {
            let (trajectories, skipped) = sandgym::labels::training_data(path)?;
            eprintln!(
                "{}: labelled episodes to learn from: {} ({skipped} bad ones without a correction skipped)",
                path.display(),
                trajectories.len()
            );
            trajectories.into_iter().map(SftExample::from).collect()
        }
        Some(path) => {
            let f =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            Trajectory::read_jsonl(std::io::BufReader::new(f))?
                .into_iter()
                .map(SftExample::from)
                .collect()
        }
        None => sandgym::training::baseline_sft_data(&target, &config.sft)?,
    };
    let (model, report) = sandgym::training::sft_policy::<B>(
        &target,
        (&policy_config, model, &tokenizer),
        &examples,
        &config,
        &device,
    )?;
    anyhow::ensure!(report.episodes > 0, "no episodes to learn from");
    checkpoint::save(&args.out, &policy_config, &model, &tokenizer)?;
    eprintln!("policy written to {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
