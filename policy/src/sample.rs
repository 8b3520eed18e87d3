//! Batched generation with a KV cache, temperature, top-p and the tool-call constraint.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use sandgym_env_api::SplitMix64;

use crate::cache::SeqCache;
use crate::decoder::{Decoder, RowRequest};
use crate::model::PolicyModel;
use crate::prefill::{PREFILL_SCORES, ints, prefill, prefill_continuing};
use crate::{Result, TokenMask, ToolCallMatcher};

/// Sampling settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleConfig {
    /// Softmax temperature (> 0); 0 picks the most likely allowed token (greedy), and the
    /// recorded log-prob is then 0 (the choice was certain).
    pub temperature: f32,
    /// Nucleus sampling threshold in (0, 1]; 1 disables it.
    pub top_p: f32,
    /// Most tokens generated per sequence.
    pub max_new_tokens: usize,
    /// Seed of the sampler.
    pub seed: u64,
}

impl Default for SampleConfig {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens: 128,
            seed: 0,
        }
    }
}

/// One generated continuation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampled {
    /// The sampled token ids (the closing end token included when reached).
    pub tokens: Vec<u32>,
    /// The log-prob of each sampled token under the distribution it was drawn from: the
    /// model's logits divided by the temperature, restricted to the tokens the constraint
    /// allowed (and to the top-p nucleus), renormalised.
    pub logprobs: Vec<f32>,
    /// Whether the sequence ended (end token or constraint complete) within the budget.
    pub finished: bool,
    /// For each sampled token, the tokens the constraint allowed at that point (`None` when
    /// the row had no constraint). Training recomputes log-probs under these same masks.
    pub allowed: Vec<Option<TokenMask>>,
}

/// A row-major float matrix pulled off the device.
pub(crate) fn rows<B: Backend>(t: Tensor<B, 2>) -> Vec<Vec<f32>> {
    let [_, n] = t.dims();
    let data: Vec<f32> = t.into_data().convert::<f32>().to_vec().expect("f32 data");
    data.chunks(n).map(<[f32]>::to_vec).collect()
}

/// Log-softmax of `logits / temperature` over the allowed tokens, in f64.
pub fn masked_log_softmax(logits: &[f32], allowed: Option<&[bool]>, temperature: f32) -> Vec<f64> {
    let ok = |i: usize| allowed.is_none_or(|m| m[i]);
    let scaled: Vec<f64> = logits
        .iter()
        .map(|&l| f64::from(l) / f64::from(temperature))
        .collect();
    let max = (0..scaled.len())
        .filter(|&i| ok(i))
        .map(|i| scaled[i])
        .fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = (0..scaled.len())
        .filter(|&i| ok(i))
        .map(|i| (scaled[i] - max).exp())
        .sum();
    let log_z = max + sum.ln();
    (0..scaled.len())
        .map(|i| {
            if ok(i) {
                scaled[i] - log_z
            } else {
                f64::NEG_INFINITY
            }
        })
        .collect()
}

/// Draws from log-probs with an optional top-p nucleus; returns the token and its log-prob
/// under the distribution actually sampled from.
pub(crate) fn draw(logp: &[f64], top_p: f32, rng: &mut SplitMix64) -> (u32, f64) {
    if top_p >= 1.0 {
        // No nucleus: draw in vocabulary order, without sorting a 49k-entry vocabulary for
        // every token of every row.
        let mut u = rng.next_f64();
        let mut pick = None;
        for (i, &lp) in logp.iter().enumerate() {
            if lp.is_finite() {
                pick = Some(i);
                u -= lp.exp();
                if u <= 0.0 {
                    break;
                }
            }
        }
        let pick = pick.expect("at least one allowed token");
        return (pick as u32, logp[pick]);
    }
    let mut order: Vec<usize> = (0..logp.len()).filter(|&i| logp[i].is_finite()).collect();
    order.sort_by(|&a, &b| logp[b].total_cmp(&logp[a]).then(a.cmp(&b)));
    let mut kept = Vec::new();
    let mut mass = 0.0;
    for &i in &order {
        kept.push(i);
        mass += logp[i].exp();
        if mass >= f64::from(top_p) {
            break;
        }
    }
    let mut u = rng.next_f64() * mass;
    let mut pick = *kept.last().expect("at least one allowed token");
    for &i in &kept {
        u -= logp[i].exp();
        if u <= 0.0 {
            pick = i;
            break;
        }
    }
    (pick as u32, logp[pick] - mass.ln())
}

