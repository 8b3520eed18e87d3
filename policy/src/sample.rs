//! Batched generation with a KV cache, temperature, top-p and the tool-call constraint.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use sandgym_env_api::SplitMix64;

use crate::cache::KvCache;
use crate::model::PolicyModel;
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

/// The attention bias for `queries` new positions over `keys` cached+new positions.
fn bias<B: Backend>(valid: &[Vec<bool>], queries: usize, device: &B::Device) -> Tensor<B, 4> {
    let b = valid.len();
    let keys = valid[0].len();
    let mut data = vec![f32::NEG_INFINITY; b * queries * keys];
    for (r, row) in valid.iter().enumerate() {
        for q in 0..queries {
            let qi = keys - queries + q;
            for k in 0..=qi {
                if row[k] || k == qi {
                    data[(r * queries + q) * keys + k] = 0.0;
                }
            }
        }
    }
    Tensor::from_data(TensorData::new(data, [b, 1, queries, keys]), device)
}

fn ints<B: Backend>(values: Vec<i64>, shape: [usize; 2], device: &B::Device) -> Tensor<B, 2, Int> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Generates a continuation of every prompt at once: prompts are left-padded into one batch,
/// encoded in one pass, then extended token by token from the KV cache. A row with a
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

/// Marks the rows that have finished or that `control` ends; true when none is left running.
fn all_ended(ended: &mut [bool], results: &[Sampled], control: &RowControl<'_>) -> bool {
    for (r, (e, s)) in ended.iter_mut().zip(results).enumerate() {
        *e = *e || s.finished || control.ends(r, s.tokens.len());
    }
    ended.iter().all(|&e| e)
}

/// [`generate`] with per-row controls.
pub fn generate_with<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    constraints: &mut [Option<ToolCallMatcher>],
    end: u32,
    config: &SampleConfig,
    device: &B::Device,
    control: &RowControl<'_>,
) -> Result<Vec<Sampled>> {
    let b = prompts.len();
    assert_eq!(constraints.len(), b, "one constraint slot per prompt");
    assert!(
        prompts.iter().all(|p| !p.is_empty()),
        "prompts must not be empty"
    );
    let width = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let mut valid: Vec<Vec<bool>> = Vec::with_capacity(b);
    let (mut tokens, mut positions) = (Vec::new(), Vec::new());
    for p in prompts {
        let pad = width - p.len();
        valid.push((0..width).map(|j| j >= pad).collect());
        tokens.extend(
            (0..pad)
                .map(|_| 0i64)
                .chain(p.iter().map(|&t| i64::from(t))),
        );
        positions.extend((0..pad).map(|_| 0i64).chain(0..p.len() as i64));
    }
    let mut next_pos: Vec<i64> = prompts.iter().map(|p| p.len() as i64).collect();
    let mut cache = KvCache::new(model.n_layers());
    let out = model.forward_last(
        ints(tokens, [b, width], device),
        ints(positions, [b, width], device),
        bias(&valid, width, device),
        Some(&mut cache),
    );
    let vocab = out.logits.dims()[2];
    let mut last = rows(out.logits.reshape([b, vocab]));
    let mut results = vec![Sampled::default(); b];
    let mut rngs: Vec<SplitMix64> = (0..b)
        .map(|r| SplitMix64::new(config.seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    let mut pending: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); b];
    let mut ended = vec![false; b];
    for _ in 0..config.max_new_tokens {
        if all_ended(&mut ended, &results, control) {
            break;
        }
        let mut step_tokens = Vec::with_capacity(b);
        for r in 0..b {
            if ended[r] {
                step_tokens.push(0i64);
                valid[r].push(false);
                continue;
            }
            if pending[r].is_empty()
                && let Some(m) = constraints[r].as_mut()
            {
                pending[r] = m.forced().into();
            }
            let (token, lp, mask) = if let Some(token) = pending[r].pop_front() {
                // Forced by the grammar: certain, so log-prob 0, and the mask allows only it.
                let mut only = vec![false; vocab];
                only[token as usize] = true;
                (token, 0.0, Some(only))
            } else {
                let mask = match constraints[r].as_mut() {
                    Some(m) => Some(m.allowed()?),
                    None => None,
                };
                let (token, lp) = if config.temperature > 0.0 {
                    let logp = masked_log_softmax(&last[r], mask.as_deref(), config.temperature);
                    draw(&logp, config.top_p, &mut rngs[r])
                } else {
                    let logp = masked_log_softmax(&last[r], mask.as_deref(), 1.0);
                    let best = (0..logp.len())
                        .filter(|&i| logp[i].is_finite())
                        .max_by(|&a, &b| logp[a].total_cmp(&logp[b]).then(b.cmp(&a)))
                        .expect("at least one allowed token");
                    (best as u32, 0.0)
                };
                (token, lp, mask)
            };
            if let Some(m) = constraints[r].as_mut() {
                m.consume(token)?;
            }
            let s = &mut results[r];
            s.tokens.push(token);
            s.logprobs.push(lp as f32);
            s.allowed.push(mask);
            s.finished = match constraints[r].as_ref() {
                Some(m) => m.is_finished(),
                None => token == end,
            };
            step_tokens.push(i64::from(token));
            valid[r].push(true);
        }
        let pos: Vec<i64> = next_pos.clone();
        for p in next_pos.iter_mut() {
            *p += 1;
        }
        if all_ended(&mut ended, &results, control) {
            break;
        }
        let out = model.forward(
            ints(step_tokens, [b, 1], device),
            ints(pos, [b, 1], device),
            bias(&valid, 1, device),
            Some(&mut cache),
        );
        last = rows(out.logits.reshape([b, vocab]));
    }
    Ok(results)
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
        bias(&valid, n, device),
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
