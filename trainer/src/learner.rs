//! The learner: the trainable policy, its optimiser, and one gradient step of the RL or SFT
//! objective.

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, AdamConfig, GradientsParams, Optimizer};
use burn::tensor::IndexingUpdateOp;
use burn::tensor::Tensor;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use sandgym_policy::{PolicyModel, masked_mean};
use serde::{Deserialize, Serialize};

use crate::batch::{Sample, Tensors, tensors};
use crate::config::{Algo, KlMode, TrainConfig};
use crate::objective::{aggregate_tensor, kl_tensor, ppo_loss, scalar, value_loss};

/// The optimiser type of the learner.
pub type PolicyOptimizer<B> = OptimizerAdaptor<Adam, PolicyModel<B>, B>;

/// Figures of one gradient step (means over its trainable tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    /// The total loss.
    pub loss: f64,
    /// The policy-gradient part.
    pub pg_loss: f64,
    /// The value part (PPO).
    pub vf_loss: f64,
    /// KL to the reference (when enabled).
    pub kl_ref: f64,
    /// Entropy of the sampling distribution (masked by the constraint).
    pub entropy: f64,
    /// Fraction of tokens whose ratio was clipped.
    pub clip_frac: f64,
    /// Approximate KL between the sampling policy and the updated one.
    pub ppo_kl: f64,
    /// Trainable tokens in the step.
    pub tokens: usize,
}

/// A trainable policy with its Adam state.
pub struct Learner<B: AutodiffBackend> {
    /// The policy being trained.
    pub model: PolicyModel<B>,
    /// Its optimiser.
    pub optim: PolicyOptimizer<B>,
    /// The device it lives on.
    pub device: B::Device,
    vocab: usize,
}

impl<B: AutodiffBackend> std::fmt::Debug for Learner<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("vocab", &self.vocab)
            .finish_non_exhaustive()
    }
}

/// The Adam configuration of a run (gradient clipping by each parameter's norm).
pub fn adam(grad_clip: f64) -> AdamConfig {
    let config = AdamConfig::new().with_epsilon(1e-8);
    if grad_clip > 0.0 {
        config.with_grad_clipping(Some(burn::grad_clipping::GradientClippingConfig::Norm(
            grad_clip as f32,
        )))
    } else {
        config
    }
}

/// The temperature-scaled, constraint-masked log-softmax of the logits at the trainable rows
/// of `t`: `[k, vocab]`.
fn row_log_softmax<B: Backend>(
    logits: Tensor<B, 3>,
    t: &Tensors<B>,
    temperature: f32,
) -> Tensor<B, 2> {
    let [b, n, v] = logits.dims();
    let rows = logits
        .reshape([b * n, v])
        .select(0, t.rows.clone())
        .div_scalar(temperature)
        + t.row_bias.clone();
    log_softmax(rows, 1)
}

/// Per-row values `[k]` placed back at their `[b, n]` positions (0 elsewhere).
fn unselect<B: Backend>(values: Tensor<B, 1>, t: &Tensors<B>) -> Tensor<B, 2> {
    let [b, n] = t.targets.dims();
    Tensor::zeros([b * n], &values.device())
        .select_assign(0, t.rows.clone(), values, IndexingUpdateOp::Add)
        .reshape([b, n])
}

/// The log-prob of each trainable target, from the rows of [`row_log_softmax`] (0 at other
/// positions): `[b, n]`.
fn picked<B: Backend>(rows: Tensor<B, 2>, t: &Tensors<B>) -> Tensor<B, 2> {
    let k = t.row_targets.dims()[0];
    let lp = rows
        .gather(1, t.row_targets.clone().reshape([k, 1]))
        .reshape([k]);
    unselect(lp, t)
}

/// The log-prob of each trainable target under the masked, temperature-scaled distribution
/// (0 at other positions): `[b, n]`. Only the trainable rows of the logits are normalised.
fn target_logprobs<B: Backend>(
    logits: Tensor<B, 3>,
    t: &Tensors<B>,
    temperature: f32,
) -> Tensor<B, 2> {
    picked(row_log_softmax(logits, t, temperature), t)
}

/// Entropy of the distribution of each row of [`row_log_softmax`] at its trainable position
/// (0 elsewhere): `[b, n]`.
fn entropy<B: Backend>(rows: Tensor<B, 2>, t: &Tensors<B>) -> Tensor<B, 2> {
    let k = t.row_targets.dims()[0];
    let h = (rows.clone().exp() * rows).sum_dim(1).neg().reshape([k]);
    unselect(h, t)
}

impl<B: AutodiffBackend> Learner<B> {
    /// A learner for `model` (over a `vocab`-token vocabulary) with a fresh optimiser.
    pub fn new(model: PolicyModel<B>, vocab: usize, grad_clip: f64, device: B::Device) -> Self {
        Self {
            model,
            optim: adam(grad_clip).init(),
            device,
            vocab,
        }
    }

    /// The policy without autodiff, for sampling.
    pub fn inference_model(&self) -> PolicyModel<B::InnerBackend> {
        self.model.valid()
    }

