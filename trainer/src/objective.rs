//! The loss terms, after verl's `compute_policy_loss`, `kl_penalty`, `compute_value_loss` and
//! `agg_loss`: each first as a scalar reference function (what the tests check against
//! published vectors), then as the tensor function training uses (checked against the scalar
//! one).

use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor};

use crate::config::{KlEstimator, LossAgg};

/// The clipped policy-gradient loss of one token, with optional dual clip (`dual_clip > 1`;
/// 0 disables it): `max(-A r, -A clip(r, 1 - low, 1 + high))`, and for `A < 0` at most
/// `-A c`.
///
/// ```
/// use sandgym_trainer::objective::ppo_token_loss;
/// assert!((ppo_token_loss(5.0, 1.0, 0.2, 0.28, 3.0) + 1.28).abs() < 1e-12);
/// assert!((ppo_token_loss(5.0, -2.0, 0.2, 0.28, 3.0) - 6.0).abs() < 1e-12);
/// ```
pub fn ppo_token_loss(ratio: f64, adv: f64, clip_low: f64, clip_high: f64, dual_clip: f64) -> f64 {
    let l1 = -adv * ratio;
    let l2 = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high);
    let clipped = l1.max(l2);
    if dual_clip > 0.0 && adv < 0.0 {
        clipped.min(-adv * dual_clip)
    } else {
        clipped
    }
}

/// The per-token KL estimate between the policy (`logp`) and the reference (`ref_logp`).
///
/// ```
/// use sandgym_trainer::{KlEstimator, objective::kl};
/// assert!((kl(-1.0, -1.5, KlEstimator::K1) - 0.5).abs() < 1e-12);
/// assert!((kl(-1.0, -1.5, KlEstimator::K2) - 0.125).abs() < 1e-12);
/// assert!((kl(-1.0, -1.5, KlEstimator::K3) - 0.1065307).abs() < 1e-7);
/// ```
pub fn kl(logp: f64, ref_logp: f64, estimator: KlEstimator) -> f64 {
    let d = logp - ref_logp;
    match estimator {
        KlEstimator::K1 => d,
        KlEstimator::K2 => 0.5 * d * d,
        KlEstimator::K3 => {
            let k = -d;
            (k.exp() - k - 1.0).clamp(-10.0, 10.0)
        }
    }
}

/// The clipped value loss of one token: `0.5 max((v - R)^2, (clip(v, old ± c) - R)^2)`.
pub fn value_token_loss(value: f64, old_value: f64, ret: f64, clip: f64) -> f64 {
    let clipped = value.clamp(old_value - clip, old_value + clip);
    0.5 * (value - ret).powi(2).max((clipped - ret).powi(2))
}

/// Reduces per-token losses of a batch with `mode` over the masked positions.
pub fn aggregate(losses: &[Vec<f64>], masks: &[Vec<bool>], mode: LossAgg) -> f64 {
    let per_seq = losses.iter().zip(masks).map(|(l, m)| {
        let (sum, n) = l
            .iter()
            .zip(m)
            .filter(|(_, m)| **m)
            .fold((0.0, 0usize), |(s, n), (x, _)| (s + x, n + 1));
        (sum, n)
    });
    match mode {
        LossAgg::TokenMean => {
            let (sum, n) = per_seq.fold((0.0, 0), |(s, n), (x, k)| (s + x, n + k));
            sum / n.max(1) as f64
        }
        LossAgg::SeqMeanTokenSum | LossAgg::SeqMeanTokenMean => {
            let seqs: Vec<f64> = per_seq
                .map(|(sum, n)| match mode {
                    LossAgg::SeqMeanTokenSum => sum,
                    _ => sum / n.max(1) as f64,
                })
                .collect();
            seqs.iter().sum::<f64>() / seqs.len().max(1) as f64
        }
    }
}