/// Generates a continuation of every prompt at once: the prompts are encoded into one KV cache
/// with each shared prefix encoded once ([`prefill`](crate::prefill())), then extended token
/// by token from it. A row with a
/// constraint samples only allowed tokens and stops when the constraint completes; a row
/// without one stops at `end`.
pub fn generate<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
) -> Result<Vec<Sampled>> {
    generate_with(
        model,
        prompts,
        constraints,
        end,
        config,
        device,
        &RowControl::default(),
    )
}

/// Per-row controls of [`generate_with`], for a server whose batch rows belong to different
/// clients: each row's own token budget, and a check that ends a row early (its client left).
/// A row ended either way is not `finished`; the batch stops when no row is left running.
#[derive(Clone, Copy, Default)]
pub struct RowControl<'a> {
    /// Each row's most new tokens; [`SampleConfig::max_new_tokens`] bounds them all.
    pub max_new_tokens: Option<&'a [usize]>,
    /// Asked once per running row and step: `true` ends the row.
    pub stop: Option<&'a (dyn Fn(usize) -> bool + Sync)>,
}

impl std::fmt::Debug for RowControl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowControl")
            .field("max_new_tokens", &self.max_new_tokens)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

/// [`generate`] with per-row controls.
///
/// Tokens the grammar forces (the `{"thought":` of every action, a closing `"}`, the end
/// of the turn …) are recorded as certain (log-prob 0, a one-hot mask) without a look at the
/// model's logits; those forced before the first choice go in with the prompt (shared with
/// the prefill), the others are fed one per step. (Feeding a row's whole forced run in one
/// step pads every other row to its length: measured slower at batch 64.)
pub fn generate_with<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
    control: &RowControl<'_>,
) -> Result<Vec<Sampled>> {
    let (sampled, _) = generate_from(
        model,
        prompts,
        None,
        false,
        constraints,
        end,
        config,
        device,
        control,
    )?;
    Ok(sampled)
}

/// [`generate`] continuing cached sequences: where every row's `bases[r]` encodes a strict
/// prefix of its prompt ([`SeqCache::continues`]; an earlier call's output for the same
/// episode), only the rest of each prompt is encoded ([`prefill_continuing`]); otherwise
/// the prompts are encoded whole, as by [`generate`]. Returns the samples and each row's
/// cache of its prompt (with the tokens the grammar forced before the first choice), to
/// continue on the next turn. The samples are those of [`generate`] on the same prompts.
pub fn generate_continuing<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    bases: &[Option<SeqCache<B>>],
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
) -> Result<(Vec<Sampled>, Vec<SeqCache<B>>)> {
    assert_eq!(bases.len(), prompts.len(), "one base slot per prompt");
    let (sampled, caches) = generate_from(
        model,
        prompts,
        Some(bases),
        true,
        constraints,
        end,
        config,
        device,
        &RowControl::default(),
    )?;
    Ok((sampled, caches.unwrap_or_default()))
}

/// [`generate_continuing`] for a turn no other follows (an episode's last allowed turn): the
/// bases are continued as there, but no cache of the prompts is kept. The kept caches share
/// the prompts' buffers, so keeping them makes decoding's first write copy every row's keys
/// and values (about 1 GB at 63 rows of 357 slots of SmolLM2-135M); without them it writes
/// in place. The samples are those of [`generate_continuing`].
pub fn generate_continuing_last<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    bases: &[Option<SeqCache<B>>],
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
) -> Result<Vec<Sampled>> {
    assert_eq!(bases.len(), prompts.len(), "one base slot per prompt");
    let (sampled, _) = generate_from(
        model,
        prompts,
        Some(bases),
        false,
        constraints,
        end,
        config,
        device,
        &RowControl::default(),
    )?;
    Ok(sampled)
}

/// The samples of a batch and, when asked for, each row's cache of its prompt.
type Continued<B> = (Vec<Sampled>, Option<Vec<SeqCache<B>>>);

