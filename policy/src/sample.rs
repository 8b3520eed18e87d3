//! Batched generation with a KV cache, temperature, top-p and the tool-call constraint.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use sandgym_env_api::SplitMix64;

use crate::cache::SeqCache;
use crate::model::PolicyModel;
use crate::prefill::{PREFILL_SCORES, ints, prefill, prefill_continuing};
use crate::{Result, ToolCallMatcher};

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
    pub allowed: Vec<Option<Vec<bool>>>,
}

/// A row-major float matrix pulled off the device.
fn rows<B: Backend>(t: Tensor<B, 2>) -> Vec<Vec<f32>> {
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
fn draw(logp: &[f64], top_p: f32, rng: &mut SplitMix64) -> (u32, f64) {
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

impl RowControl<'_> {
    fn ends(&self, row: usize, generated: usize) -> bool {
        self.max_new_tokens
            .is_some_and(|limits| limits.get(row).is_some_and(|&n| generated >= n))
            || self.stop.is_some_and(|stop| stop(row))
    }
}

/// Marks the rows that have finished, spent `max_new_tokens` or that `control` ends; true when
/// none is left running.
fn all_ended(
    ended: &mut [bool],
    results: &[Sampled],
    control: &RowControl<'_>,
    max_new_tokens: usize,
) -> bool {
    for (r, (e, s)) in ended.iter_mut().zip(results).enumerate() {
        *e =
            *e || s.finished || s.tokens.len() >= max_new_tokens || control.ends(r, s.tokens.len());
    }
    ended.iter().all(|&e| e)
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
        constraints,
        end,
        config,
        device,
        &RowControl::default(),
    )?;
    Ok((sampled, caches.unwrap_or_default()))
}

/// The samples of a batch and, when asked for, each row's cache of its prompt.
type Continued<B> = (Vec<Sampled>, Option<Vec<SeqCache<B>>>);

