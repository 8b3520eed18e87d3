//! Per-iteration metrics and the `metrics.jsonl` log.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::io;
use crate::rollout::Episode;
use crate::{Result, TrainError};

/// What one training iteration did. One JSON line of `metrics.jsonl`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IterMetrics {
    /// Iteration number, from 1.
    pub iter: u32,
    /// Episodes played (all batches, before filtering).
    pub episodes: usize,
    /// Episodes trained on.
    pub trained_episodes: usize,
    /// Mean total reward of the episodes played.
    pub reward_mean: f64,
    /// Standard deviation of the total reward.
    pub reward_std: f64,
    /// Fraction of episodes that succeeded.
    pub success_rate: f64,
    /// Mean policy turns per episode.
    pub turns_mean: f64,
    /// Mean generated tokens per episode.
    pub response_tokens_mean: f64,
    /// Episodes ended by an env failure.
    pub env_errors: usize,
    /// Groups dropped by dynamic sampling (all rewards equal).
    pub filtered_groups: usize,
    /// Trajectory diversity: distinct action sequences per group, over the group size,
    /// averaged over groups (1 = every rollout different).
    pub diversity: f64,
    /// Entropy of the (constrained) sampling distribution on generated tokens.
    pub entropy: f64,
    /// KL to the reference policy (0 when not used).
    pub kl_ref: f64,
    /// Approximate KL between the sampling policy and the updated one.
    pub ppo_kl: f64,
    /// Fraction of tokens whose ratio was clipped.
    pub clip_frac: f64,
    /// Mean total loss over the iteration's steps.
    pub loss: f64,
    /// Mean policy-gradient loss.
    pub pg_loss: f64,
    /// Mean value loss (PPO).
    pub vf_loss: f64,
    /// Optimiser steps.
    pub grad_steps: usize,
    /// Groups (tasks) trained on: episodes of one task and seed in this iteration.
    #[serde(default)]
    pub groups: usize,
    /// Of them, groups whose episodes all got the same reward: with a group baseline (GRPO,
    /// RLOO, DAPO) their advantages are all zero and they teach nothing.
    #[serde(default)]
    pub zero_variance_groups: usize,
    /// Of them, groups every episode of which succeeded (a task the policy already solves).
    #[serde(default)]
    pub solved_groups: usize,
    /// Mean over the iteration's optimiser steps of the gradient's global L2 norm (trainable
    /// parameters, before clipping).
    #[serde(default)]
    pub grad_norm: f64,
    /// L2 norm of the change of the trainable weights over the iteration.
    #[serde(default)]
    pub update_norm: f64,
    /// L2 norm of the trainable weights before the iteration (`update_norm` over it is the
    /// relative size of the update).
    #[serde(default)]
    pub weight_norm: f64,
    /// Generated tokens per second of generation.
    pub tokens_per_s: f64,
    /// Env steps per second of env time.
    pub env_steps_per_s: f64,
    /// Seconds spent rolling out.
    pub rollout_s: f64,
    /// Seconds spent updating.
    pub update_s: f64,
    /// Seconds since the run started (across resumes).
    pub elapsed_s: f64,
    /// Turns (model calls) the sampler journaled this iteration.
    #[serde(default)]
    pub calls_sampled: usize,
    /// Of them, turns whose tokens reached the update exactly as sampled (checked against
    /// the journal: [`SampleJournal::captured`](crate::SampleJournal::captured)).
    #[serde(default)]
    pub calls_trained_exactly: usize,
    /// Their tokens.
    #[serde(default)]
    pub tokens_trained_exactly: usize,
    /// Under a composed reward (`--reward`), each term's mean per episode (summed over the
    /// episode's steps); absent otherwise.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reward_terms: std::collections::BTreeMap<String, f64>,
    /// The parts of the terms that give them (a reward plugin's rubric), each part's mean
    /// per episode, keyed `term/part`; absent otherwise.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reward_parts: std::collections::BTreeMap<String, f64>,
}

impl IterMetrics {
    /// The figures that do not depend on timing: equal for equal runs.
    pub fn deterministic(&self) -> Self {
        Self {
            tokens_per_s: 0.0,
            env_steps_per_s: 0.0,
            rollout_s: 0.0,
            update_s: 0.0,
            elapsed_s: 0.0,
            ..self.clone()
        }
    }
}

/// One evaluation during a run (a line of `eval.jsonl`): the policy after `iter` iterations
/// (0: the initial policy), greedy, on fixed seeds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalPoint {
    /// Iterations completed when evaluated.
    pub iter: u32,
    /// The split evaluated on.
    pub split: sandgym_env_api::Split,
    /// Episodes played.
    pub episodes: usize,
    /// Fraction that succeeded.
    pub success_rate: f64,
    /// Its 95% confidence interval (Wilson score).
    #[serde(default)]
    pub success_ci95: (f64, f64),
    /// Mean total reward.
    pub mean_reward: f64,
}

