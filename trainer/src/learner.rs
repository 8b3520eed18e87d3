//! The learner: the trainable policy, its optimiser, and one gradient step of the RL or SFT
//! objective.

use std::cell::OnceCell;

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, AdamConfig, GradientsAccumulator, GradientsParams, Optimizer};
use burn::tensor::IndexingUpdateOp;
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use sandgym_policy::{KvCache, PolicyModel, RowOutput, constant_cache, prefill};
use serde::{Deserialize, Serialize};

use crate::batch::{Sample, Tensors, context, context_len, tensors, tensors_after};
use crate::config::{Algo, KlMode, TrainConfig};
use crate::objective::{aggregate_part, kl_tensor, ppo_loss, scalar, value_loss};

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
    /// The gradient's global L2 norm before clipping.
    #[serde(default)]
    pub grad_norm: f64,
}

/// How a learner runs its forward and backward passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Passes {
    /// Episodes per forward/backward pass; an optimiser step accumulates the gradients of
    /// its minibatch's passes (the same step as one pass over all of it, in bounded memory).
    /// 0: the whole minibatch in one pass.
    pub micro_batch: usize,
    /// Encode each episode's prompt (every token before its first action) without gradient,
    /// each prompt prefix shared in the batch once, and run the gradient pass over the rest
    /// from that cache; a minibatch split into micro-batches goes through its passes in the
    /// order of its prompts, so a pass holds the samples that share one. The log-probs are
    /// exact; the gradient leaves out the path through the prompt's keys and values. For a
    /// pretrained model, whose prompt representation already reads, that is several times
    /// less work per step; a model learning from scratch needs the full gradient (off, the
    /// default).
    pub detach_prompt: bool,
}

/// A trainable policy with its Adam state.
pub struct Learner<B: AutodiffBackend> {
    /// The policy being trained.
    pub model: PolicyModel<B>,
    /// Its optimiser.
    pub optim: PolicyOptimizer<B>,
    /// The device it lives on.
    pub device: B::Device,
    /// How forward and backward passes are run.
    pub passes: Passes,
    vocab: usize,
}

impl<B: AutodiffBackend> std::fmt::Debug for Learner<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("vocab", &self.vocab)
            .finish_non_exhaustive()
    }
}

/// `samples` sorted by their contexts (the tokens before the first real choice; ties in
/// their given order): samples with the same prompt come together, and those whose prompts
/// share a longer prefix closer together than others. Cut into passes of a micro-batch, a
/// GRPO step's groups (one prompt each) then fill whole passes instead of being spread over
/// all of them: in the main job's update (eight groups of eight in passes of eight) a
/// shuffled pass held five to six prompts to encode, a sorted one holds one.
fn by_context<'a>(samples: &[&'a Sample]) -> Vec<&'a Sample> {
    let mut sorted = samples.to_vec();
    sorted.sort_by_cached_key(|s| context(s));
    sorted
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

