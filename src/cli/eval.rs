//! `sandgym eval`: a policy's success rate and mean reward next to the scripted baseline's on
//! the same tasks and seeds.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use sandgym::EnvTarget;
use sandgym::approach::ProxySettings;
use sandgym::env_api::Split;
use sandgym::evaluation::{compare, print};
use sandgym::harness_eval::harness_eval;
use sandgym::policy::Cpu;
use sandgym::policy::{DeviceKind, OnDevice, checkpoint};
use sandgym::trainer::{Algo, RunDir, rollout_settings};
use sandgym::training::preset;

/// Options of `sandgym eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run directory (its last checkpoint) or a policy checkpoint directory.
    #[arg(long, required_unless_present_any = ["model", "compare"], conflicts_with = "model")]
    checkpoint: Option<PathBuf>,
    /// Two checkpoints (run or policy directories), A then B, played on the same episodes:
    /// both rows, the baseline's, and B's gain over A episode by episode with McNemar's exact
    /// test (e.g. `--compare RUN/sft RUN` for what RL added to its SFT start). The env and
    /// the rollout shape are those of the first of the two that is a run directory, unless
    /// `--env` is given.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with_all = ["checkpoint", "model", "trajectories"])]
    compare: Option<Vec<PathBuf>>,
    /// A pretrained model, zero-shot: a known name (`sandgym model list`; fetched on first
    /// use), a `.gguf` file or a Hugging Face directory.
    #[arg(long)]
    model: Option<sandgym::ModelSource>,
    /// The env to evaluate on: a registered id (`sql-agent-v0`) or the path of a guest
    /// component (`.wasm`). Default: the env (and its configuration) a run directory was
    /// trained on.
    #[arg(long, required_unless_present_any = ["checkpoint", "compare"])]
    env: Option<String>,
    /// The env's configuration: a JSON object, inline or in a file; `"@PATH"` strings in it
    /// are replaced by that file's contents (e.g. `{"tasks_jsonl": "@tasks.jsonl"}`).
    #[arg(long)]
    env_config: Option<String>,
    /// A reward composed around the env's own: terms, or a plugin (`--help` for more).
    /// A run directory's `--checkpoint` brings the run's own.
    #[arg(long, long_help = crate::cli::env_args::REWARD_HELP)]
    reward: Option<String>,
    /// The task split.
    #[arg(long, default_value = "test")]
    split: Split,
    /// Episodes. Default: every task of the split exactly once, for an env with a fixed task
    /// list (a smaller N plays N different tasks, a fixed sample); 200 seeds otherwise.
    #[arg(long)]
    episodes: Option<usize>,
    /// Print one JSON object `{"policy": {…}, "baseline": {…}}`.
    #[arg(long)]
    json: bool,
    /// Run the envs natively instead of in the WebAssembly sandbox.
    #[arg(long)]
    native: bool,
    /// cpu, or cuda (a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: DeviceKind,
    /// Write the policy's episodes here as Agent Template JSONL.
    #[arg(long)]
    trajectories: Option<PathBuf>,
    /// Evaluate inside the env's unmodified harness instead (sql-agent-v0,
    /// customer-service-v0), where agents run: the policy served as `serve-policy` serves it,
    /// behind the recording proxy, greedy; the harness's own prompts, sub-agent and history
    /// compression are what it meets.
    #[arg(long, requires = "checkpoint", conflicts_with_all = ["trajectories", "native", "device"])]
    harness: bool,
    /// `--harness`: harness runs at a time.
    #[arg(long, requires = "harness", default_value_t = 16)]
    concurrency: usize,
    /// `--harness`: the harness's history budget in characters, beyond which it elides its
    /// oldest tool outputs (default: twice the model's context in tokens).
    #[arg(long, requires = "harness")]
    history_chars: Option<usize>,
    /// `--harness`: MiB of finished generations' keys and values the policy server keeps, so
    /// that each call encodes only what its conversation added (0: none).
    #[arg(long, requires = "harness", default_value_t = 1024)]
    prefix_cache_mib: usize,
    /// `--harness`: the recording proxy's trace database (default: a temporary file, removed
    /// afterwards).
    #[arg(long, requires = "harness")]
    traces: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let split = args.split;
    // With `--compare`, the first of the two that is a run directory (e.g. `RUN/sft RUN`).
    let checkpoint = match &args.compare {
        Some(pair) => pair
            .iter()
            .find(|dir| sandgym::RunMeta::read(dir).is_ok())
            .or(pair.first()),
        None => args.checkpoint.as_ref(),
    };
    // The rollout shape the policy was trained with, when the checkpoint is a run directory.
    let run = checkpoint.map(|dir| sandgym::RunMeta::read(dir));
    let target = match (&args.env, &run) {
        (Some(env), _) => EnvTarget::parse(env, args.env_config.as_deref())?
            .with_reward(sandgym::target::parse_reward(args.reward.as_deref())?)?,
        (None, Some(Ok(run))) => run.run.target(),
        (None, Some(Err(e))) => anyhow::bail!("give --env: the checkpoint is not a run ({e})"),
        (None, None) => anyhow::bail!("give --env"),
    };
    // Otherwise the env's preset for the kind of model: pretrained when `--model` names one or
    // the checkpoint records the base model it was tuned from.
    let pretrained = match (checkpoint, &args.model) {
        (_, Some(model)) => model.is_pretrained(),
        (Some(dir), None) => checkpoint::read_config(&RunDir::new(dir).policy())
            .map(|c| c.base.is_some())
            .unwrap_or(false),
        (None, None) => false,
    };
    let train = match run {
        Some(Ok(run)) => run.train,
        _ => preset(&target.id()?, Algo::Grpo, pretrained),
    };
    if args.harness {
        let dir = args
            .checkpoint
            .as_deref()
            .context("--harness needs --checkpoint")?;
        return in_harness(args, dir, &target, &train);
    }
    let settings = rollout_settings(&train);
    if let Some(pair) = &args.compare {
        return compare_two(args, pair, &target, &settings);
    }
    let spec = match (&args.checkpoint, &args.model) {
        (Some(dir), _) => RunDir::new(dir).policy().display().to_string(),
        (None, Some(model)) => model.to_string(),
        (None, None) => anyhow::bail!("give --checkpoint DIR or --model NAME|PATH"),
    };
    /// The evaluation, on whichever backend `--device` selects.
    struct Eval<'a> {
        dir: &'a Path,
        target: &'a EnvTarget,
        split: Split,
        episodes: Option<usize>,
        settings: &'a sandgym::trainer::RolloutSettings,
        wasm: bool,
    }
    impl OnDevice for Eval<'_> {
        type Output = anyhow::Result<sandgym::evaluation::Comparison>;
        fn run<B: burn::tensor::backend::AutodiffBackend>(self, device: B::Device) -> Self::Output {
            compare::<B::InnerBackend>(
                self.dir,
                self.target,
                self.split,
                self.episodes,
                self.settings,
                self.wasm,
                &device,
            )
        }
    }
    let report = args.device.dispatch(Eval {
        dir: Path::new(&spec),
        target: &target,
        split,
        episodes: args.episodes,
        settings: &settings,
        wasm: !args.native,
    })??;
    if let Some(path) = &args.trajectories {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        for e in &report.played {
            e.trajectory.write_jsonl(&mut f)?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report, &target.label(), split);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--harness`: the checkpoint inside its env's harness.
fn in_harness(
    args: &Args,
    dir: &Path,
    target: &EnvTarget,
    train: &sandgym::trainer::TrainConfig,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.concurrency >= 1,
        "--concurrency must be at least 1 (harness runs at a time)"
    );
    anyhow::ensure!(
        args.history_chars != Some(0),
        "--history-chars must be at least 1 (the harness's history budget in characters)"
    );
    let mut settings = ProxySettings::for_config(train, args.concurrency);
    if let Some(chars) = args.history_chars {
        settings.harness.history_chars = chars;
    }
    settings.prefix_cache_bytes = crate::cli::prefix_cache_bytes(args.prefix_cache_mib)?;
    let (_, model, tokenizer) =
        sandgym::policy::load::checkpoint::<Cpu>(&RunDir::new(dir).policy(), &Default::default())?;
    let temp = std::env::temp_dir().join(format!("sandgym-harness-eval-{}", std::process::id()));
    let db = match &args.traces {
        Some(path) => path.clone(),
        None => {
            std::fs::create_dir_all(&temp)
                .with_context(|| format!("creating {}", temp.display()))?;
            temp.join("traces.db")
        }
    };
    let eval = harness_eval(
        target,
        model.for_inference(),
        &tokenizer,
        &settings,
        args.split,
        args.episodes,
        &db,
    );
    if args.traces.is_none() {
        let _ = std::fs::remove_dir_all(&temp);
    }
    let eval = eval?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&eval)?);
    } else {
        let r = &eval.report;
        println!(
            "{} in its harness, {:?} split: success {:.3} [{:.3}, {:.3}] over {} runs ({} failed), \
             mean reward {:.3}",
            target.label(),
            args.split,
            r.success_rate,
            r.success_ci95.0,
            r.success_ci95.1,
            r.episodes,
            eval.runs.failed,
            r.mean_reward
        );
        println!(
            "{} model calls ({} by the sub-agent), {} compressions, {} prompt and {} completion \
             tokens; {:.0} s",
            eval.runs.model_calls,
            eval.runs.sub_agent_calls,
            eval.runs.compressions,
            eval.runs.prompt_tokens,
            eval.runs.completion_tokens,
            eval.wall_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--compare A B`: both checkpoints on the same episodes, and the paired test.
fn compare_two(
    args: &Args,
    pair: &[PathBuf],
    target: &EnvTarget,
    settings: &sandgym::trainer::RolloutSettings,
) -> anyhow::Result<ExitCode> {
    let [a, b] = pair else {
        anyhow::bail!("--compare takes two checkpoints");
    };
    /// Both evaluations, on whichever backend `--device` selects.
    struct Pair<'a> {
        dirs: [PathBuf; 2],
        target: &'a EnvTarget,
        split: Split,
        episodes: Option<usize>,
        settings: &'a sandgym::trainer::RolloutSettings,
        wasm: bool,
    }
    impl OnDevice for Pair<'_> {
        type Output = anyhow::Result<sandgym::evaluation::PairedComparison>;
        fn run<B: burn::tensor::backend::AutodiffBackend>(self, device: B::Device) -> Self::Output {
            sandgym::evaluation::compare_pair::<B::InnerBackend>(
                [&self.dirs[0], &self.dirs[1]],
                self.target,
                self.split,
                self.episodes,
                self.settings,
                self.wasm,
                &device,
            )
        }
    }
    let report = args.device.dispatch(Pair {
        dirs: [RunDir::new(a).policy(), RunDir::new(b).policy()],
        target,
        split: args.split,
        episodes: args.episodes,
        settings,
        wasm: !args.native,
    })??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        sandgym::evaluation::print_pair(&report, &target.label(), args.split);
    }
    Ok(ExitCode::SUCCESS)
}