    /// Fills `old_values` (for PPO) and `ref_logp` (when a reference is given) of `samples`
    /// with forward passes that need no gradient.
    pub fn score(
        &self,
        samples: &mut [Sample],
        values: bool,
        reference: Option<&PolicyModel<B::InnerBackend>>,
        temperature: f32,
        chunk: usize,
    ) {
        if !values && reference.is_none() {
            return;
        }
        let model = self.inference_model();
        let device = self.device.clone();
        for part in samples.chunks_mut(chunk.max(1)) {
            let refs: Vec<&Sample> = part.iter().collect();
            let t = tensors::<B::InnerBackend>(&refs, self.vocab, &device);
            let width = t.inputs.dims()[1];
            let rows = |x: Tensor<B::InnerBackend, 2>| -> Vec<Vec<f32>> {
                let data: Vec<f32> = x.into_data().convert::<f32>().to_vec().expect("f32");
                data.chunks(width).map(<[f32]>::to_vec).collect()
            };
            if values {
                let out =
                    model.forward(t.inputs.clone(), t.positions.clone(), t.bias.clone(), None);
                for (s, v) in part.iter_mut().zip(rows(out.values)) {
                    s.old_values = v[..s.len()].to_vec();
                }
            }
            if let Some(reference) = reference {
                let out =
                    reference.forward(t.inputs.clone(), t.positions.clone(), t.bias.clone(), None);
                let lp = target_logprobs(out.logits, &t, temperature);
                for (s, v) in part.iter_mut().zip(rows(lp)) {
                    s.ref_logp = v[..s.len()].to_vec();
                }
            }
        }
    }

    /// One optimiser step of the RL objective on `samples`.
    pub fn rl_step(&mut self, samples: &[&Sample], config: &TrainConfig) -> StepStats {
        let t = tensors::<B>(samples, self.vocab, &self.device);
        let out = self
            .model
            .forward(t.inputs.clone(), t.positions.clone(), t.bias.clone(), None);
        let rows = row_log_softmax(out.logits, &t, config.temperature);
        let logp = picked(rows.clone(), &t);
        let (pg, clipped) = ppo_loss(
            logp.clone(),
            t.old_logp.clone(),
            t.adv.clone(),
            config.clip_low,
            config.clip_high,
            config.dual_clip,
        );
        let pg_loss = aggregate_tensor(pg, t.mask.clone(), config.loss_agg);
        let mut stats = StepStats {
            pg_loss: scalar(pg_loss.clone()),
            clip_frac: scalar(masked_mean(clipped, t.mask.clone())),
            ppo_kl: scalar(masked_mean(
                t.old_logp.clone() - logp.clone().detach(),
                t.mask.clone(),
            )),
            tokens: t.tokens,
            ..StepStats::default()
        };
        let mut loss = pg_loss;
        if config.kl.coef > 0.0 {
            let k = kl_tensor(logp, t.ref_logp.clone(), config.kl.estimator);
            let k = aggregate_tensor(k, t.mask.clone(), config.loss_agg);
            stats.kl_ref = scalar(k.clone());
            if config.kl.mode == KlMode::Loss {
                loss = loss + k.mul_scalar(config.kl.coef);
            }
        }
        let ent = entropy(rows, &t);
        stats.entropy = scalar(masked_mean(ent.clone().detach(), t.mask.clone()));
        if config.entropy_coef > 0.0 {
            loss = loss
                - aggregate_tensor(ent, t.mask.clone(), config.loss_agg)
                    .mul_scalar(config.entropy_coef);
        }
        if config.algo == Algo::Ppo {
            let v = value_loss(out.values, t.old_values, t.returns, config.vf_clip);
            let v = aggregate_tensor(v, t.mask.clone(), config.loss_agg);
            stats.vf_loss = scalar(v.clone());
            loss = loss + v.mul_scalar(config.vf_coef);
        }
        stats.loss = scalar(loss.clone());
        self.apply(loss, config.lr);
        stats
    }

    /// One optimiser step of supervised fine-tuning: the mean negative log-likelihood of the
    /// trainable tokens (the actions) of `samples`, each normalised over its allowed set
    /// ([`Sample::allowed`]; the whole vocabulary where it has none). Returns that loss.
    pub fn sft_step(&mut self, samples: &[&Sample], lr: f64) -> f64 {
        let t = tensors::<B>(samples, self.vocab, &self.device);
        let out = self
            .model
            .forward(t.inputs.clone(), t.positions.clone(), t.bias.clone(), None);
        let logp = target_logprobs(out.logits, &t, 1.0);
        let loss = masked_mean(logp, t.mask).neg();
        let value = scalar(loss.clone());
        self.apply(loss, lr);
        value
    }

    fn apply(&mut self, loss: Tensor<B, 1>, lr: f64) {
        let grads = loss.backward();
        let grads = GradientsParams::from_grads(grads, &self.model);
        self.model = self.optim.step(lr, self.model.clone(), grads);
    }
}
