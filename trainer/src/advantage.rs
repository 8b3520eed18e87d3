//! Advantage estimators, written after verl's `core_algos` (same formulas, same edge cases).
//!
//! Outcome estimators (GRPO, RLOO) turn one score per rollout into one advantage per rollout;
//! the trainer broadcasts it over that rollout's action tokens. Token estimators (GAE,
//! REINFORCE++) work on one sequence of per-token rewards with a mask: tokens where the mask
//! is `false` (prompt, observations) are skipped — they neither receive an advantage nor break
//! the chain of values and returns across them, which is how multi-turn sequences are handled.

use std::collections::BTreeMap;

/// The statistics of a rollout's group: its size, mean score and unbiased std.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupStats {
    /// Rollouts in the group.
    pub n: usize,
    /// Mean score (0 for a lone rollout, as in verl).
    pub mean: f64,
    /// Unbiased standard deviation (1 for a lone rollout, as in verl).
    pub std: f64,
}

/// The statistics of each element's group (`groups[i]` is element i's group id).
pub fn group_stats(scores: &[f64], groups: &[usize]) -> Vec<GroupStats> {
    assert_eq!(scores.len(), groups.len(), "one group id per score");
    let mut members: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (&s, &g) in scores.iter().zip(groups) {
        members.entry(g).or_default().push(s);
    }
    let stats: BTreeMap<usize, GroupStats> = members
        .into_iter()
        .map(|(g, xs)| {
            let n = xs.len();
            if n == 1 {
                return (
                    g,
                    GroupStats {
                        n,
                        mean: 0.0,
                        std: 1.0,
                    },
                );
            }
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            (
                g,
                GroupStats {
                    n,
                    mean,
                    std: var.sqrt(),
                },
            )
        })
        .collect();
    groups.iter().map(|g| stats[g]).collect()
}

/// The GRPO advantage of `score` in a group: `(score - mean) / (std + eps)`, or
/// `score - mean` without std normalisation (Dr. GRPO).
pub fn grpo_one(score: f64, g: GroupStats, eps: f64, norm_by_std: bool) -> f64 {
    if norm_by_std {
        (score - g.mean) / (g.std + eps)
    } else {
        score - g.mean
    }
}

/// The RLOO advantage of `score` in a group: `n/(n-1) × (score - mean)`, i.e. the score minus
/// the mean of the other rollouts; a lone rollout keeps its score.
pub fn rloo_one(score: f64, g: GroupStats) -> f64 {
    if g.n > 1 {
        let k = g.n as f64 / (g.n - 1) as f64;
        score * k - g.mean * k
    } else {
        score
    }
}

/// GRPO over a batch: [`grpo_one`] of each score in its group.
///
/// ```
/// let a = sandgym_trainer::advantage::grpo(&[1.0, 0.0, 0.0, 1.0], &[0, 0, 0, 0], 1e-6, true);
/// assert!((a[0] - 0.866024).abs() < 1e-6 && (a[1] + 0.866024).abs() < 1e-6);
/// ```
pub fn grpo(scores: &[f64], groups: &[usize], eps: f64, norm_by_std: bool) -> Vec<f64> {
    let stats = group_stats(scores, groups);
    scores
        .iter()
        .zip(stats)
        .map(|(&s, g)| grpo_one(s, g, eps, norm_by_std))
        .collect()
}

/// RLOO over a batch: [`rloo_one`] of each score in its group.
///
/// ```
/// let a = sandgym_trainer::advantage::rloo(&[1.0, 0.0, 0.0, 1.0], &[0, 0, 0, 0]);
/// assert!((a[0] - 2.0 / 3.0).abs() < 1e-9);
/// ```
pub fn rloo(scores: &[f64], groups: &[usize]) -> Vec<f64> {
    let stats = group_stats(scores, groups);
    scores
        .iter()
        .zip(stats)
        .map(|(&s, g)| rloo_one(s, g))
        .collect()
}

/// Generalised advantage estimation over one sequence (verl's masked form): returns
/// `(advantages, returns)` with `returns = advantages + values`. Not whitened; see
/// [`masked_whiten`]. Positions where `mask` is false get the running values of the next
/// masked position and are not trained on.
pub fn gae(
    rewards: &[f64],
    values: &[f64],
    mask: &[bool],
    gamma: f64,
    lam: f64,
) -> (Vec<f64>, Vec<f64>) {
    let n = rewards.len();
    assert!(values.len() == n && mask.len() == n, "equal lengths");
    let mut adv = vec![0.0; n];
    let (mut next_value, mut last) = (0.0, 0.0);
    for t in (0..n).rev() {
        let delta = rewards[t] + gamma * next_value - values[t];
        let candidate = delta + gamma * lam * last;
        if mask[t] {
            next_value = values[t];
            last = candidate;
        }
        adv[t] = last;
    }
    let returns = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    (adv, returns)
}

/// REINFORCE++ returns over one sequence: the discounted sum of the rewards that follow, over
/// the masked positions only (a multi-turn sequence's observation tokens are skipped, not a
/// reset point).
pub fn discounted_returns(rewards: &[f64], mask: &[bool], gamma: f64) -> Vec<f64> {
    assert_eq!(rewards.len(), mask.len(), "equal lengths");
    let mut out = vec![0.0; rewards.len()];
    let mut running = 0.0;
    for t in (0..rewards.len()).rev() {
        if mask[t] {
            running = rewards[t] + gamma * running;
            out[t] = running;
        }
    }
    out
}

/// Mean and unbiased variance of the masked entries of a batch of sequences.
pub fn masked_mean_var(values: &[Vec<f64>], masks: &[Vec<bool>]) -> (f64, f64) {
    let picked: Vec<f64> = values
        .iter()
        .zip(masks)
        .flat_map(|(v, m)| v.iter().zip(m).filter(|(_, m)| **m).map(|(x, _)| *x))
        .collect();
    let n = picked.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = picked.iter().sum::<f64>() / n as f64;
    let var = picked.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let var = if n > 1 {
        var * n as f64 / (n - 1) as f64
    } else {
        var
    };
    (mean, var)
}

/// Whitens the masked entries of a batch to mean 0 and variance 1 (`(x - mean) /
/// sqrt(var + 1e-8)`, verl's `masked_whiten`); unmasked entries become 0.
pub fn masked_whiten(values: &[Vec<f64>], masks: &[Vec<bool>]) -> Vec<Vec<f64>> {
    let (mean, var) = masked_mean_var(values, masks);
    let scale = 1.0 / (var + 1e-8).sqrt();
    values
        .iter()
        .zip(masks)
        .map(|(v, m)| {
            v.iter()
                .zip(m)
                .map(|(x, &m)| if m { (x - mean) * scale } else { 0.0 })
                .collect()
        })
        .collect()
}
