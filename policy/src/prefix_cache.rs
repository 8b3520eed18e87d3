//! Keys and values kept from one request to the next, so that a conversation's next call
//! encodes only what it added.
//!
//! A client of the policy server sends each call of a conversation as the whole conversation
//! so far: the same system turn, tools and earlier turns, then one more tool result. Without a
//! cache every call encodes all of it again, and an agent's calls cost more the longer it
//! runs. [`PrefixCache`] keeps the keys and values of finished generations (prompt and
//! completion) and gives a new prompt the one that shares the longest prefix with it, cut to
//! that prefix; the decoder encodes only the rest ([`Decoder::admit_continuing`]).
//!
//! It is bounded in bytes and evicts the least recently used entry first. An entry whose
//! prompt a newer entry holds whole is dropped at once: the newer one is a later call of the
//! same conversation (or another sample of the same prompt), and serves what the older did
//! but the older one's completion. (A completion rarely comes back token for token: the
//! client sends its text, and the tokenizer may split that text otherwise than the model
//! wrote it, so the older entry's tail is seldom of use.)
//!
//! [`Decoder::admit_continuing`]: crate::Decoder::admit_continuing

use std::collections::VecDeque;

use burn::tensor::backend::Backend;

use crate::cache::SeqCache;

/// The fewest tokens a prompt must share with an entry for the entry to be used: a shorter
/// match saves less than stacking its cache costs.
pub const MIN_REUSED: usize = 32;

/// What a [`PrefixCache`] has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PrefixStats {
    /// Prompts looked up.
    pub lookups: u64,
    /// Of which continued a kept entry.
    pub hits: u64,
    /// Prompt tokens looked up, in all.
    pub prompt_tokens: u64,
    /// Of which came from the cache instead of being encoded.
    pub reused_tokens: u64,
    /// Entries kept now.
    pub entries: usize,
    /// Bytes they take.
    pub bytes: usize,
}

/// Finished generations' keys and values, bounded in bytes (see the module docs).
#[derive(Debug)]
pub struct PrefixCache<B: Backend> {
    /// Least recently used first: each entry's cache and the length of its prompt.
    entries: VecDeque<(SeqCache<B>, usize)>,
    budget: usize,
    bytes: usize,
    stats: PrefixStats,
}

/// How many leading tokens `a` and `b` share.
fn shared(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<B: Backend> PrefixCache<B> {
    /// An empty cache of at most `budget` bytes (0 keeps nothing).
    pub fn new(budget: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            budget,
            bytes: 0,
            stats: PrefixStats::default(),
        }
    }

    /// Whether it keeps anything at all.
    pub fn is_enabled(&self) -> bool {
        self.budget > 0
    }

    /// The cache of the longest prefix `prompt` shares with a kept entry, when that is at
    /// least [`MIN_REUSED`] tokens; always shorter than `prompt` (its last token is encoded
    /// for its logits). The entry becomes the most recently used.
    pub fn lookup(&mut self, prompt: &[u32]) -> Option<SeqCache<B>> {
        self.stats.lookups += 1;
        self.stats.prompt_tokens += prompt.len() as u64;
        let limit = prompt.len().saturating_sub(1);
        let (best, len) = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (e, _))| (i, shared(e.tokens(), prompt).min(limit)))
            .max_by_key(|&(i, len)| (len, i))?;
        if len < MIN_REUSED {
            return None;
        }
        let entry = self.entries.remove(best)?;
        let base = entry.0.prefix(len);
        self.entries.push_back(entry);
        self.stats.hits += 1;
        self.stats.reused_tokens += len as u64;
        Some(base)
    }

    /// Keeps `seq` (a copy of its own: [`SeqCache::copy_row`]), a generation whose prompt
    /// is its first `prompt_len` tokens, as the most recently used entry. Drops the entries
    /// whose prompts it holds whole (see the module docs), then the least recently used ones
    /// until the cache is within its budget. An entry larger than the whole budget is not
    /// kept, nor one that a kept entry already extends.
    pub fn insert(&mut self, seq: SeqCache<B>, prompt_len: usize) {
        let size = seq.bytes();
        if size > self.budget || seq.tokens().len() < MIN_REUSED {
            return;
        }
        let tokens = seq.tokens();
        if self
            .entries
            .iter()
            .any(|(e, _)| e.tokens().starts_with(tokens))
        {
            return;
        }
        let mut bytes = self.bytes;
        self.entries.retain(|(e, prompt)| {
            let covered = tokens.starts_with(&e.tokens()[..(*prompt).min(e.tokens().len())]);
            if covered {
                bytes -= e.bytes();
            }
            !covered
        });
        self.bytes = bytes + size;
        self.entries.push_back((seq, prompt_len));
        while self.bytes > self.budget {
            let Some((old, _)) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= old.bytes();
        }
    }

    /// What it has done so far, and what it holds.
    pub fn stats(&self) -> PrefixStats {
        PrefixStats {
            entries: self.entries.len(),
            bytes: self.bytes,
            ..self.stats
        }
    }
}
