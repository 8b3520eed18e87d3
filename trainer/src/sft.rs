//! Supervised warm-start: behaviour cloning of recorded episodes (e.g. the scripted baseline's)
//! on the same token rendering that rollouts produce.

use burn::tensor::backend::AutodiffBackend;
use sandgym_env_api::{SplitMix64, ToolSpec, Trajectory};
use sandgym_policy::Tokenizer;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::batch::Sample;
use crate::learner::Learner;
use crate::rollout::{RolloutSettings, render_trajectory};

/// Settings of a supervised warm-start.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Recorded episodes to train on (0 skips SFT).
    pub episodes: usize,
    /// Passes over them.
    pub epochs: u32,
    /// Episodes per optimiser step.
    pub minibatch: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Keep only each episode's final turn (its answer) after the instruction: the data for a
    /// policy that answers in one turn (`max_turns: 1`), when the recorded agent first checked
    /// its answer with a tool.
    pub final_turn_only: bool,
    /// Keep only the recorded episodes that succeeded (rejection-sampled behaviour cloning):
    /// a scripted baseline's failures teach the policy its mistakes.
    pub successful_only: bool,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            episodes: 0,
            epochs: 4,
            minibatch: 16,
            lr: 2e-3,
            final_turn_only: false,
            successful_only: false,
        }
    }
}

/// The training samples of recorded trajectories: only the actions carry loss. Trajectories
/// longer than `max_context` tokens are left out; the number left out is returned too.
pub fn samples(
    tokenizer: &Tokenizer,
    tools: &[ToolSpec],
    trajectories: &[Trajectory],
    settings: &RolloutSettings,
    config: &SftConfig,
) -> Result<(Vec<Sample>, usize)> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for t in trajectories {
        let mut t = t.clone();
        if config.final_turn_only && t.records.len() > 1 {
            t.records.drain(..t.records.len() - 1);
        }
        let r = render_trajectory(tokenizer, tools, &t, settings)?;
        if r.ids.len() > settings.max_context || !r.loss_mask.iter().any(|&m| m) {
            skipped += 1;
            continue;
        }
        let n = r.ids.len();
        out.push(Sample {
            inputs: r.ids[..n - 1].iter().map(|&x| i64::from(x)).collect(),
            targets: r.ids[1..].iter().map(|&x| i64::from(x)).collect(),
            mask: r.loss_mask[1..].to_vec(),
            allowed: vec![None; n - 1],
            old_logp: vec![0.0; n - 1],
            ref_logp: vec![0.0; n - 1],
            old_values: vec![0.0; n - 1],
            adv: vec![0.0; n - 1],
            returns: vec![0.0; n - 1],
        });
    }
    Ok((out, skipped))
}

/// Trains `learner` on `samples` for `config.epochs` shuffled passes; calls `progress(epoch,
/// step, loss)` after each step and returns the mean loss of each epoch.
pub fn train<B: AutodiffBackend>(
    learner: &mut Learner<B>,
    samples: &[Sample],
    config: &SftConfig,
    seed: u64,
    mut progress: impl FnMut(u32, usize, f64),
) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    let mut means = Vec::new();
    for epoch in 0..config.epochs {
        let mut order: Vec<usize> = (0..samples.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut total = 0.0;
        let mut steps = 0;
        for (step, chunk) in order.chunks(config.minibatch.max(1)).enumerate() {
            let batch: Vec<&Sample> = chunk.iter().map(|&i| &samples[i]).collect();
            let loss = learner.sft_step(&batch, config.lr);
            progress(epoch, step, loss);
            total += loss;
            steps += 1;
        }
        means.push(total / f64::from(steps.max(1)));
    }
    means
}
