//! Learning from live traffic, measured: an agent's unmodified harness plays the env's train
//! tasks through the recording proxy against a policy server that follows a learner's
//! published versions, for a fixed time; rewards are posted as runs end, the learner
//! (`sandgym::online::Learner`, continuing a copy of a trained run) updates on each batch of
//! rewarded rollouts, and the server tries each new version as a canary, promoting or rolling
//! it back on its rewards. The reward over time, which version served each rollout, every
//! update and every decision are written to `OUT/live.json` and printed.
//!
//! ```text
//! cargo run --release --example learn_live -- --run runs/sql-agent-v0-grpo --minutes 20 --out live
//! ```
//!
//! The README's "Learning while serving" figures come from this command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use sandgym::approach::ProxySettings;
use sandgym::env_api::{ResetOptions, Split};
use sandgym::harness_runner::HarnessKind;
use sandgym::harnesses::ChatClient;
use sandgym::online::{LearnConfig, LearnStep, Learner};
use sandgym::policy::{Cpu, CpuTrain, load};
use sandgym::proxy::judge::Judge;
use sandgym::proxy::{
    FollowConfig, FollowState, Follower, PolicyServer, Proxy, ProxyConfig, ServerConfig,
    TraceStore, Trial,
};
use sandgym::service::EnvTools;
use sandgym::trainer::RunDir;
use sandgym::{Backend, RunMeta};
use serde_json::{Value, json};

