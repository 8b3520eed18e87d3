//! A padded batch's position-wise work over its tokens alone.
//!
//! A batch of sequences of different lengths is padded to one width (left-padded prompts in a
//! prefill, right-padded episodes in a training pass, ended rows in a decoding step), and
//! every padding position costs as much as a token in the projections and the MLP, which are
//! nearly all of a pass's work: the SQL agent's SFT prefills held 11,228 prompt tokens in
//! 17,307 padded positions, a GRPO rollout's 1,043 in 1,877. A [`Packing`] lists where the
//! tokens are; [`PolicyModel`](crate::PolicyModel)'s passes then run the projections, the
//! norms and the MLP on the tokens packed into one sequence (`[1, tokens, d]`) and spread
//! only the keys, values and queries back to the padded `[batch, seq]` layout for attention
//! (whose bias already masks the padding), packing its output again. The result at every
//! token is that of the padded pass; at a padding position the hidden state is zero.
//!
//! burn has no variable-length attention, so attention itself stays padded: it is the smaller
//! part of these passes (about a tenth of a prefill's arithmetic at the SQL agent's ~450-slot
//! contexts, by count: `4 × slots × d` per token and layer against the projections' and
//! MLP's `2 × parameters`).

use burn::tensor::IndexingUpdateOp;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Where the tokens of a padded `[rows, seq]` batch are (see the module docs).
#[derive(Clone, Debug)]
pub struct Packing<B: Backend> {
    /// The flat positions (`row * seq + position`) of the tokens, ascending.
    index: Tensor<B, 1, Int>,
    rows: usize,
    seq: usize,
    tokens: usize,
}

impl<B: Backend> Packing<B> {
    /// The packing of a `[rows, seq]` batch whose tokens are where `is_token` is true
    /// (row-major, `rows * seq` entries). `None` when there is nothing to skip (no padding)
    /// or nothing to run (no token): the padded pass is then the one to run.
    ///
    /// # Panics
    /// When `is_token` does not hold `rows * seq` entries.
    pub fn new(rows: usize, seq: usize, is_token: &[bool], device: &B::Device) -> Option<Self> {
        assert_eq!(is_token.len(), rows * seq, "one entry per position");
        let flat: Vec<i64> = (0..is_token.len())
            .filter(|&i| is_token[i])
            .map(|i| i as i64)
            .collect();
        let tokens = flat.len();
        if tokens == 0 || tokens == rows * seq {
            return None;
        }
        Some(Self {
            index: Tensor::from_data(TensorData::new(flat, [tokens]), device),
            rows,
            seq,
            tokens,
        })
    }

    /// The packing of rows of `lengths` tokens padded to `seq` at their start (`left`, as a
    /// prefill's prompts are) or at their end (as a training pass's episodes are).
    ///
    /// # Panics
    /// When a length exceeds `seq`.
    pub fn of_lengths(
        lengths: &[usize],
        seq: usize,
        left: bool,
        device: &B::Device,
    ) -> Option<Self> {
        let mut is_token = Vec::with_capacity(lengths.len() * seq);
        for &n in lengths {
            assert!(n <= seq, "a row longer than the batch");
            let pad = seq - n;
            is_token.extend((0..seq).map(|j| if left { j >= pad } else { j < n }));
        }
        Self::new(lengths.len(), seq, &is_token, device)
    }

    /// The batch's rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The batch's padded width.
    pub fn seq(&self) -> usize {
        self.seq
    }

    /// The tokens it holds.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// The tokens of a padded batch's ids or positions, as one sequence.
    ///
    /// # Shapes
    /// - `x`: `[rows, seq]`; returns `[1, tokens]`
    pub fn pack_ints(&self, x: Tensor<B, 2, Int>) -> Tensor<B, 2, Int> {
        x.reshape([self.rows * self.seq])
            .select(0, self.index.clone())
            .reshape([1, self.tokens])
    }

    /// The tokens' features of a padded batch, as one sequence.
    ///
    /// # Shapes
    /// - `x`: `[rows, seq, d]`; returns `[1, tokens, d]`
    pub fn pack(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let d = x.dims()[2];
        x.reshape([self.rows * self.seq, d])
            .select(0, self.index.clone())
            .reshape([1, self.tokens, d])
    }

    /// The packed tokens' features back in the padded layout, zero at the padding.
    ///
    /// # Shapes
    /// - `x`: `[1, tokens, d]`; returns `[rows, seq, d]`
    pub fn unpack(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let d = x.dims()[2];
        Tensor::zeros([self.rows * self.seq, d], &x.device())
            .select_assign(
                0,
                self.index.clone(),
                x.reshape([self.tokens, d]),
                IndexingUpdateOp::Add,
            )
            .reshape([self.rows, self.seq, d])
    }

    /// [`unpack`](Self::unpack) for per-head features.
    ///
    /// # Shapes
    /// - `x`: `[1, tokens, heads, d]`; returns `[rows, seq, heads, d]`
    pub fn unpack_heads(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [_, _, h, d] = x.dims();
        self.unpack(x.reshape([1, self.tokens, h * d]))
            .reshape([self.rows, self.seq, h, d])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;

    #[test]
    fn no_padding_or_no_token_packs_nothing() {
        let device = Default::default();
        assert!(Packing::<Cpu>::of_lengths(&[3, 3], 3, true, &device).is_none());
        assert!(Packing::<Cpu>::of_lengths(&[0, 0], 3, false, &device).is_none());
        let p = Packing::<Cpu>::of_lengths(&[1, 3], 3, true, &device).expect("padding");
        assert_eq!((p.rows(), p.seq(), p.tokens()), (2, 3, 4));
    }

    #[test]
    fn unpack_inverts_pack_and_zeroes_the_padding() {
        let device = Default::default();
        // Row 0 left-padded by 2, row 1 full: values 1..=6 per position, 2 features each.
        let x = Tensor::<Cpu, 1, Int>::arange(0..12, &device)
            .float()
            .reshape([2, 3, 2]);
        let p = Packing::<Cpu>::of_lengths(&[1, 3], 3, true, &device).expect("padding");
        let packed = p.pack(x.clone());
        assert_eq!(packed.dims(), [1, 4, 2]);
        let got: Vec<f32> = packed.clone().into_data().to_vec().expect("f32");
        assert_eq!(got, vec![4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
        let back: Vec<f32> = p.unpack(packed).into_data().to_vec().expect("f32");
        assert_eq!(
            back,
            vec![0.0, 0.0, 0.0, 0.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
        );
        let ids = Tensor::<Cpu, 1, Int>::arange(0..6, &device).reshape([2, 3]);
        let ids: Vec<i64> = p
            .pack_ints(ids)
            .into_data()
            .convert::<i64>()
            .to_vec()
            .expect("i64");
        assert_eq!(ids, vec![2, 3, 4, 5]);
    }
}