/// [`generate_with`], continuing `bases` where given (see [`generate_continuing`]), and then,
/// with `keep`, returning the prompts' caches: one batch run to its end on a [`Decoder`].
#[allow(clippy::too_many_arguments)]
fn generate_from<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    bases: Option<&[Option<SeqCache<B>>]>,
    keep: bool,
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
    control: &RowControl<'_>,
) -> Result<Continued<B>> {
    let b = prompts.len();
    assert_eq!(constraints.len(), b, "one constraint slot per prompt");
    if b == 0 {
        return Ok((Vec::new(), keep.then(Vec::new)));
    }
    let requests = prompts
        .iter()
        .zip(constraints.iter_mut())
        .enumerate()
        .map(|(r, (prompt, constraint))| RowRequest {
            id: r,
            prompt: prompt.clone(),
            constraint: constraint.take(),
            temperature: config.temperature,
            top_p: config.top_p,
            max_new_tokens: control
                .max_new_tokens
                .and_then(|l| l.get(r).copied())
                .unwrap_or(usize::MAX)
                .min(config.max_new_tokens),
            seed: config.seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        })
        .collect();
    let mut decoder = Decoder::new(model, end, device);
    let mut kept = None;
    decoder.admit_with(requests, |extended| {
        // Continue the bases when every row has one that fits (a mix would pad every row to
        // the longest whole prompt).
        let continued: Option<Vec<&SeqCache<B>>> = bases.and_then(|bases| {
            bases
                .iter()
                .zip(extended)
                .map(|(base, p)| base.as_ref().filter(|c| c.continues(p)))
                .collect()
        });
        let encoded = match &continued {
            Some(rows) => prefill_continuing(model, rows, extended, PREFILL_SCORES, device),
            None => prefill(model, extended, device),
        };
        // The prompts' cache as it is now, before decoding extends it (its tensors shared, not
        // copied here; decoding's first write then copies the buffers it shares with them,
        // which is why a last turn keeps none).
        kept = keep.then(|| {
            encoded
                .cache
                .clone()
                .into_rows(encoded.valid.clone(), extended)
        });
        encoded
    });
    let stop = |r: usize| control.stop.is_some_and(|stop| stop(r));
    let mut results: Vec<Option<Result<Sampled>>> = (0..b).map(|_| None).collect();
    loop {
        decoder.step(&stop);
        for done in decoder.done() {
            constraints[done.id] = done.constraint;
            results[done.id] = Some(done.result);
        }
        if decoder.is_idle() {
            break;
        }
    }
    let sampled = results
        .into_iter()
        .map(|r| r.expect("every row ends"))
        .collect::<Result<Vec<_>>>()?;
    Ok((sampled, kept))
}

/// The constraint masks under which `tokens` were generated, recomputed by replaying the
/// grammar: exactly what [`generate`] records in [`Sampled::allowed`] (a one-hot mask for a
/// token the grammar forced), for tokens that arrive without their masks, e.g. through an
/// HTTP API. Fails when a token is not one the grammar allows at its place.
pub fn replay_masks(
    matcher: &mut ToolCallMatcher,
    tokens: &[u32],
    vocab: usize,
) -> Result<Vec<Option<TokenMask>>> {
    let mut pending = std::collections::VecDeque::new();
    let mut out = Vec::with_capacity(tokens.len());
    for &token in tokens {
        if token as usize >= vocab {
            return Err(crate::PolicyError::Disallowed {
                token,
                reason: format!("outside the vocabulary of {vocab}"),
            });
        }
        if pending.is_empty() {
            pending = matcher.forced().into();
        }
        let mask = if let Some(forced) = pending.pop_front() {
            if forced != token {
                return Err(crate::PolicyError::Disallowed {
                    token,
                    reason: format!("the grammar forces token {forced} here"),
                });
            }
            TokenMask::only(token as usize, vocab)
        } else {
            let mask = matcher.allowed()?;
            if !mask.get(token as usize).copied().unwrap_or(false) {
                return Err(crate::PolicyError::Disallowed {
                    token,
                    reason: "not allowed by the grammar here".into(),
                });
            }
            TokenMask::from_bools(&mask)
        };
        matcher.consume(token)?;
        out.push(Some(mask));
    }
    Ok(out)
}

/// Log-probs of `continuation` after `prompt` from one full forward pass (no cache), each under
/// the same masked, temperature-scaled distribution sampling uses (`masks[i]` for token `i`,
/// `None` for unconstrained).
pub fn sequence_logprobs<B: Backend>(
    model: &PolicyModel<B>,
    prompt: &[u32],
    continuation: &[u32],
    masks: &[Option<TokenMask>],
    temperature: f32,
    device: &B::Device,
) -> Vec<f32> {
    let all: Vec<i64> = prompt
        .iter()
        .chain(continuation)
        .map(|&t| i64::from(t))
        .collect();
    let n = all.len();
    let valid = vec![vec![true; n]];
    let out = model.forward(
        ints(all, [1, n], device),
        ints((0..n as i64).collect(), [1, n], device),
        crate::attention_bias(&valid, n, device),
        None,
    );
    let vocab = out.logits.dims()[2];
    let logits = rows(out.logits.reshape([n, vocab]));
    continuation
        .iter()
        .enumerate()
        .map(|(i, &tok)| {
            let row = &logits[prompt.len() + i - 1];
            let mask = masks
                .get(i)
                .and_then(Option::as_ref)
                .map(TokenMask::to_bools);
            masked_log_softmax(row, mask.as_deref(), temperature)[tok as usize] as f32
        })
        .collect()
}