/// Options.
#[derive(Debug, Parser)]
struct Args {
    /// A trained run (left as it is: the learner continues a copy).
    #[arg(long)]
    run: PathBuf,
    /// Where the copy, the traces and `live.json` go.
    #[arg(long, default_value = "live")]
    out: PathBuf,
    /// Minutes of traffic.
    #[arg(long, default_value_t = 20.0)]
    minutes: f64,
    /// Harness runs at a time.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Rewarded rollouts per update.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// The canary's share of rollouts.
    #[arg(long, default_value_t = 0.5)]
    canary: f64,
    /// Rollouts each side needs before a canary is judged.
    #[arg(long, default_value_t = 16)]
    min_rollouts: u64,
    /// Candidate rollouts after which a canary not shown better is rolled back.
    #[arg(long, default_value_t = 64)]
    max_rollouts: u64,
    /// Minutes per row of the reward-over-time table.
    #[arg(long, default_value_t = 2.0)]
    window: f64,
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// One harness run as the traffic saw it.
#[derive(Clone, Debug)]
struct Played {
    rollout: String,
    ended_s: f64,
    reward: f64,
    success: bool,
    failed: Option<String>,
}

/// One row of the reward-over-time table: rollouts, reward sum, successes, failures, and
/// rollouts per serving version.
#[derive(Debug, Default)]
struct Window(usize, f64, usize, usize, BTreeMap<String, usize>);

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    sandgym::register_builtin_envs();
    let _ = std::fs::remove_dir_all(&args.out);
    let run = args.out.join("run");
    copy_dir(&args.run, &run).with_context(|| format!("copying {}", args.run.display()))?;
    let _ = std::fs::remove_dir_all(run.join("versions"));
    let db = args.out.join("traces.db");
    let meta = RunMeta::read(&run)?;
    let target = meta.run.target();
    let kind = HarnessKind::for_env(&meta.run.env.to_string())
        .with_context(|| format!("{} has no harness", meta.run.env))?;
    let settings = ProxySettings::for_config(&meta.train, args.concurrency);
    let (config, model, tokenizer) =
        load::checkpoint::<Cpu>(&RunDir::new(&run).policy(), &Default::default())?;
    let server = PolicyServer::start(
        model.for_inference(),
        tokenizer.clone(),
        ServerConfig {
            limits: settings.limits,
            max_context: settings.max_context,
            max_batch: args.concurrency.max(1),
            version: "v0".into(),
            ..ServerConfig::default()
        },
    )?;
    let proxy = Proxy::start(&ProxyConfig::new(server.url()), &db)?;
    let publish = run.join("versions");
    let follower = Follower::start(FollowState::new(
        FollowConfig {
            dir: publish.clone(),
            traces: Some(db.clone()),
            trial: Trial::Canary { share: args.canary },
            judge: Judge {
                confidence: 0.95,
                min_rollouts: args.min_rollouts,
                max_rollouts: args.max_rollouts,
            },
            poll: Duration::from_millis(200),
        },
        server.controls(),
        ("v0", &config, &tokenizer),
    )?);

    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.minutes * 60.0);
    let stop = Arc::new(AtomicBool::new(false));
    // The learner, on its own thread.
    let learner = {
        let (stop, run, db, publish, batch) = (
            stop.clone(),
            run.clone(),
            db.clone(),
            publish.clone(),
            args.batch,
        );
        let limits = settings.limits;
        std::thread::spawn(move || -> anyhow::Result<Vec<(f64, LearnStep)>> {
            let mut learner = Learner::<CpuTrain>::for_run(
                &run,
                LearnConfig {
                    traces: db,
                    publish,
                    batch,
                    limits,
                },
            )?;
            let mut steps = Vec::new();
            learner.follow(
                Duration::from_millis(500),
                || stop.load(Ordering::Relaxed),
                |step| {
                    eprintln!(
                        "[{:6.0} s] published {}: {} rollouts, mean reward {:.3}, {:.0} s",
                        started.elapsed().as_secs_f64(),
                        step.version,
                        step.rollouts,
                        step.reward_mean,
                        step.seconds
                    );
                    steps.push((started.elapsed().as_secs_f64(), step.clone()));
                },
            )?;
            Ok(steps)
        })
    };

    // The traffic: the harness on train tasks, seeds in order, each run's reward posted.
    let next = AtomicUsize::new(0);
    let played = Mutex::new(Vec::<Played>::new());
    let options = ResetOptions::split(Split::Train);
    std::thread::scope(|scope| {
        for _ in 0..args.concurrency.max(1) {
            scope.spawn(|| {
                while Instant::now() < deadline {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let rollout = format!("live-{n}");
                    let mut p = Played {
                        rollout: rollout.clone(),
                        ended_s: 0.0,
                        reward: 0.0,
                        success: false,
                        failed: None,
                    };
                    let episode = target
                        .make(Backend::Wasm)
                        .and_then(|env| EnvTools::start(env, n as u64, &options));
                    match episode {
                        Err(e) => p.failed = Some(e.to_string()),
                        Ok((mut tools, opening)) => {
                            let mut config = settings.harness.clone();
                            config.base_url = proxy.base_url(&rollout);
                            let client = ChatClient::new(&config);
                            if let Err(e) = kind.run(config, &client, &mut tools, &opening) {
                                p.failed = Some(e.to_string());
                            }
                            p.reward = tools.reward();
                            p.success = tools.success();
                            let body = json!({"reward": p.reward, "info": {"success": p.success}});
                            let url = format!("http://{}/rollouts/{rollout}/reward", proxy.addr());
                            if let Err(e) = ureq::post(&url)
                                .header("content-type", "application/json")
                                .send(body.to_string())
                            {
                                p.failed = Some(format!("posting the reward: {e}"));
                            }
                        }
                    }
                    p.ended_s = started.elapsed().as_secs_f64();
                    played.lock().expect("played").push(p);
                }
            });
        }
    });
    stop.store(true, Ordering::Relaxed);
    let steps = learner
        .join()
        .map_err(|_| anyhow::anyhow!("the learner panicked"))??;
    drop(follower);
    let decisions = sandgym::proxy::decisions(&publish)?;

    // Which version served each rollout (its first answer names it).
    let store = TraceStore::open(&db)?;
    let versions: BTreeMap<String, String> = store
        .outcomes_since(0)?
        .into_iter()
        .filter_map(|o| Some((o.rollout, o.version?)))
        .collect();
    let mut played = played.into_inner().expect("played");
    played.sort_by(|a, b| a.ended_s.total_cmp(&b.ended_s));
    let window = args.window * 60.0;
    let mut rows: BTreeMap<usize, Window> = BTreeMap::new();
    for p in &played {
        let row = rows.entry((p.ended_s / window) as usize).or_default();
        row.0 += 1;
        row.1 += p.reward;
        row.2 += usize::from(p.success);
        row.3 += usize::from(p.failed.is_some());
        let v = versions
            .get(&p.rollout)
            .cloned()
            .unwrap_or_else(|| "?".into());
        *row.4.entry(v).or_default() += 1;
    }
    println!("minutes      rollouts  mean reward  success  failed  served by");
    let mut table = Vec::new();
    for (w, Window(n, reward, success, failed, by)) in &rows {
        let from = *w as f64 * args.window;
        println!(
            "{from:5.1}-{:<5.1} {n:8} {:12.3} {:8.3} {failed:7}  {by:?}",
            from + args.window,
            reward / *n as f64,
            *success as f64 / *n as f64
        );
        table.push(
            json!({"from_min": from, "rollouts": n, "reward_mean": reward / *n as f64,
            "success_rate": *success as f64 / *n as f64, "failed": failed, "served_by": by}),
        );
    }
    for d in &decisions {
        println!("{} {:?}: {}", d.version, d.action, d.reason);
    }
    let status = server.status();
    let report = json!({
        "run": args.run.display().to_string(),
        "env": meta.run.env,
        "minutes": args.minutes,
        "concurrency": args.concurrency,
        "batch": args.batch,
        "canary": args.canary,
        "rollouts": played.len(),
        "failed": played.iter().filter(|p| p.failed.is_some()).count(),
        "reward_mean": played.iter().map(|p| p.reward).sum::<f64>() / played.len().max(1) as f64,
        "windows": table,
        "updates": steps.iter().map(|(t, s)| json!({"at_s": t, "version": s.version,
            "rollouts": s.rollouts, "reward_mean": s.reward_mean, "seconds": s.seconds,
            "update_norm": s.metrics.update_norm, "calls_exact": s.traces.calls_exact,
            "calls_unusable": s.traces.calls_unusable})).collect::<Vec<Value>>(),
        "decisions": decisions,
        "incumbent": status.incumbent,
        "served": status.served,
    });
    let path = args.out.join("live.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    println!(
        "{} rollouts, {} updates, incumbent {} at the end; {}",
        played.len(),
        steps.len(),
        status.incumbent,
        path.display()
    );
    Ok(())
}