/// The temperature-scaled, constraint-masked log-softmax of `logits`, the logits at the `k`
/// trainable rows of `t` ([`PolicyModel::forward_rows`]): `[k, vocab]`.
fn row_log_softmax<B: Backend>(
    logits: Tensor<B, 2>,
    t: &Tensors<B>,
    temperature: f32,
) -> Tensor<B, 2> {
    sandgym_policy::fused::log_softmax_last(logits.div_scalar(temperature) + t.row_bias.clone())
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
    logits: Tensor<B, 2>,
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
            passes: Passes::default(),
            vocab,
        }
    }

    /// A learner with a fresh optimiser set up as `optimiser` says (its gradient clipping and
    /// passes).
    pub fn for_config(
        model: PolicyModel<B>,
        vocab: usize,
        optimiser: &crate::OptimiserConfig,
        device: B::Device,
    ) -> Self {
        Self::new(model, vocab, optimiser.grad_clip, device).with_passes(optimiser.passes)
    }

    /// The same learner running its passes as `passes` says.
    pub fn with_passes(mut self, passes: Passes) -> Self {
        self.passes = passes;
        self
    }

    /// The minibatch `samples` in the parts one pass takes: with the prompt detached and
    /// the minibatch split, by their contexts ([`by_context`]), so a pass holds samples whose
    /// prompts share the most and its prefill encodes each shared prefix once (a GRPO group's
    /// one prompt, a database's schema). The step is the same whatever the order: each
    /// pass's loss is normalised over the whole minibatch and the gradients add up.
    fn parts<'a>(&self, samples: &[&'a Sample]) -> Vec<Vec<&'a Sample>> {
        let n = match self.passes.micro_batch {
            0 => samples.len(),
            m => m,
        }
        .max(1);
        let ordered = if self.passes.detach_prompt && n < samples.len() {
            by_context(samples)
        } else {
            samples.to_vec()
        };
        ordered.chunks(n).map(<[&Sample]>::to_vec).collect()
    }

    /// The policy without autodiff, for sampling.
    pub fn inference_model(&self) -> PolicyModel<B::InnerBackend> {
        self.model.valid().for_inference()
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
            let back = |x: Tensor<B::InnerBackend, 2>,
                        offsets: &[usize],
                        field: &mut dyn FnMut(usize, Vec<f32>)| {
                let width = x.dims()[1];
                let data: Vec<f32> = x.into_data().convert::<f32>().to_vec().expect("f32");
                for (r, row) in data.chunks(width).enumerate() {
                    let n = refs[r].len();
                    let mut full = vec![0.0; n];
                    full[offsets[r]..].copy_from_slice(&row[..n - offsets[r]]);
                    field(r, full);
                }
            };
            let mut old_values = Vec::new();
            let mut ref_logp = Vec::new();
            if values {
                // Every position's value (GAE reads them all): one full pass.
                let t = tensors::<B::InnerBackend>(&refs, self.vocab, &device);
                let out = forward_rows(&model, &t, None);
                back(out.values, &vec![0; refs.len()], &mut |_, v| {
                    old_values.push(v)
                });
            }
            if let Some(reference) = reference {
                let prompts = prefill_prompts(&refs, self.passes.detach_prompt, &device, || {
                    reference.clone()
                });
                let (out, t, offsets) =
                    pass_after(reference, &refs, prompts, self.vocab, &device, |c| c);
                let lp = target_logprobs(out.logits, &t, temperature);
                back(lp, &offsets, &mut |_, v| ref_logp.push(v));
            }
            for (s, v) in part.iter_mut().zip(old_values) {
                s.old_values = v;
            }
            for (s, v) in part.iter_mut().zip(ref_logp) {
                s.ref_logp = v;
            }
        }
    }

    /// The minibatch `samples` in its passes ([`Learner::parts`]), each with its prompts
    /// encoded without gradient where the prompt is detached. Every pass's prompts are
    /// encoded before the first gradient pass, all by one copy of the model with its
    /// adapters folded into the weights, which is then dropped: folding costs a tenth of a
    /// second for SmolLM2-135M (made for each pass, it was a quarter of the support agent's
    /// SFT step), and holding the folded copy through the gradient passes would hold 0.43 GB
    /// where the passes' prompt caches hold a fraction of that.
    fn prepared<'a>(
        &self,
        samples: &[&'a Sample],
    ) -> Vec<(Vec<&'a Sample>, Prompts<B::InnerBackend>)> {
        let frozen = OnceCell::new();
        self.parts(samples)
            .into_iter()
            .map(|part| {
                let prompts =
                    prefill_prompts(&part, self.passes.detach_prompt, &self.device, || {
                        frozen.get_or_init(|| self.inference_model()).clone()
                    });
                (part, prompts)
            })
            .collect()
    }

    /// The trained model's pass over `part` with gradient (from the first action on when the
    /// prompt is detached), from `prompts`.
    fn train_pass(
        &self,
        part: &[&Sample],
        prompts: Prompts<B::InnerBackend>,
    ) -> (RowOutput<B>, Tensors<B>) {
        let (out, t, _) = pass_after(
            &self.model,
            part,
            prompts,
            self.vocab,
            &self.device,
            constant_cache::<B>,
        );
        (out, t)
    }

    /// One optimiser step of the RL objective on `samples` (in passes of
    /// [`Passes::micro_batch`] episodes whose gradients add up to the minibatch's).
    pub fn rl_step(&mut self, samples: &[&Sample], config: &TrainConfig) -> StepStats {
        let whole = Whole::of(samples);
        let mut acc = GradientsAccumulator::<PolicyModel<B>>::new();
        let mut stats = StepStats {
            tokens: whole.tokens as usize,
            ..StepStats::default()
        };
        let agg = |l: Tensor<B, 2>, m: Tensor<B, 2>| {
            aggregate_part(l, m, config.objective.loss_agg, whole.tokens, whole.seqs)
        };
        let share =
            |l: Tensor<B, 2>, m: Tensor<B, 2>| scalar((l * m).sum()) / whole.tokens.max(1.0);
        for (part, prompts) in self.prepared(samples) {
            let (out, t) = self.train_pass(&part, prompts);
            let rows = row_log_softmax(out.logits, &t, config.rollout.temperature);
            let logp = picked(rows.clone(), &t);
            let (pg, clipped) = ppo_loss(
                logp.clone(),
                t.old_logp.clone(),
                t.adv.clone(),
                config.objective.clip_low,
                config.objective.clip_high,
                config.objective.dual_clip,
            );
            let pg_loss = agg(pg, t.mask.clone());
            stats.pg_loss += scalar(pg_loss.clone());
            stats.clip_frac += share(clipped, t.mask.clone());
            stats.ppo_kl += share(t.old_logp.clone() - logp.clone().detach(), t.mask.clone());
            let mut loss = pg_loss;
            if config.objective.kl.coef > 0.0 {
                let k = agg(
                    kl_tensor(logp, t.ref_logp.clone(), config.objective.kl.estimator),
                    t.mask.clone(),
                );
                stats.kl_ref += scalar(k.clone());
                if config.objective.kl.mode == KlMode::Loss {
                    loss = loss + k.mul_scalar(config.objective.kl.coef);
                }
            }
            let ent = entropy(rows, &t);
            stats.entropy += share(ent.clone().detach(), t.mask.clone());
            if config.objective.entropy_coef > 0.0 {
                loss = loss - agg(ent, t.mask.clone()).mul_scalar(config.objective.entropy_coef);
            }
            if config.algo == Algo::Ppo {
                let v = agg(
                    value_loss(
                        out.values,
                        t.old_values.clone(),
                        t.returns.clone(),
                        config.objective.vf_clip,
                    ),
                    t.mask.clone(),
                );
                stats.vf_loss += scalar(v.clone());
                loss = loss + v.mul_scalar(config.objective.vf_coef);
            }
            stats.loss += scalar(loss.clone());
            self.accumulate(&mut acc, loss);
        }
        stats.grad_norm = self.step(acc, config.optimiser.lr);
        stats
    }

    /// One optimiser step of supervised fine-tuning: the mean negative log-likelihood of the
    /// trainable tokens (the actions) of `samples`, each normalised over its allowed set
    /// ([`Sample::allowed`]; the whole vocabulary where it has none). Returns that loss.
    pub fn sft_step(&mut self, samples: &[&Sample], lr: f64) -> f64 {
        let whole = Whole::of(samples);
        let mut acc = GradientsAccumulator::<PolicyModel<B>>::new();
        let mut total = 0.0;
        for (part, prompts) in self.prepared(samples) {
            let (out, t) = self.train_pass(&part, prompts);
            let logp = target_logprobs(out.logits, &t, 1.0);
            let loss = (logp * t.mask)
                .sum()
                .div_scalar(whole.tokens.max(1.0))
                .neg();
            total += scalar(loss.clone());
            self.accumulate(&mut acc, loss);
        }
        self.step(acc, lr);
        total
    }

    fn accumulate(&self, acc: &mut GradientsAccumulator<PolicyModel<B>>, loss: Tensor<B, 1>) {
        let grads = GradientsParams::from_grads(loss.backward(), &self.model);
        acc.accumulate(&self.model, grads);
    }

    /// One optimiser step with the accumulated gradients; returns their global norm.
    fn step(&mut self, mut acc: GradientsAccumulator<PolicyModel<B>>, lr: f64) -> f64 {
        let grads = acc.grads();
        let norm = crate::norms::grad_norm(&self.model, &grads);
        self.model = self.optim.step(lr, self.model.clone(), grads);
        norm
    }
}

