//! `sandgym run`: run episodes of an env with an agent and report how it did.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use sandgym::chat_agent::ChatAgent;
use sandgym::env_api::{BoxEnv, Env, RandomAgent, ResetOptions, Split, TimeLimit};
use sandgym::harnesses::HarnessConfig;
use sandgym::play::{PlayReport, play_env};
use sandgym::sandbox::{FaultConfig, FaultInjection};
use sandgym::{Backend, registry};

/// Which agent acts.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum AgentKind {
    /// The env's scripted baseline (the hand-written harness logic).
    Baseline,
    /// Random valid actions drawn from the env's tool schemas (works for any env).
    Random,
    /// A model behind an OpenAI-compatible chat-completions API (`--base-url`, `--model`).
    Openai,
    /// A policy checkpoint (`--checkpoint`), served in this process and asked like `openai`.
    Policy,
    /// The episodes of an Agent Template JSONL (`--data`, e.g. written by `--out`) played
    /// again from their seeds, each step compared with its record; exits with failure when
    /// one diverges.
    Replay,
}

/// Options of `sandgym run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    env: crate::cli::env_args::EnvArgs,
    /// A reward composed around the env's own: terms, or a plugin (`--help` for more).
    #[arg(long, long_help = crate::cli::env_args::REWARD_HELP)]
    reward: Option<String>,
    /// The agent.
    #[arg(long, value_enum, default_value_t = AgentKind::Baseline)]
    agent: AgentKind,
    /// Run the env natively.
    #[arg(long, conflicts_with = "wasm")]
    native: bool,
    /// Run the env in the WASM sandbox (the default).
    #[arg(long)]
    wasm: bool,
    /// Number of episodes.
    #[arg(long, default_value_t = 10)]
    episodes: u64,
    /// Play every task of the split exactly once (an env with a fixed task list), instead of
    /// `--episodes` tasks drawn by seed.
    #[arg(long, conflicts_with = "episodes")]
    every_task: bool,
    /// Seed of the first episode; episode i uses seed + i.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Task split.
    #[arg(long, default_value = "test")]
    split: Split,
    /// Write the episodes as Agent Template JSONL.
    #[arg(long)]
    out: Option<PathBuf>,
    /// A fault-injection config (JSON) applied at the tool boundary.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// `--agent openai`: the API's base URL (e.g. `http://127.0.0.1:8000/v1`).
    #[arg(long, required_if_eq("agent", "openai"))]
    base_url: Option<String>,
    /// `--agent openai`: the model name sent with each request.
    #[arg(long, default_value = "sandgym-policy")]
    model: String,
    /// `--agent openai`: the API key, if the server wants one (default: `$OPENAI_API_KEY`).
    #[arg(long)]
    api_key: Option<String>,
    /// `--agent replay`: the Agent Template JSONL to replay.
    #[arg(long, required_if_eq("agent", "replay"))]
    data: Option<PathBuf>,
    /// `--agent policy`: a run directory or policy checkpoint.
    #[arg(long, required_if_eq("agent", "policy"))]
    checkpoint: Option<PathBuf>,
    /// `--agent openai|policy`: sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// `--agent openai|policy`: most tokens per model call.
    #[arg(long, default_value_t = 256)]
    max_tokens: u32,
}