/// [`ppo_token_loss`] on tensors, plus the fraction of tokens whose ratio was clipped.
///
/// # Shapes
/// `logp`, `old_logp`, `adv`: `[batch, seq]`; the result has the same shape.
pub fn ppo_loss<B: Backend>(
    logp: Tensor<B, 2>,
    old_logp: Tensor<B, 2>,
    adv: Tensor<B, 2>,
    clip_low: f64,
    clip_high: f64,
    dual_clip: f64,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let ratio = (logp - old_logp).clamp(-20.0, 20.0).exp();
    let l1 = adv.clone().neg() * ratio.clone();
    let l2 = adv.clone().neg() * ratio.clamp(1.0 - clip_low, 1.0 + clip_high);
    let clipped_flag = l2.clone().greater(l1.clone()).float();
    let clipped = l1.max_pair(l2);
    let loss = if dual_clip > 0.0 {
        let l3 = adv.clone().neg().mul_scalar(dual_clip);
        let dual = clipped.clone().min_pair(l3);
        clipped.mask_where(adv.lower_elem(0.0), dual)
    } else {
        clipped
    };
    (loss, clipped_flag)
}

/// [`kl`] on tensors of log-probs (`[batch, seq]`).
pub fn kl_tensor<B: Backend>(
    logp: Tensor<B, 2>,
    ref_logp: Tensor<B, 2>,
    estimator: KlEstimator,
) -> Tensor<B, 2> {
    let d = logp - ref_logp;
    match estimator {
        KlEstimator::K1 => d,
        KlEstimator::K2 => d.powi_scalar(2).mul_scalar(0.5),
        KlEstimator::K3 => {
            let k = d.neg();
            (k.clone().exp() - k).sub_scalar(1.0).clamp(-10.0, 10.0)
        }
    }
}

/// [`value_token_loss`] on tensors (`[batch, seq]`).
pub fn value_loss<B: Backend>(
    values: Tensor<B, 2>,
    old_values: Tensor<B, 2>,
    returns: Tensor<B, 2>,
    clip: f64,
) -> Tensor<B, 2> {
    let low = old_values.clone().sub_scalar(clip);
    let high = old_values.add_scalar(clip);
    let clipped = values.clone().max_pair(low).min_pair(high);
    let a = (values - returns.clone()).powi_scalar(2);
    let b = (clipped - returns).powi_scalar(2);
    a.max_pair(b).mul_scalar(0.5)
}

/// [`aggregate`] on tensors: `losses` and `mask` (1.0 where trainable) are `[batch, seq]`;
/// returns a one-element tensor.
pub fn aggregate_tensor<B: Backend>(
    losses: Tensor<B, 2>,
    mask: Tensor<B, 2>,
    mode: LossAgg,
) -> Tensor<B, 1> {
    let masked = losses * mask.clone();
    match mode {
        LossAgg::TokenMean => masked.sum().div(mask.sum().clamp_min(1.0)),
        LossAgg::SeqMeanTokenSum => masked.sum_dim(1).mean().reshape([1]),
        LossAgg::SeqMeanTokenMean => masked
            .sum_dim(1)
            .div(mask.sum_dim(1).clamp_min(1.0))
            .mean()
            .reshape([1]),
    }
}

/// A pass's share of [`aggregate_tensor`] over a whole minibatch of `tokens` trainable
/// tokens in `seqs` episodes, of which `losses`/`mask` are some rows: the shares of a
/// minibatch's passes add up to its aggregate (for all of it, this is `aggregate_tensor`).
pub fn aggregate_part<B: Backend>(
    losses: Tensor<B, 2>,
    mask: Tensor<B, 2>,
    mode: LossAgg,
    tokens: f64,
    seqs: f64,
) -> Tensor<B, 1> {
    let masked = losses * mask.clone();
    match mode {
        LossAgg::TokenMean => masked.sum().div_scalar(tokens.max(1.0)),
        LossAgg::SeqMeanTokenSum => masked.sum_dim(1).sum().div_scalar(seqs.max(1.0)),
        LossAgg::SeqMeanTokenMean => masked
            .sum_dim(1)
            .div(mask.sum_dim(1).clamp_min(1.0))
            .sum()
            .div_scalar(seqs.max(1.0)),
    }
}

/// A one-element tensor's value.
pub fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_scalar().elem::<f64>()
}
