//! Stepwise batched decoding: the rows of one KV cache extended a token per step, each row
//! ending on its own, and new rows admitted between steps (continuous batching).
//!
//! [`generate`](crate::generate) runs one batch to its end on a [`Decoder`]; the policy server
//! keeps one running and admits each request as it arrives, so a short request joins a long
//! batch at its next step instead of waiting for it to finish.

use std::collections::VecDeque;

use burn::tensor::backend::Backend;
use sandgym_env_api::SplitMix64;

use crate::cache::{KvCache, SeqCache};
use crate::model::PolicyModel;
use crate::prefill::{PREFILL_SCORES, Prefill, ints, prefill, prefill_continuing};
use crate::sample::{Sampled, draw, masked_log_softmax, rows};
use crate::{PolicyError, Result, ToolCallMatcher};

/// One sequence to decode.
#[derive(Debug)]
pub struct RowRequest {
    /// The caller's name for the row; [`Done::id`] gives it back.
    pub id: usize,
    /// The prompt's token ids (not empty).
    pub prompt: Vec<u32>,
    /// The tool-call constraint; without one the row ends at the end token.
    pub constraint: Option<ToolCallMatcher>,
    /// Softmax temperature (> 0), or 0 for the most likely allowed token.
    pub temperature: f32,
    /// Nucleus threshold in (0, 1]; 1 disables it.
    pub top_p: f32,
    /// Most new tokens.
    pub max_new_tokens: usize,
    /// Seed of the row's own sampler (its draws do not depend on the other rows' seeds).
    pub seed: u64,
}

/// A row that has ended: its sample (or what failed it) and its constraint as it was left.
#[derive(Debug)]
pub struct Done {
    /// [`RowRequest::id`].
    pub id: usize,
    /// The sample; an error when its constraint failed while decoding (that row only).
    pub result: Result<Sampled>,
    /// Its constraint, consumed up to the sample's last token.
    pub constraint: Option<ToolCallMatcher>,
}

/// A row of the running batch.
#[derive(Debug)]
struct Row {
    id: usize,
    sampled: Sampled,
    constraint: Option<ToolCallMatcher>,
    rng: SplitMix64,
    temperature: f32,
    top_p: f32,
    budget: usize,
    /// Tokens recorded but not yet fed to the model.
    queued: VecDeque<u32>,
    /// The tokens its slots of the cache encode: its prompt, then each token fed.
    fed: Vec<u32>,
    /// The row has ended; its sample has gone to [`Decoder::done`] and its slot of the
    /// cache waits to be dropped.
    ended: bool,
    error: Option<PolicyError>,
}

impl Row {
    fn new(request: RowRequest) -> Self {
        Self {
            id: request.id,
            sampled: Sampled::default(),
            constraint: request.constraint,
            rng: SplitMix64::new(request.seed),
            temperature: request.temperature,
            top_p: request.top_p,
            budget: request.max_new_tokens,
            queued: VecDeque::new(),
            fed: Vec::new(),
            ended: false,
            error: None,
        }
    }

    /// Records the tokens the grammar forces next (within the budget) and returns them, to
    /// be fed.
    fn drain_forced(&mut self, vocab: usize) -> Result<Vec<u32>> {
        let Some(m) = self.constraint.as_mut() else {
            return Ok(Vec::new());
        };
        let s = &mut self.sampled;
        let mut fed = Vec::new();
        while !s.finished && s.tokens.len() < self.budget {
            let forced = m.forced_next();
            if forced.is_empty() {
                break;
            }
            for token in forced {
                if s.finished || s.tokens.len() >= self.budget {
                    break;
                }
                m.consume(token)?;
                s.tokens.push(token);
                s.logprobs.push(0.0);
                s.allowed
                    .push(Some(crate::TokenMask::only(token as usize, vocab)));
                s.finished = m.is_finished();
                fed.push(token);
            }
        }
        Ok(fed)
    }