/// Where `--agent openai|policy` sends its requests: the given server, or a policy server
/// started here for the checkpoint (kept alive while it is held).
fn chat_server(
    args: &Args,
) -> anyhow::Result<Option<(HarnessConfig, Option<sandgym::proxy::PolicyServer>)>> {
    let (base_url, server) = match args.agent {
        AgentKind::Openai => (args.base_url.clone().context("give --base-url")?, None),
        AgentKind::Policy => {
            let dir = args.checkpoint.as_deref().context("give --checkpoint")?;
            let (_, model, tokenizer) = sandgym::policy::load::checkpoint::<sandgym::policy::Cpu>(
                &sandgym::trainer::RunDir::new(dir).policy(),
                &Default::default(),
            )?;
            let server = sandgym::proxy::PolicyServer::start(
                model.for_inference(),
                tokenizer,
                sandgym::proxy::ServerConfig {
                    listen: "127.0.0.1:0".into(),
                    model_name: args.model.clone(),
                    ..Default::default()
                },
            )?;
            (format!("{}/v1", server.url()), Some(server))
        }
        AgentKind::Baseline | AgentKind::Random | AgentKind::Replay => return Ok(None),
    };
    let mut config = HarnessConfig::new(base_url);
    config.model = args.model.clone();
    config.api_key = args
        .api_key
        .clone()
        .or_else(|| std::env::var("OPENAI_API_KEY").ok());
    config.temperature = args.temperature;
    config.max_tokens = args.max_tokens;
    Ok(Some((config, server)))
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let backend = if args.native {
        Backend::Native
    } else {
        Backend::Wasm
    };
    let target = args
        .env
        .target()?
        .with_reward(sandgym::target::parse_reward(args.reward.as_deref())?)?;
    let env = target
        .make(backend)
        .with_context(|| format!("building {}", args.env.env))?;
    let env: BoxEnv = match &args.faults {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Box::new(FaultInjection::new(env, FaultConfig::from_json(&text)?)?)
        }
        None => env,
    };
    if matches!(args.agent, AgentKind::Replay) {
        return replay(args, env);
    }
    let env = TimeLimit::from_spec(env);
    let id = env.spec().id.to_string();
    let (episodes, options) = if args.every_task {
        let n = env
            .spec()
            .tasks
            .map(|t| t.get(args.split))
            .with_context(|| format!("{id} has no fixed task list to play once each"))?;
        (n, ResetOptions::split(args.split).cycling())
    } else {
        (args.episodes, ResetOptions::split(args.split))
    };
    let spec = env.spec().clone();
    let chat = chat_server(args)?;
    let start = Instant::now();
    let seeds = (0..episodes).map(|i| args.seed + i);
    let played = play_env(Box::new(env), seeds, &options, |seed| {
        Ok(match args.agent {
            AgentKind::Baseline => registry::baseline(&id).with_context(|| {
                format!("{id} has no scripted baseline (`--agent random` works for any env)")
            })?,
            AgentKind::Random => Box::new(RandomAgent::new(&spec, seed)),
            AgentKind::Openai | AgentKind::Policy => {
                let (config, _) = chat.as_ref().expect("made above for chat agents");
                Box::new(ChatAgent::new(config.clone(), &spec))
            }
            AgentKind::Replay => unreachable!("replayed above"),
        })
    })?;
    let report = PlayReport::new(&id, backend, args.split, &played, start.elapsed());
    for (i, e) in played.iter().enumerate() {
        if let Some(why) = &e.agent_failure {
            eprintln!("episode {i}: the agent failed: {why}");
        }
        if let Some(error) = &e.error {
            eprintln!("episode {i}: {error}");
        }
    }
    if let Some(path) = &args.out {
        let mut out = BufWriter::new(
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        for e in &played {
            e.trajectory.write_jsonl(&mut out)?;
        }
        out.flush()?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{id} ({}, {:?} split): {} episodes, mean reward {:.3}, success rate {:.3}, {:.1} steps/episode, {:.0} env steps/s",
            if args.native { "native" } else { "wasm" },
            args.split,
            report.episodes,
            report.mean_reward,
            report.success_rate,
            report.mean_steps,
            report.steps_per_s,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--agent replay`: the file's episodes played again in `env`, on `--split`.
fn replay(args: &Args, env: BoxEnv) -> anyhow::Result<ExitCode> {
    let path = args.data.as_deref().context("give --data FILE.jsonl")?;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let trajectories = sandgym::env_api::Trajectory::read_jsonl(std::io::BufReader::new(file))
        .with_context(|| format!("reading {}", path.display()))?;
    let mut env = TimeLimit::from_spec(env);
    let report =
        sandgym::replay::replay_all(&mut env, &trajectories, &ResetOptions::split(args.split));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}: {} of {} episodes reproduced",
            path.display(),
            report.reproduced,
            report.episodes
        );
        for d in &report.divergences {
            println!("  {} step {}: {}", d.episode, d.step, d.what);
        }
    }
    Ok(if report.divergences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
