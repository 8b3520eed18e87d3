//! `sandgym bench online`: the serving side of learning while serving ([`OnlineReport`]).
//!
//! 1. The recording proxy's throughput and latency against a canned upstream at `--rate`,
//!    alone and then while a training run (`sandgym train`, another process) uses the same
//!    cores: the learner's load must not starve the serving path.
//! 2. Update-to-served: a policy server follows a publish directory while a client calls it
//!    back to back; each round publishes a new version (the checkpoint a learner writes after
//!    an update) and times until an answer names it: the save, the follower's poll, the load
//!    and the swap.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ModelSource;
use crate::approach::percentile;
use crate::policy::Cpu;
use crate::proxy::published::{self, Manifest};
use crate::proxy::{FollowConfig, FollowState, Follower, PolicyServer, ServerConfig};
use crate::training::{ModelChoice, initial_policy};
use serde::{Deserialize, Serialize};

use super::ms_of_us as ms;
use serde_json::{Value, json};

use super::proxy::ProxyReport;

/// A training run in another process, killed when dropped.
struct Learning(Child);

impl Drop for Learning {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sandgym train` (the `sandgym` binary at `program`) on guess-number with the tiny
/// model (iterations without end) in `dir`.
fn learning(program: &Path, dir: &Path) -> anyhow::Result<Learning> {
    let config = dir.join("learner.json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 8, "group_size": 4}, "sft": {"episodes": 64}}"#,
    )?;
    let child = Command::new(program)
        .args([
            "train",
            "--env",
            "guess-number-v0",
            "--model",
            ModelSource::TINY,
        ])
        .args(["--iters", "100000", "--eval-episodes", "0", "--out"])
        .arg(dir.join("learner-run"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(Learning(child))
}

/// Seconds of user and system CPU time the process `pid` has used (Linux; `None` elsewhere).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// What `bench online` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnlineReport {
    /// The proxy alone.
    pub proxy_alone: ProxyReport,
    /// The proxy while a training run uses the same cores.
    pub proxy_while_training: ProxyReport,
    /// The cores' worth of CPU the training run got meanwhile (Linux).
    pub learner_cores: Option<f64>,
    /// From a published version to its first answer.
    pub update_to_served: SwapReport,
}

/// Update-to-served: each round publishes a version and times until an answer names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapReport {
    /// The model published.
    pub model: ModelSource,
    /// Rounds.
    pub rounds: usize,
    /// Median (ms).
    pub p50_ms: f64,
    /// Slowest (ms).
    pub max_ms: f64,
    /// Each round (ms).
    pub each_ms: Vec<f64>,
    /// Writing a version, median (ms).
    pub publish_p50_ms: f64,
    /// Answers the client got meanwhile.
    pub answers_during: usize,
    /// Requests that failed meanwhile (0: a swap drops nothing).
    pub failed_requests: usize,
}

/// The update-to-served rounds: `rounds` versions of `model`, each published and waited for.
fn swap_rounds(model: &ModelSource, rounds: usize) -> anyhow::Result<SwapReport> {
    let dir = std::env::temp_dir().join(format!("sandgym-bench-swap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let choice = ModelChoice {
        model: model.clone(),
        lora_rank: if model.is_pretrained() { 8 } else { 0 },
    };
    let device = Default::default();
    let (config, policy, tokenizer) = initial_policy::<Cpu>(&choice, 0, &device)?;
    let server = PolicyServer::start(policy.clone(), tokenizer.clone(), ServerConfig::default())?;
    let follower = Follower::start(FollowState::new(
        FollowConfig::new(&dir, None),
        server.controls(),
        ("v0", &config, &tokenizer),
    )?);
    let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let (seen, stop) = (seen.clone(), stop.clone());
        let url = format!("{}/v1/chat/completions", server.url());
        std::thread::spawn(move || {
            let agent = ureq::Agent::new_with_defaults();
            let body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
                .to_string();
            let mut failed = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let answer = agent
                    .post(&url)
                    .header("content-type", "application/json")
                    .send(&body)
                    .ok()
                    .and_then(|mut r| r.body_mut().read_to_string().ok())
                    .and_then(|text| serde_json::from_str::<Value>(&text).ok());
                match answer.and_then(|a| a["policy_version"].as_str().map(str::to_owned)) {
                    Some(v) => seen
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((Instant::now(), v)),
                    None => failed += 1,
                }
            }
            failed
        })
    };
    let mut served_us = Vec::new();
    let mut publish_us = Vec::new();
    for round in 1..=rounds as u64 {
        let manifest = Manifest {
            version: format!("v{round}"),
            number: round,
            rollouts: Vec::new(),
            reward_mean: 0.0,
            published_us: 0,
        };
        let start = Instant::now();
        published::publish(&dir, &manifest, &config, &policy, &tokenizer)?;
        publish_us.push(start.elapsed().as_micros() as u64);
        let deadline = start + Duration::from_secs(120);
        let at = loop {
            let found = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .find(|(_, v)| *v == manifest.version)
                .map(|(t, _)| *t);
            if let Some(t) = found {
                break t;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{} was not served within 120 s",
                manifest.version
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        served_us.push(at.duration_since(start).as_micros() as u64);
    }
    stop.store(true, Ordering::Relaxed);
    let failed = client
        .join()
        .map_err(|_| anyhow::anyhow!("client panicked"))?;
    drop(follower);
    let answered = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .len();
    let _ = std::fs::remove_dir_all(&dir);
    let mut sorted = served_us.clone();
    sorted.sort_unstable();
    publish_us.sort_unstable();
    Ok(SwapReport {
        model: model.clone(),
        rounds,
        p50_ms: ms(percentile(&sorted, 0.5)),
        max_ms: ms(*sorted.last().unwrap_or(&0)),
        each_ms: served_us.iter().map(|&u| ms(u)).collect(),
        publish_p50_ms: ms(percentile(&publish_us, 0.5)),
        answers_during: answered,
        failed_requests: failed,
    })
}

/// Runs the benchmark: `budget` per proxy phase at `rate` requests/s, `rounds` swaps of
/// `model`; the training run is the `sandgym` binary at `program`.
pub fn run(
    program: &Path,
    budget: Duration,
    rate: f64,
    model: &ModelSource,
    rounds: usize,
) -> anyhow::Result<OnlineReport> {
    let dir = std::env::temp_dir().join(format!("sandgym-bench-online-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let proxy_alone = super::proxy::run(budget, rate)?;
    let learner = learning(program, &dir)?;
    // Let the training run start (its SFT warm-start already keeps the cores busy).
    std::thread::sleep(Duration::from_secs(3));
    let cpu_before = cpu_seconds(learner.0.id());
    let clock = Instant::now();
    let proxy_while_training = super::proxy::run(budget, rate)?;
    // How much CPU the learner got meanwhile (2.0 = two cores' worth).
    let learner_cores = match (cpu_before, cpu_seconds(learner.0.id())) {
        (Some(before), Some(after)) => {
            Some(((after - before) / clock.elapsed().as_secs_f64() * 100.0).round() / 100.0)
        }
        _ => None,
    };
    drop(learner);
    let update_to_served = swap_rounds(model, rounds)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(OnlineReport {
        proxy_alone,
        proxy_while_training,
        learner_cores,
        update_to_served,
    })
}
