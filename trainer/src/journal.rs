//! A journal of what the sampler produced, turn by turn, to measure how many sampled turns
//! reach training exactly as sampled — the figure the comparison of the two approaches
//! reports, taken from both sides the same way: the rollout engine's own journal (the env
//! approach), the policy server's (the proxy approach).

use std::collections::HashMap;

use crate::Episode;

/// The sampled turns (their token ids, end token included), as a multiset.
///
/// ```
/// use sandgym_trainer::{Episode, SampleJournal, Turn};
/// let mut journal = SampleJournal::default();
/// journal.record(&[5, 6, 7]);
/// let ep = Episode {
///     tokens: vec![1, 2, 5, 6, 7],
///     turns: vec![Turn { start: 2, end: 5, reward: 1.0 }],
///     ..Episode::default()
/// };
/// let mut changed = ep.clone();
/// changed.tokens[3] = 9;
/// assert_eq!(journal.captured(&[ep]).calls, 1);
/// assert_eq!(journal.captured(&[changed]).calls, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleJournal {
    turns: HashMap<Vec<u32>, usize>,
    recorded: usize,
}

/// How much of a journal's turns a set of episodes holds exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    /// Turns (model calls) whose tokens are in an episode exactly as sampled.
    pub calls: usize,
    /// Their tokens.
    pub tokens: usize,
}

impl SampleJournal {
    /// Records one sampled turn.
    pub fn record(&mut self, tokens: &[u32]) {
        *self.turns.entry(tokens.to_vec()).or_default() += 1;
        self.recorded += 1;
    }

    /// Adds every turn of `other`.
    pub fn extend(&mut self, other: &SampleJournal) {
        for (tokens, n) in &other.turns {
            *self.turns.entry(tokens.clone()).or_default() += n;
        }
        self.recorded += other.recorded;
    }

    /// Turns recorded.
    pub fn len(&self) -> usize {
        self.recorded
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.recorded == 0
    }

    /// The turns of `episodes` (each [`Turn`](crate::Turn)'s generated tokens) found in the
    /// journal, each journal entry matched at most once: a turn whose tokens were changed,
    /// cut or re-tokenised on the way, or that was never sampled, does not count.
    pub fn captured(&self, episodes: &[Episode]) -> Captured {
        let mut left = self.turns.clone();
        let mut found = Captured::default();
        for ep in episodes {
            for turn in &ep.turns {
                let Some(span) = ep.tokens.get(turn.start..turn.end) else {
                    continue;
                };
                if let Some(n) = left.get_mut(span).filter(|n| **n > 0) {
                    *n -= 1;
                    found.calls += 1;
                    found.tokens += span.len();
                }
            }
        }
        found
    }
}
