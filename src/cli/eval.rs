//! `sandgym eval`: a policy's success rate and mean reward next to the scripted baseline's on
//! the same tasks and seeds.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use burn::tensor::backend::Backend as BurnBackend;
use sandgym::env_api::Split;
use sandgym::policy::{DeviceKind, pretrained};
use sandgym::trainer::{
    Algo, EvalReport, RolloutEngine, RolloutSettings, eval_plan, evaluate, policy_dir,
    read_run_config, rollout_settings,
};
use sandgym::training::{baseline_episodes, baseline_report, env_batch, preset};
use sandgym::{Backend, EnvTarget};
use serde::Serialize;

/// Options of `sandgym eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run directory (its last checkpoint) or a policy checkpoint directory.
    #[arg(long, required_unless_present = "model", conflicts_with = "model")]
    checkpoint: Option<PathBuf>,
    /// A pretrained model, zero-shot: a known name (`sandgym model list`; fetched on first
    /// use), a `.gguf` file or a Hugging Face directory.
    #[arg(long)]
    model: Option<String>,
    /// The env to evaluate on: a registered id (`sql-agent-v0`) or the path of a guest
    /// component (`.wasm`). Default: the env (and its configuration) a run directory was
    /// trained on.
    #[arg(long, required_unless_present = "checkpoint")]
    env: Option<String>,
    /// The env's configuration: a JSON object, inline or in a file; `"@PATH"` strings in it
    /// are replaced by that file's contents (e.g. `{"tasks_jsonl": "@tasks.jsonl"}`).
    #[arg(long)]
    env_config: Option<String>,
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
}

/// The policy's and the baseline's figures on the same seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The trained policy (greedy decoding).
    pub policy: EvalReport,
    /// The scripted baseline (`None` for an env without one).
    pub baseline: Option<EvalReport>,
    /// The policy's episodes.
    #[serde(skip)]
    pub episodes: Vec<sandgym::env_api::Trajectory>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let split = args.split;
    // The rollout shape the policy was trained with, when the checkpoint is a run directory.
    let run = args.checkpoint.as_deref().map(read_run_config);
    let target = match (&args.env, &run) {
        (Some(env), _) => EnvTarget::parse(env, args.env_config.as_deref())?,
        (None, Some(Ok(run))) => run_target(&run.run)?,
        (None, Some(Err(e))) => anyhow::bail!("give --env: the checkpoint is not a run ({e})"),
        (None, None) => anyhow::bail!("give --env"),
    };
    let settings = match run {
        Some(Ok(run)) => rollout_settings(&run.train),
        _ => rollout_settings(&preset(&target.id()?, Algo::Grpo)),
    };
    let spec = match (&args.checkpoint, &args.model) {
        (Some(dir), _) => policy_dir(dir).display().to_string(),
        (None, Some(model)) => model.clone(),
        (None, None) => anyhow::bail!("give --checkpoint DIR or --model NAME|PATH"),
    };
    let dir = Path::new(&spec);
    let report = match args.device.check()? {
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => compare::<sandgym::policy::Gpu>(
            dir,
            &target,
            split,
            args.episodes,
            &settings,
            !args.native,
            &Default::default(),
        )?,
        _ => compare::<sandgym::policy::Cpu>(
            dir,
            &target,
            split,
            args.episodes,
            &settings,
            !args.native,
            &Default::default(),
        )?,
    };
    if let Some(path) = &args.trajectories {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        for t in &report.episodes {
            t.write_jsonl(&mut f)?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report, &target.label(), split);
    }
    Ok(ExitCode::SUCCESS)
}

/// Evaluates the policy in `dir` (a checkpoint, or a pretrained model's name or path; greedy)
/// and the scripted baseline on the same episodes ([`eval_plan`]: every task of the split
/// once by default, for an env with a fixed task list). A pretrained model's context length
/// replaces the rollout's context budget.
pub fn compare<B: BurnBackend>(
    dir: &Path,
    env: &EnvTarget,
    split: Split,
    episodes: Option<usize>,
    settings: &RolloutSettings,
    wasm: bool,
    device: &B::Device,
) -> anyhow::Result<Comparison> {
    let loaded = pretrained::load::<B>(&dir.display().to_string(), device)?;
    let (model, tokenizer) = (loaded.model, loaded.tokenizer);
    let mut settings = *settings;
    if loaded.info.format != "checkpoint" {
        settings.max_context = loaded.config.context_length;
    }
    let settings = &settings;
    let backend = if wasm { Backend::Wasm } else { Backend::Native };
    let (seeds, options) = eval_plan(env.spec()?.tasks, split, episodes, DEFAULT_EPISODES);
    let envs = env_batch(env, backend, seeds.len().clamp(1, 64))?;
    let mut engine = RolloutEngine::new(envs, 2, tokenizer, *settings)?;
    let (policy, played) = evaluate(&mut engine, &model, device, &seeds, &options, 0.0)?;
    let baseline = match sandgym::agents::baseline(&env.id()?) {
        Some(_) => Some(baseline_report(&baseline_episodes(env, seeds, &options)?)),
        None => None,
    };
    Ok(Comparison {
        policy,
        baseline,
        episodes: played.into_iter().map(|e| e.trajectory).collect(),
    })
}

/// Episodes of an evaluation of an env without a fixed task list, unless asked otherwise.
pub const DEFAULT_EPISODES: usize = 200;

/// Prints a comparison as a small table.
pub fn print(c: &Comparison, env: &str, split: Split) {
    println!(
        "{env}, {split:?} split, {} episodes (the same for both)",
        c.policy.episodes
    );
    println!("            success  95% interval   mean reward  turns  env errors  out of context");
    let rows = [
        ("policy", Some(&c.policy)),
        ("baseline", c.baseline.as_ref()),
    ];
    for (name, r) in rows.into_iter().filter_map(|(n, r)| Some((n, r?))) {
        let (lo, hi) = r.success_ci95;
        println!(
            "{name:<10}  {:>7.3}  [{lo:.3}, {hi:.3}]  {:>11.3}  {:>5.2}  {:>10}  {:>14}",
            r.success_rate, r.mean_reward, r.mean_turns, r.env_errors, r.out_of_context
        );
    }
    if c.policy.prompt_too_long > 0 {
        println!(
            "{} episodes played no turn: their first prompt does not fit the model's context",
            c.policy.prompt_too_long
        );
    }
}

/// The env a run was trained on, with its configuration (`env` and `env_config` in the run's
/// `config.json`).
pub fn run_target(run: &serde_json::Value) -> anyhow::Result<EnvTarget> {
    let env = run["env"].as_str().context("config.json names no env")?;
    let config = match run.get("env_config") {
        Some(serde_json::Value::Object(map)) => map.clone(),
        None | Some(serde_json::Value::Null) => Default::default(),
        Some(other) => anyhow::bail!("config.json: env_config is not an object: {other}"),
    };
    Ok(EnvTarget::with_config(env, config))
}
