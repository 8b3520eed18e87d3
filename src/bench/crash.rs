//! `sandgym bench crash`: `train` killed with SIGKILL at random moments — during the SFT
//! warm-start, an iteration, an evaluation or a checkpoint write — then resumed (or, killed
//! before its first checkpoint, started again into the same directory), trial after trial.
//! Each trial must end with a whole run: every iteration logged exactly once and in order,
//! the last checkpoint at the last iteration, every episode log readable ([`CrashReport`]).

use crate::trainer::{EpisodeKind, RunDir, episode_log_path};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::env_api::SplitMix64;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

const ITERS: u32 = 4;

/// The small run each trial makes: guess-number in the sandbox, the tiny model, a
/// checkpoint and an evaluation after every iteration.
fn train_args(out: &Path, config: &Path) -> Vec<String> {
    [
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        crate::ModelSource::TINY,
        "--iters",
        &ITERS.to_string(),
        "--config",
        &config.display().to_string(),
        "--out",
        &out.display().to_string(),
        "--eval-episodes",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn sandgym(program: &Path, args: &[String]) -> std::io::Result<std::process::Child> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

/// Runs to the end; the error is its stderr's last line.
fn finish(program: &Path, args: &[String]) -> Result<(), String> {
    let out = sandgym(program, args)
        .and_then(|c| c.wait_with_output())
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&out.stderr);
        Err(text.lines().last().unwrap_or("failed").to_owned())
    }
}

/// What a killed run directory held: where the kill landed.
fn stage(out: &Path) -> String {
    let run = RunDir::new(out);
    let state = std::fs::read_to_string(run.checkpoint_state())
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok());
    match state {
        Some(s) => format!("after checkpoint {}", s["iter"]),
        None if run.checkpoint_old().exists() || run.checkpoint_tmp_state().exists() => {
            "in a checkpoint swap".into()
        }
        None if run.config().exists() => "before the first checkpoint".into(),
        None => "before the run existed".into(),
    }
}

/// Checks a finished run directory is whole.
fn whole(out: &Path) -> Result<(), String> {
    let run = RunDir::new(out);
    let metrics = std::fs::read_to_string(run.metrics()).map_err(|e| e.to_string())?;
    let iters: Vec<u64> = metrics
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .map_err(|e| format!("metrics.jsonl: {e}"))
                .map(|v| v["iter"].as_u64().unwrap_or(0))
        })
        .collect::<Result<_, _>>()?;
    let want: Vec<u64> = (1..=u64::from(ITERS)).collect();
    if iters != want {
        return Err(format!("metrics.jsonl has iterations {iters:?}"));
    }
    let state: Value = std::fs::read_to_string(run.checkpoint_state())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or("no readable checkpoint/state.json")?;
    if state["iter"] != u64::from(ITERS) {
        return Err(format!("the checkpoint is at iteration {}", state["iter"]));
    }
    for i in 1..=ITERS {
        let log = episode_log_path(out, EpisodeKind::Train, i);
        let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        for (n, line) in text.lines().enumerate() {
            serde_json::from_str::<crate::trainer::EpisodeLog>(line)
                .map_err(|e| format!("{} line {}: {e}", log.display(), n + 1))?;
        }
    }
    Ok(())
}

/// `trials` kill-and-resume trials of the `sandgym` binary at `program` in a temporary
/// directory, the kill times drawn from `seed`.
pub fn run(program: &Path, trials: usize, seed: u64) -> anyhow::Result<CrashReport> {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("sandgym-bench-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 2, "group_size": 2, "max_turns": 3},
            "schedule": {"save_every": 1}, "eval": {"every": 1, "episodes": 2}}"#,
    )?;
    // An uninterrupted run: how long a whole run takes, the range kills are drawn from.
    let reference = dir.join("reference");
    let clock = Instant::now();
    finish(program, &train_args(&reference, &config))
        .map_err(|e| anyhow::anyhow!("the reference run failed: {e}"))?;
    let full = clock.elapsed();
    whole(&reference).map_err(|e| anyhow::anyhow!("the reference run is not whole: {e}"))?;
    let mut rng = SplitMix64::new(seed);
    let mut stages: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut resumed, mut restarted) = (0, 0);
    for trial in 0..trials {
        let out = dir.join(format!("trial-{trial}"));
        let args = train_args(&out, &config);
        let at = Duration::from_secs_f64(full.as_secs_f64() * (rng.below(1000) as f64 / 1000.0));
        let mut child = sandgym(program, &args)?;
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let landed = stage(&out);
        *stages.entry(landed.clone()).or_default() += 1;
        let can_resume = landed.starts_with("after") || landed == "in a checkpoint swap";
        let result = if can_resume {
            resumed += 1;
            finish(
                program,
                &["train".into(), "--resume".into(), out.display().to_string()],
            )
        } else {
            restarted += 1;
            finish(program, &args)
        }
        .and_then(|()| whole(&out));
        match result {
            Ok(()) => eprintln!(
                "trial {trial}: killed at {:.1} s ({landed}): whole",
                at.as_secs_f64()
            ),
            Err(e) => {
                eprintln!(
                    "trial {trial}: killed at {:.1} s ({landed}): {e}",
                    at.as_secs_f64()
                );
                failures.push(CrashFailure {
                    trial,
                    killed_at_s: at.as_secs_f64(),
                    stage: landed,
                    error: e,
                });
            }
        }
        let _ = std::fs::remove_dir_all(&out);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(CrashReport {
        trials,
        whole_run_s: full.as_secs_f64(),
        resumed,
        restarted,
        killed: stages,
        whole_after: trials - failures.len(),
        failures,
    })
}

/// What `bench crash` found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashReport {
    /// Trials made.
    pub trials: usize,
    /// Seconds an uninterrupted run takes (kills are drawn from it).
    pub whole_run_s: f64,
    /// Trials resumed from a checkpoint.
    pub resumed: usize,
    /// Trials started again (killed before a checkpoint).
    pub restarted: usize,
    /// Where the kills landed, with how many.
    pub killed: BTreeMap<String, usize>,
    /// Trials that ended with a whole run.
    pub whole_after: usize,
    /// Those that did not.
    pub failures: Vec<CrashFailure>,
}

/// A trial that did not end whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashFailure {
    /// Which.
    pub trial: usize,
    /// When it was killed.
    pub killed_at_s: f64,
    /// Where the kill landed.
    pub stage: String,
    /// What was wrong after.
    pub error: String,
}