    /// Samples the next token from `logits` and queues it with the tokens the grammar then
    /// forces.
    fn sample(&mut self, logits: &[f32], end: u32, vocab: usize) -> Result<()> {
        let mask = match self.constraint.as_mut() {
            Some(m) => Some(m.allowed()?),
            None => None,
        };
        let (token, lp) = if self.temperature > 0.0 {
            let logp = masked_log_softmax(logits, mask.as_deref(), self.temperature);
            draw(&logp, self.top_p, &mut self.rng)
        } else {
            let logp = masked_log_softmax(logits, mask.as_deref(), 1.0);
            let best = (0..logp.len())
                .filter(|&i| logp[i].is_finite())
                .max_by(|&a, &b| logp[a].total_cmp(&logp[b]).then(b.cmp(&a)))
                .expect("at least one allowed token");
            (best as u32, 0.0)
        };
        let s = &mut self.sampled;
        s.tokens.push(token);
        s.logprobs.push(lp as f32);
        s.allowed
            .push(mask.as_deref().map(crate::TokenMask::from_bools));
        self.queued.push_back(token);
        match self.constraint.as_mut() {
            Some(m) => {
                m.consume(token)?;
                s.finished = m.is_finished();
                let forced = self.drain_forced(vocab)?;
                self.queued.extend(forced);
            }
            None => s.finished = token == end,
        }
        Ok(())
    }

    /// Whether the row should end now (finished, out of budget, failed or stopped).
    fn should_end(&self, stop: &dyn Fn(usize) -> bool) -> bool {
        self.sampled.finished
            || self.sampled.tokens.len() >= self.budget
            || self.error.is_some()
            || stop(self.id)
    }
}

/// The cache and per-row state of the rows being decoded, one cache row per [`Row`].
struct Batch<B: Backend> {
    cache: KvCache<B>,
    /// Per row and cached slot: whether the slot holds a token (`false`: padding).
    valid: Vec<Vec<bool>>,
    /// Per row: the position of its next token.
    next_pos: Vec<i64>,
    /// Per row: the logits after its last fed token.
    last: Vec<Vec<f32>>,
}

/// A batch of sequences decoded a step at a time (see the module docs).
///
/// Each [`step`](Self::step) samples a token for every running row that has none waiting,
/// then feeds every running row one token in one forward pass. Tokens the grammar forces
/// (the `{"thought":` of every action, a closing `"}`, the end of the turn …) are recorded as
/// certain (log-prob 0, a one-hot mask) without a look at the model's logits; those forced
/// before the first choice go in with the prompt, the others are fed one per step. (Feeding a
/// row's whole forced run in one step pads every other row to its length: measured slower at
/// batch 64.) Rows that end are dropped from the cache once a quarter of the batch has (copying
/// the cache then costs less than carrying them through every later step), and before new
/// rows are admitted.
pub struct Decoder<'m, B: Backend> {
    model: &'m PolicyModel<B>,
    end: u32,
    vocab: usize,
    device: B::Device,
    rows: Vec<Row>,
    batch: Option<Batch<B>>,
    done: Vec<Done>,
    /// Whether an ending row's keys and values are kept ([`Decoder::keep_caches`]).
    keep: bool,
    kept: Vec<(usize, SeqCache<B>)>,
}

impl<B: Backend> std::fmt::Debug for Decoder<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("rows", &self.rows.len())
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

impl<'m, B: Backend> Decoder<'m, B> {
    /// An empty decoder of `model`; rows without a constraint end at `end`.
    pub fn new(model: &'m PolicyModel<B>, end: u32, device: &B::Device) -> Self {
        Self {
            model,
            end,
            vocab: model.vocab_size(),
            device: device.clone(),
            rows: Vec::new(),
            batch: None,
            done: Vec::new(),
            keep: false,
            kept: Vec::new(),
        }
    }

    /// Keeps a copy of each ending row's keys and values (its prompt and the tokens fed
    /// after it), for [`take_caches`](Self::take_caches): a later request that continues the
    /// row's text can start from it ([`admit_continuing`](Self::admit_continuing)).
    pub fn keep_caches(&mut self, keep: bool) {
        self.keep = keep;
    }

