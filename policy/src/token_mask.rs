//! The tokens the tool-call grammar allows at one position, one bit per vocabulary entry.

/// The tokens allowed at one position, as a bitset over the vocabulary.
///
/// Every generated token of an episode, and every constrained target of a training sample,
/// keeps the mask it was sampled (or is learned) under. Kept as one `bool` per entry (what
/// the grammar's matcher hands out), a position of a 49,152-token vocabulary took 48 KB: the
/// support agent's 180 SFT episodes (every turn's action, ~54,000 constrained targets) held
/// 2.6 GB of masks for the whole of SFT, and its closing evaluation's played episodes about
/// 1 GB. A bit per entry is 6 KB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u64>,
    len: usize,
}

impl TokenMask {
    /// The mask of `allowed` (entry `i`: whether token `i` is allowed).
    pub fn from_bools(allowed: &[bool]) -> Self {
        let mut words = vec![0u64; allowed.len().div_ceil(64)];
        for (word, chunk) in words.iter_mut().zip(allowed.chunks(64)) {
            for (bit, &ok) in chunk.iter().enumerate() {
                *word |= u64::from(ok) << bit;
            }
        }
        Self {
            words,
            len: allowed.len(),
        }
    }

    /// The mask of a vocabulary of `len` tokens allowing `token` alone (a token the grammar
    /// forces).
    pub fn only(token: usize, len: usize) -> Self {
        let mut words = vec![0u64; len.div_ceil(64)];
        if token < len {
            words[token / 64] |= 1 << (token % 64);
        }
        Self { words, len }
    }

    /// The vocabulary size it covers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it covers no token at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `token` is allowed (`false` beyond the vocabulary).
    pub fn allows(&self, token: usize) -> bool {
        token < self.len && (self.words[token / 64] >> (token % 64)) & 1 == 1
    }

    /// How many tokens are allowed.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// One `bool` per token, as the grammar's matcher gives it.
    pub fn to_bools(&self) -> Vec<bool> {
        (0..self.len).map(|i| self.allows(i)).collect()
    }

    /// Appends one value per token to `out`: `allowed` where the token is, `masked` where
    /// it is not (a row of the additive bias the loss's log-softmax takes).
    pub fn extend_bias(&self, out: &mut Vec<f32>, allowed: f32, masked: f32) {
        out.reserve(self.len);
        for (w, &word) in self.words.iter().enumerate() {
            let n = (self.len - w * 64).min(64);
            out.extend((0..n).map(|bit| {
                if (word >> bit) & 1 == 1 {
                    allowed
                } else {
                    masked
                }
            }));
        }
    }
}

impl From<&[bool]> for TokenMask {
    fn from(allowed: &[bool]) -> Self {
        Self::from_bools(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mask_keeps_exactly_the_allowed_tokens_at_every_length() {
        for len in [0, 1, 63, 64, 65, 130, 49_152] {
            let bools: Vec<bool> = (0..len).map(|i| i % 7 == 3 || i == len - 1).collect();
            let mask = TokenMask::from_bools(&bools);
            assert_eq!((mask.len(), mask.is_empty()), (len, len == 0));
            assert_eq!(mask.to_bools(), bools);
            assert_eq!(mask.count(), bools.iter().filter(|&&b| b).count());
            assert!((0..len).all(|i| mask.allows(i) == bools[i]));
            assert!(!mask.allows(len) && !mask.allows(len + 64));
            let mut bias = vec![5.0];
            mask.extend_bias(&mut bias, 0.0, -1e9);
            let want: Vec<f32> = std::iter::once(5.0)
                .chain(bools.iter().map(|&b| if b { 0.0 } else { -1e9 }))
                .collect();
            assert_eq!(bias, want);
        }
        let one = TokenMask::only(70, 130);
        assert_eq!(
            (one.count(), one.allows(70), one.allows(6)),
            (1, true, false)
        );
        assert_eq!(TokenMask::only(130, 130).count(), 0);
    }
}