/// [`generate_with`], continuing `bases` where given (see [`generate_continuing`]), and then
/// returning the prompts' caches.
#[allow(clippy::too_many_arguments)]
fn generate_from<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    bases: Option<&[Option<SeqCache<B>>]>,
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
    control: &RowControl<'_>,
) -> Result<Continued<B>> {
    let b = prompts.len();
    assert_eq!(constraints.len(), b, "one constraint slot per prompt");
    if b == 0 {
        return Ok((Vec::new(), bases.map(|_| Vec::new())));
    }
    assert!(
        prompts.iter().all(|p| !p.is_empty()),
        "prompts must not be empty"
    );
    let vocab = model.vocab_size();
    let mut results = vec![Sampled::default(); b];
    let budget = |r: usize| {
        control
            .max_new_tokens
            .and_then(|l| l.get(r).copied())
            .unwrap_or(usize::MAX)
            .min(config.max_new_tokens)
    };
    // Records the tokens the grammar forces next on row `r` (within its budget), returning
    // them to be fed.
    let drain = |r: usize, m: &mut ToolCallMatcher, s: &mut Sampled| -> Result<Vec<u32>> {
        let mut fed = Vec::new();
        while !s.finished && s.tokens.len() < budget(r) {
            let forced = m.forced_next();
            if forced.is_empty() {
                break;
            }
            for token in forced {
                if s.finished || s.tokens.len() >= budget(r) {
                    break;
                }
                m.consume(token)?;
                let mut only = vec![false; vocab];
                only[token as usize] = true;
                s.tokens.push(token);
                s.logprobs.push(0.0);
                s.allowed.push(Some(only));
                s.finished = m.is_finished();
                fed.push(token);
            }
        }
        Ok(fed)
    };
    let mut extended = prompts.to_vec();
    for (r, c) in constraints.iter_mut().enumerate() {
        if let Some(m) = c.as_mut() {
            let fed = drain(r, m, &mut results[r])?;
            extended[r].extend(fed);
        }
    }
    // Continue the bases when every row has one that fits (a mix would pad every row to
    // the longest whole prompt).
    let continued: Option<Vec<&SeqCache<B>>> = bases.and_then(|bases| {
        bases
            .iter()
            .zip(&extended)
            .map(|(base, p)| base.as_ref().filter(|c| c.continues(p)))
            .collect()
    });
    let crate::Prefill {
        mut cache,
        mut valid,
        mut next_pos,
        logits,
    } = match &continued {
        Some(rows) => prefill_continuing(model, rows, &extended, PREFILL_SCORES, device),
        None => prefill(model, &extended, device),
    };
    // The prompts' cache as it is now, before decoding extends it (tensors are shared, not
    // copied: the decode's appends make new ones).
    let kept = bases.map(|_| cache.clone().into_rows(valid.clone(), &extended));
    // The batch rows still decoding: the cache, `valid`, `next_pos` and `last` hold one row
    // for each, in this order. Rows that end are dropped once a quarter of the batch has
    // (copying the cache then costs less than carrying them through every later step).
    let mut active: Vec<usize> = (0..b).collect();
    let mut last = rows(logits);
    let mut rngs: Vec<SplitMix64> = (0..b)
        .map(|r| SplitMix64::new(config.seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let mut ended = vec![false; b];
    // Per row, tokens recorded but not yet fed to the model.
    let mut queued: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); b];
    loop {
        if all_ended(&mut ended, &results, control, config.max_new_tokens) {
            break;
        }
        for (i, &r) in active.iter().enumerate() {
            if ended[r] || !queued[r].is_empty() {
                continue;
            }
            let mask = match constraints[r].as_mut() {
                Some(m) => Some(m.allowed()?),
                None => None,
            };
            let (token, lp) = if config.temperature > 0.0 {
                let logp = masked_log_softmax(&last[i], mask.as_deref(), config.temperature);
                draw(&logp, config.top_p, &mut rngs[r])
            } else {
                let logp = masked_log_softmax(&last[i], mask.as_deref(), 1.0);
                let best = (0..logp.len())
                    .filter(|&i| logp[i].is_finite())
                    .max_by(|&a, &b| logp[a].total_cmp(&logp[b]).then(b.cmp(&a)))
                    .expect("at least one allowed token");
                (best as u32, 0.0)
            };
            let s = &mut results[r];
            s.tokens.push(token);
            s.logprobs.push(lp as f32);
            s.allowed.push(mask);
            queued[r].push_back(token);
            match constraints[r].as_mut() {
                Some(m) => {
                    m.consume(token)?;
                    s.finished = m.is_finished();
                    let forced = drain(r, m, s)?;
                    queued[r].extend(forced);
                }
                None => s.finished = token == end,
            }
        }
        if all_ended(&mut ended, &results, control, config.max_new_tokens) {
            break;
        }
        let running = active.iter().filter(|&&r| !ended[r]).count();
        if running * 4 <= active.len() * 3 {
            let keep: Vec<usize> = (0..active.len()).filter(|&i| !ended[active[i]]).collect();
            cache = cache.select(&keep);
            valid = keep
                .iter()
                .map(|&i| std::mem::take(&mut valid[i]))
                .collect();
            next_pos = keep.iter().map(|&i| next_pos[i]).collect();
            active = keep.iter().map(|&i| active[i]).collect();
        }
        let n = active.len();
        let (mut tokens, mut positions) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, &r) in active.iter().enumerate() {
            let next = if ended[r] {
                None
            } else {
                queued[r].pop_front()
            };
            tokens.push(next.map_or(0, i64::from));
            positions.push(next_pos[i]);
            valid[i].push(next.is_some());
            if next.is_some() {
                next_pos[i] += 1;
            }
        }
        let out = model.forward(
            ints(tokens, [n, 1], device),
            ints(positions, [n, 1], device),
            crate::attention_bias(&valid, 1, device),
            Some(&mut cache),
        );
        last = rows(out.logits.reshape([n, vocab]));
    }
    Ok((results, kept))
}

/// The constraint masks under which `tokens` were generated, recomputed by replaying the
/// grammar: exactly what [`generate`] records in [`Sampled::allowed`] (a one-hot mask for a
/// token the grammar forced), for tokens that arrive without their masks, e.g. through an
/// HTTP API. Fails when a token is not one the grammar allows at its place.
pub fn replay_masks(
    matcher: &mut ToolCallMatcher,
    tokens: &[u32],
    vocab: usize,
) -> Result<Vec<Option<Vec<bool>>>> {
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
            let mut only = vec![false; vocab];
            only[token as usize] = true;
            only
        } else {
            let mask = matcher.allowed()?;
            if !mask.get(token as usize).copied().unwrap_or(false) {
                return Err(crate::PolicyError::Disallowed {
                    token,
                    reason: "not allowed by the grammar here".into(),
                });
            }
            mask
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
    masks: &[Option<Vec<bool>>],
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
            masked_log_softmax(row, masks.get(i).and_then(|m| m.as_deref()), temperature)
                [tok as usize] as f32
        })
        .collect()
}