/// The size of a whole minibatch, which every pass's share of the loss is divided by.
#[derive(Clone, Copy, Debug)]
struct Whole {
    /// Trainable tokens.
    tokens: f64,
    /// Episodes.
    seqs: f64,
}

impl Whole {
    fn of(samples: &[&Sample]) -> Self {
        Self {
            tokens: samples
                .iter()
                .map(|s| s.mask.iter().filter(|&&m| m).count())
                .sum::<usize>() as f64,
            seqs: samples.len() as f64,
        }
    }
}

/// `model`'s pass over the batch `t`, continuing `cache` (if any): the logits at `t`'s
/// trainable rows and the values at every position.
fn forward_rows<B: Backend>(
    model: &PolicyModel<B>,
    t: &Tensors<B>,
    cache: Option<&mut KvCache<B>>,
) -> RowOutput<B> {
    model.forward_rows_packed(
        t.inputs.clone(),
        t.positions.clone(),
        t.bias.clone(),
        cache,
        t.rows.clone(),
        t.packing.as_ref(),
    )
}

/// The prompts of a pass encoded without gradient: the keys and values of each sample's
/// prompt (every token before its first real choice), each shared prefix once, and each
/// sample's offset (where its gradient pass starts); `None` where the pass runs whole.
struct Prompts<I: Backend> {
    encoded: Option<(KvCache<I>, Vec<Vec<bool>>)>,
    offsets: Vec<usize>,
}

