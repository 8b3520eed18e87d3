//! `sandgym bench online`: the serving side of learning while serving.
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

use sandgym::ModelSource;
use sandgym::approach::percentile;
use sandgym::policy::Cpu;
use sandgym::proxy::published::{self, Manifest};
use sandgym::proxy::{FollowConfig, FollowState, Follower, PolicyServer, ServerConfig};
use sandgym::training::{ModelChoice, initial_policy};
use serde_json::{Map, Value, json};

/// A training run in another process, killed when dropped.
struct Learning(Child);

impl Drop for Learning {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sandgym train` on guess-number with the tiny model (iterations without end) in
/// `dir`.
fn learning(dir: &Path) -> anyhow::Result<Learning> {
    let config = dir.join("learner.json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 8, "group_size": 4}, "sft": {"episodes": 64}}"#,
    )?;
    let child = Command::new(std::env::current_exe()?)
        .args(["train", "--env", "guess-number-v0", "--model", "tiny"])
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

fn ms(us: u64) -> Value {
    json!((us as f64 / 10.0).round() / 100.0)
}

/// The update-to-served rounds: `rounds` versions of `model`, each published and waited for.
fn swap_rounds(model: &ModelSource, rounds: usize) -> anyhow::Result<Map<String, Value>> {
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
    let mut m = Map::new();
    m.insert("model".into(), json!(model));
    m.insert("rounds".into(), json!(rounds));
    m.insert("p50_ms".into(), ms(percentile(&sorted, 0.5)));
    m.insert("max_ms".into(), ms(*sorted.last().unwrap_or(&0)));
    m.insert(
        "each_ms".into(),
        Value::Array(served_us.iter().map(|&u| ms(u)).collect()),
    );
    publish_us.sort_unstable();
    m.insert("publish_p50_ms".into(), ms(percentile(&publish_us, 0.5)));
    m.insert("answers_during".into(), json!(answered));
    m.insert("failed_requests".into(), json!(failed));
    Ok(m)
}

/// Runs the benchmark: `budget` per proxy phase at `rate` requests/s, `rounds` swaps of
/// `model`.
pub fn run(
    budget: Duration,
    rate: f64,
    model: &ModelSource,
    rounds: usize,
) -> anyhow::Result<Map<String, Value>> {
    let dir = std::env::temp_dir().join(format!("sandgym-bench-online-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut m = Map::new();
    m.insert(
        "proxy_alone".into(),
        Value::Object(super::proxy::run(budget, rate)?),
    );
    let learner = learning(&dir)?;
    // Let the training run start (its SFT warm-start already keeps the cores busy).
    std::thread::sleep(Duration::from_secs(3));
    let cpu_before = cpu_seconds(learner.0.id());
    let clock = Instant::now();
    let mut busy = super::proxy::run(budget, rate)?;
    if let (Some(before), Some(after)) = (cpu_before, cpu_seconds(learner.0.id())) {
        // How much CPU the learner got meanwhile (2.0 = two cores' worth).
        busy.insert(
            "learner_cores".into(),
            json!(((after - before) / clock.elapsed().as_secs_f64() * 100.0).round() / 100.0),
        );
    }
    drop(learner);
    m.insert("proxy_while_training".into(), Value::Object(busy));
    m.insert(
        "update_to_served".into(),
        Value::Object(swap_rounds(model, rounds)?),
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(m)
}
