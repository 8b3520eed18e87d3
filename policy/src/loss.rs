//! Token log-probs and masked reductions, the building blocks of every policy loss.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor};

/// A large negative logit standing in for "not allowed": finite, so gradients stay defined.
const MASKED: f32 = -1e9;

/// The log-prob of each target token under `logits`, divided by `temperature` and restricted to
/// the `allowed` tokens — the same distribution [`generate`](crate::generate) samples from, so
/// ratios against the sampling log-probs compare like with like.
///
/// # Shapes
/// - `logits`: `[batch, seq, vocab]` (position `i` predicts `targets[i]`)
/// - `targets`: `[batch, seq]`
/// - `allowed`: `[batch, seq, vocab]`, `true` where a token was allowed; `None` for all
/// - returns `[batch, seq]`
pub fn token_logprobs<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2, Int>,
    allowed: Option<Tensor<B, 3, Bool>>,
    temperature: f32,
) -> Tensor<B, 2> {
    let mut scaled = logits.div_scalar(temperature);
    if let Some(allowed) = allowed {
        scaled = scaled.mask_fill(allowed.bool_not(), MASKED);
    }
    let [b, t] = targets.dims();
    crate::fused::log_softmax_last(scaled)
        .gather(2, targets.reshape([b, t, 1]))
        .reshape([b, t])
}

/// The mean of `values` over the positions where `mask` is 1 (token-mean aggregation);
/// positions where it is 0 contribute nothing, not even gradient.
///
/// # Shapes
/// - `values`, `mask`: `[batch, seq]`; returns `[1]`
pub fn masked_mean<B: Backend>(values: Tensor<B, 2>, mask: Tensor<B, 2>) -> Tensor<B, 1> {
    let count = mask.clone().sum().clamp_min(1.0);
    (values * mask).sum().div(count)
}