    /// Takes the kept caches of the rows that have ended so far, by row id (a failed row
    /// keeps none).
    pub fn take_caches(&mut self) -> Vec<(usize, SeqCache<B>)> {
        std::mem::take(&mut self.kept)
    }

    /// Rows still decoding.
    pub fn running(&self) -> usize {
        self.rows.iter().filter(|r| !r.ended).count()
    }

    /// Whether no row is decoding.
    pub fn is_idle(&self) -> bool {
        self.running() == 0
    }

    /// Adds `requests` to the batch: their prompts are encoded together (each shared prefix
    /// once), and they decode from the next step on beside the rows already running.
    ///
    /// # Panics
    /// When a prompt is empty.
    pub fn admit(&mut self, requests: Vec<RowRequest>) {
        let device = self.device.clone();
        let model = self.model;
        self.admit_with(requests, |prompts| prefill(model, prompts, &device));
    }

    /// [`admit`](Self::admit) for requests whose prompts continue cached sequences: each
    /// request's base must encode a strict prefix of its prompt ([`SeqCache::continues`]),
    /// and only the rest of the prompt is encoded.
    ///
    /// # Panics
    /// When a prompt is empty or its base does not continue it.
    pub fn admit_continuing(&mut self, requests: Vec<(RowRequest, SeqCache<B>)>) {
        let device = self.device.clone();
        let model = self.model;
        let (requests, bases): (Vec<_>, Vec<_>) = requests.into_iter().unzip();
        self.admit_with(requests, |prompts| {
            let bases: Vec<&SeqCache<B>> = bases.iter().collect();
            prefill_continuing(model, &bases, prompts, PREFILL_SCORES, &device)
        });
    }

    /// [`admit`](Self::admit) with the new rows' prompts (each extended by the tokens its
    /// grammar forces first) encoded by `encode`.
    pub(crate) fn admit_with(
        &mut self,
        requests: Vec<RowRequest>,
        encode: impl FnOnce(&[Vec<u32>]) -> Prefill<B>,
    ) {
        if requests.is_empty() {
            return;
        }
        assert!(
            requests.iter().all(|r| !r.prompt.is_empty()),
            "prompts must not be empty"
        );
        let mut new_rows = Vec::with_capacity(requests.len());
        let mut prompts = Vec::with_capacity(requests.len());
        for mut request in requests {
            let mut prompt = std::mem::take(&mut request.prompt);
            let mut row = Row::new(request);
            match row.drain_forced(self.vocab) {
                Ok(fed) => prompt.extend(fed),
                Err(e) => row.error = Some(e),
            }
            row.fed.clone_from(&prompt);
            new_rows.push(row);
            prompts.push(prompt);
        }
        let new = encode(&prompts);
        self.compact_ended();
        let new = Batch {
            cache: new.cache,
            valid: new.valid,
            next_pos: new.next_pos,
            last: rows(new.logits),
        };
        self.batch = Some(match self.batch.take() {
            Some(old) if !self.rows.is_empty() => join(old, new),
            _ => new,
        });
        self.rows.extend(new_rows);
    }

    /// Takes the rows that have ended so far.
    pub fn done(&mut self) -> Vec<Done> {
        std::mem::take(&mut self.done)
    }

    /// Ends the rows that should end (`stop` is asked once per running row, by id), moving
    /// their samples to the done list.
    fn end_rows(&mut self, stop: &dyn Fn(usize) -> bool) {
        for (i, row) in self.rows.iter_mut().enumerate() {
            if row.ended || !row.should_end(stop) {
                continue;
            }
            row.ended = true;
            if let Some(batch) = self
                .batch
                .as_ref()
                .filter(|_| self.keep && row.error.is_none())
            {
                let fed = std::mem::take(&mut row.fed);
                let seq = SeqCache::copy_row(&batch.cache, &batch.valid[i], i, fed);
                self.kept.push((row.id, seq));
            }
            let sampled = std::mem::take(&mut row.sampled);
            self.done.push(Done {
                id: row.id,
                result: match row.error.take() {
                    Some(e) => Err(e),
                    None => Ok(sampled),
                },
                constraint: row.constraint.take(),
            });
        }
    }