/// The prompts of `samples` encoded through `inner` (the model without gradient tracking, on
/// `I`) when `detach` asks for it and every sample has one; otherwise nothing is encoded.
fn prefill_prompts<I: Backend>(
    samples: &[&Sample],
    detach: bool,
    device: &I::Device,
    inner: impl FnOnce() -> PolicyModel<I>,
) -> Prompts<I> {
    let offsets: Vec<usize> = samples.iter().map(|s| context_len(s)).collect();
    if !detach || offsets.contains(&0) {
        return Prompts {
            encoded: None,
            offsets: vec![0; samples.len()],
        };
    }
    let prompts: Vec<Vec<u32>> = samples
        .iter()
        .zip(&offsets)
        .map(|(s, &o)| s.inputs[..o].iter().map(|&t| t as u32).collect())
        .collect();
    let pre = prefill(&inner(), &prompts, device);
    Prompts {
        encoded: Some((pre.cache, pre.valid)),
        offsets,
    }
}

/// The forward pass of `samples` through `model`, with the tensors it was given and each
/// row's offset: all of every sample in one pass, or the rest after `prompts` from their
/// cache (`constant` turns it into `model`'s backend).
fn pass_after<B: Backend, I: Backend>(
    model: &PolicyModel<B>,
    samples: &[&Sample],
    prompts: Prompts<I>,
    vocab: usize,
    device: &B::Device,
    constant: impl FnOnce(KvCache<I>) -> KvCache<B>,
) -> (RowOutput<B>, Tensors<B>, Vec<usize>) {
    let Prompts { encoded, offsets } = prompts;
    let Some((cache, valid)) = encoded else {
        let t = tensors::<B>(samples, vocab, device);
        let out = forward_rows(model, &t, None);
        return (out, t, offsets);
    };
    let mut cache = constant(cache);
    let t = tensors_after::<B>(samples, &offsets, Some(&valid), vocab, device);
    let out = forward_rows(model, &t, Some(&mut cache));
    (out, t, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample of `prompt` then `answer` (the answer's targets trainable choices).
    fn sample(prompt: &[i64], answer: &[i64]) -> Sample {
        let tokens: Vec<i64> = prompt.iter().chain(answer).copied().collect();
        let n = tokens.len() - 1;
        Sample {
            inputs: tokens[..n].to_vec(),
            targets: tokens[1..].to_vec(),
            mask: (0..n).map(|j| j + 1 >= prompt.len()).collect(),
            allowed: vec![None; n],
            ..Sample::default()
        }
    }

    #[test]
    fn passes_hold_samples_of_one_prompt_together() {
        // Two GRPO groups over two prompts that share their first token, interleaved; the
        // answers differ, and an answer that sorts first must not move its sample ahead of
        // its prompt's group.
        let data = [
            sample(&[1, 2, 3], &[9, 9]),
            sample(&[1, 5, 6], &[1, 1]),
            sample(&[1, 2, 3], &[0, 7]),
            sample(&[1, 5, 6], &[8]),
        ];
        let refs: Vec<&Sample> = data.iter().collect();
        let sorted = by_context(&refs);
        let prompts: Vec<&[i64]> = sorted.iter().map(|s| &s.inputs[..2]).collect();
        assert_eq!(prompts, [&[1, 2][..], &[1, 2], &[1, 5], &[1, 5]]);
        // Ties keep their order: within a prompt, the samples as given.
        assert!(std::ptr::eq(sorted[0], &data[0]) && std::ptr::eq(sorted[1], &data[2]));
        assert!(std::ptr::eq(sorted[2], &data[1]) && std::ptr::eq(sorted[3], &data[3]));
    }
}
