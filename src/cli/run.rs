//! `sandgym run`: run episodes of an env with an agent and report how it did.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sandgym::chat_agent::ChatAgent;
use sandgym::env_api::{BoxEnv, Env, RecordTrajectory, ResetOptions, Split, TimeLimit};
use sandgym::harnesses::HarnessConfig;
use sandgym::sandbox::{FaultConfig, FaultInjection};
use sandgym::{Backend, agents};
use serde_json::json;

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
    env: sandgym::target::EnvArgs,
    /// A reward composed around the env's own: terms, or a plugin (`--help` for more).
    #[arg(long, long_help = sandgym::target::REWARD_HELP)]
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
            let (_, model, tokenizer) = sandgym::policy::checkpoint::load::<sandgym::policy::Cpu>(
                &sandgym::trainer::policy_dir(dir),
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
    let mut env = RecordTrajectory::new(TimeLimit::from_spec(env));
    let id = env.spec().id.to_string();
    let mut out = match &args.out {
        Some(path) => Some(BufWriter::new(
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let (mut total_reward, mut successes, mut steps, mut failures) = (0.0, 0u64, 0u64, 0u64);
    let mut env_time = Duration::ZERO;
    let start = Instant::now();
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
    let chat = chat_server(args)?;
    for episode in 0..episodes {
        let mut agent: Box<dyn agents::Agent> = match args.agent {
            AgentKind::Baseline => agents::baseline(&id).with_context(|| {
                format!("{id} has no scripted baseline (`--agent random` works for any env)")
            })?,
            AgentKind::Random => Box::new(agents::RandomAgent::new(
                env.spec(),
                args.seed.wrapping_add(episode),
            )),
            AgentKind::Openai | AgentKind::Policy => {
                let (config, _) = chat.as_ref().expect("made above for chat agents");
                Box::new(ChatAgent::new(config.clone(), env.spec()))
            }
            AgentKind::Replay => unreachable!("replayed above"),
        };
        let t = Instant::now();
        let mut obs = env.reset(args.seed + episode, &options)?;
        env_time += t.elapsed();
        let mut reward = 0.0;
        while !env.done().is_done() {
            let action = agent.act(&obs);
            if let Some(why) = agent.failure() {
                eprintln!("episode {episode}: the agent failed: {why}");
                failures += 1;
                break;
            }
            let t = Instant::now();
            let result = env.step(&action);
            env_time += t.elapsed();
            steps += 1;
            match result {
                Ok(o) => {
                    reward += env.reward();
                    obs = o;
                }
                Err(e) if e.is_invalid_action() => {
                    obs = sandgym::env_api::Observation::new(e.to_string())
                }
                Err(e) => {
                    eprintln!("episode {episode}: {e}");
                    failures += 1;
                    break;
                }
            }
        }
        let success = sandgym::env_api::episode_success(&obs.info, env.done(), reward);
        successes += u64::from(success);
        total_reward += reward;
        if let Some(out) = out.as_mut() {
            env.take_trajectory().write_jsonl(&mut *out)?;
        }
    }
    if let Some(out) = out.as_mut() {
        out.flush()?;
    }
    let n = episodes.max(1) as f64;
    let summary = json!({
        "env": id,
        "backend": if args.native { "native" } else { "wasm" },
        "split": args.split,
        "episodes": episodes,
        "mean_reward": total_reward / n,
        "success_rate": successes as f64 / n,
        "success_ci95": sandgym::trainer::wilson_interval(successes as usize, episodes as usize),
        "steps": steps,
        "mean_steps": steps as f64 / n,
        "failed_episodes": failures,
        "steps_per_s": steps as f64 / env_time.as_secs_f64().max(1e-9),
        "wall_s": start.elapsed().as_secs_f64(),
    });
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "{id} ({}, {:?} split): {} episodes, mean reward {:.3}, success rate {:.3}, {:.1} steps/episode, {:.0} env steps/s",
            summary["backend"].as_str().unwrap_or_default(),
            args.split,
            episodes,
            summary["mean_reward"].as_f64().unwrap_or_default(),
            summary["success_rate"].as_f64().unwrap_or_default(),
            summary["mean_steps"].as_f64().unwrap_or_default(),
            summary["steps_per_s"].as_f64().unwrap_or_default(),
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