    /// Drops the ended rows from the batch (all of it when none runs).
    fn compact_ended(&mut self) {
        if self.rows.iter().all(|r| !r.ended) {
            return;
        }
        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&i| !self.rows[i].ended)
            .collect();
        if keep.is_empty() {
            self.rows.clear();
            self.batch = None;
            return;
        }
        if let Some(b) = self.batch.as_mut() {
            b.cache.retain_rows(&keep);
            b.valid = keep
                .iter()
                .map(|&i| std::mem::take(&mut b.valid[i]))
                .collect();
            b.next_pos = keep.iter().map(|&i| b.next_pos[i]).collect();
            b.last = keep
                .iter()
                .map(|&i| std::mem::take(&mut b.last[i]))
                .collect();
        }
        self.rows.retain(|r| !r.ended);
    }

    /// One step: a token sampled for each running row that has none waiting, then one fed to
    /// each running row. `stop` ends a row early (e.g. its client left); an ended row is not
    /// [`finished`](Sampled::finished). Rows that end go to [`done`](Self::done).
    pub fn step(&mut self, stop: &dyn Fn(usize) -> bool) {
        self.end_rows(stop);
        if self.is_idle() {
            self.compact_ended();
            return;
        }
        let (end, vocab) = (self.end, self.vocab);
        let batch = self.batch.as_ref().expect("running rows have a batch");
        for (i, row) in self.rows.iter_mut().enumerate() {
            if row.ended || !row.queued.is_empty() {
                continue;
            }
            if let Err(e) = row.sample(&batch.last[i], end, vocab) {
                row.error = Some(e);
            }
        }
        self.end_rows(stop);
        if self.is_idle() {
            self.compact_ended();
            return;
        }
        if self.running() * 4 <= self.rows.len() * 3 {
            self.compact_ended();
        }
        let batch = self.batch.as_mut().expect("running rows have a batch");
        let n = self.rows.len();
        let (mut tokens, mut positions) = (Vec::with_capacity(n), Vec::with_capacity(n));
        // Rows that ended since the last compaction are fed nothing: the pass skips them.
        let mut fed = Vec::with_capacity(n);
        for (i, row) in self.rows.iter_mut().enumerate() {
            let next = if row.ended {
                None
            } else {
                row.queued.pop_front()
            };
            tokens.push(next.map_or(0, i64::from));
            positions.push(batch.next_pos[i]);
            batch.valid[i].push(next.is_some());
            fed.push(next.is_some());
            if let Some(token) = next {
                batch.next_pos[i] += 1;
                row.fed.push(token);
            }
        }
        let packing = crate::Packing::new(n, 1, &fed, &self.device);
        let out = self.model.forward_packed(
            ints(tokens, [n, 1], &self.device),
            ints(positions, [n, 1], &self.device),
            crate::attention_bias(&batch.valid, 1, &self.device),
            Some(&mut batch.cache),
            packing.as_ref(),
        );
        batch.last = rows(out.logits.reshape([n, vocab]));
    }
}

/// The rows of `a` followed by those of `b`, the shorter cache left-padded with empty slots.
fn join<B: Backend>(a: Batch<B>, b: Batch<B>) -> Batch<B> {
    let (la, lb) = (a.cache.len(), b.cache.len());
    let pad = |valid: Vec<Vec<bool>>, n: usize| -> Vec<Vec<bool>> {
        valid
            .into_iter()
            .map(|v| std::iter::repeat_n(false, n).chain(v).collect())
            .collect()
    };
    let width = la.max(lb);
    let mut valid = pad(a.valid, width - la);
    valid.extend(pad(b.valid, width - lb));
    let mut next_pos = a.next_pos;
    next_pos.extend(b.next_pos);
    let mut last = a.last;
    last.extend(b.last);
    Batch {
        cache: KvCache::join(a.cache, b.cache),
        valid,
        next_pos,
        last,
    }
}