/// A line of a run's JSONL logs: it belongs to an iteration.
pub trait Logged: Serialize + serde::de::DeserializeOwned {
    /// The iteration the line belongs to.
    fn iter(&self) -> u32;
}

impl Logged for IterMetrics {
    fn iter(&self) -> u32 {
        self.iter
    }
}

impl Logged for EvalPoint {
    fn iter(&self) -> u32 {
        self.iter
    }
}

/// Fills the episode-level figures of `m` from the episodes played.
pub fn episode_figures(m: &mut IterMetrics, episodes: &[Episode]) {
    let n = episodes.len().max(1) as f64;
    let rewards: Vec<f64> = episodes.iter().map(Episode::total_reward).collect();
    m.episodes = episodes.len();
    m.reward_mean = rewards.iter().sum::<f64>() / n;
    m.reward_std = (rewards
        .iter()
        .map(|r| (r - m.reward_mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    m.success_rate = episodes.iter().filter(|e| e.success).count() as f64 / n;
    m.turns_mean = episodes.iter().map(|e| e.turns.len()).sum::<usize>() as f64 / n;
    m.response_tokens_mean = episodes
        .iter()
        .map(|e| e.loss_mask.iter().filter(|&&x| x).count())
        .sum::<usize>() as f64
        / n;
    m.env_errors = episodes.iter().filter(|e| e.error.is_some()).count();
    m.diversity = diversity(episodes);
    m.reward_terms.clear();
    m.reward_parts.clear();
    for e in episodes {
        for (name, value) in &e.reward_terms {
            *m.reward_terms.entry(name.clone()).or_default() += value / n;
        }
        for (name, value) in &e.reward_parts {
            *m.reward_parts.entry(name.clone()).or_default() += value / n;
        }
    }
}

/// Distinct action sequences per group over group size, averaged over groups.
pub fn diversity(episodes: &[Episode]) -> f64 {
    let mut groups: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
    for e in episodes {
        groups.entry(e.group).or_default().push(e.action_text());
    }
    if groups.values().all(|g| g.len() == 1) {
        // One rollout per task: distinct sequences over the whole batch.
        let all: std::collections::BTreeSet<&String> = groups.values().flatten().collect();
        return all.len() as f64 / episodes.len().max(1) as f64;
    }
    let per: Vec<f64> = groups
        .values()
        .map(|g| {
            let distinct: std::collections::BTreeSet<&String> = g.iter().collect();
            distinct.len() as f64 / g.len() as f64
        })
        .collect();
    per.iter().sum::<f64>() / per.len().max(1) as f64
}

/// A JSONL log of a run: `metrics.jsonl` (one [`IterMetrics`] per line, appended and flushed
/// after every iteration) or `eval.jsonl` (one [`EvalPoint`] per evaluation).
#[derive(Debug)]
pub struct MetricsLog<T = IterMetrics> {
    path: PathBuf,
    kind: std::marker::PhantomData<T>,
}

impl<T: Logged> MetricsLog<T> {
    /// The log at `path` (created on the first append).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            kind: std::marker::PhantomData,
        }
    }

    /// Appends one line.
    pub fn append(&self, m: &T) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io(&self.path))?;
        let line = serde_json::to_string(m).expect("metrics serialise");
        writeln!(f, "{line}").map_err(io(&self.path))?;
        f.flush().map_err(io(&self.path))
    }

    /// Every line logged so far. A torn last line (a crash mid-write) is ignored.
    pub fn read(&self) -> Result<Vec<T>> {
        read_metrics(&self.path)
    }

    /// Drops the lines of iterations after `iter` (used when resuming from a checkpoint that
    /// is older than the log).
    pub fn truncate_after(&self, iter: u32) -> Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        let kept: Vec<T> = self
            .read()?
            .into_iter()
            .filter(|m| m.iter() <= iter)
            .collect();
        let mut text = String::new();
        for m in &kept {
            text.push_str(&serde_json::to_string(m).expect("metrics serialise"));
            text.push('\n');
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path))
    }
}

/// Reads a `metrics.jsonl` (or `eval.jsonl`) file.
pub fn read_metrics<T: Logged>(path: &Path) -> Result<Vec<T>> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let lines: Vec<String> = std::io::BufReader::new(f)
        .lines()
        .collect::<std::io::Result<_>>()
        .map_err(io(path))?;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(m) => out.push(m),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(TrainError::Run {
                    path: path.to_owned(),
                    reason: format!("line {}: {e}", i + 1),
                });
            }
        }
    }
    Ok(out)
}
