//! LoRA: low-rank adapters over a frozen pretrained decoder.
//!
//! Each targeted projection `W` (`[in, out]`) gains `A` (`[in, r]`) and `B` (`[r, out]`) and
//! computes `x·W + (alpha / r)·x·A·B`. `A` starts random, `B` at zero, so an adapted model
//! starts exactly where its base is. With adapters on, only they and the value head train;
//! checkpoints hold them (plus the base model's identity and digest) instead of the base
//! weights, and [`PolicyModel::merge_lora`](crate::PolicyModel::merge_lora) folds them into plain
//! weights (adding, freezing and merging live with the model's other adapted forms, in
//! `adapted.rs`).

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};
use serde::{Deserialize, Serialize};

/// A projection adapters can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoraTarget {
    /// Queries (`q_proj`).
    Q,
    /// Keys (`k_proj`).
    K,
    /// Values (`v_proj`).
    V,
    /// Attention output (`o_proj`).
    O,
    /// MLP gate (`gate_proj`).
    Gate,
    /// MLP up (`up_proj`).
    Up,
    /// MLP down (`down_proj`).
    Down,
}

impl LoraTarget {
    /// Every projection.
    pub const ALL: [LoraTarget; 7] = [
        LoraTarget::Q,
        LoraTarget::K,
        LoraTarget::V,
        LoraTarget::O,
        LoraTarget::Gate,
        LoraTarget::Up,
        LoraTarget::Down,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Where adapters go and how large they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoraConfig {
    /// The rank `r`.
    pub rank: usize,
    /// The scale numerator: the update is `(alpha / r)·x·A·B`.
    pub alpha: f64,
    /// The projections adapted.
    pub targets: Vec<LoraTarget>,
}

impl Default for LoraConfig {
    /// Rank 16, alpha 32, every projection of attention and MLP.
    fn default() -> Self {
        Self {
            rank: 16,
            alpha: 32.0,
            targets: LoraTarget::ALL.to_vec(),
        }
    }
}

impl LoraConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        if self.rank == 0 || self.rank > 4096 {
            return Err(format!("LoRA rank {} is not in 1..=4096", self.rank));
        }
        if !self.alpha.is_finite() || self.alpha <= 0.0 {
            return Err(format!("LoRA alpha {} must be positive", self.alpha));
        }
        if self.targets.is_empty() {
            return Err("LoRA needs at least one target projection".into());
        }
        Ok(())
    }
}

/// The two factors of one adapted projection.
#[derive(Module, Debug)]
pub struct Adapter<B: Backend> {
    /// `[in, r]`.
    pub a: Param<Tensor<B, 2>>,
    /// `[r, out]`.
    pub b: Param<Tensor<B, 2>>,
    /// `alpha / r`.
    pub scale: f64,
}

impl<B: Backend> Adapter<B> {
    /// A fresh adapter: `A ~ N(0, 1/in)`, `B = 0`.
    pub fn new(d_in: usize, d_out: usize, config: &LoraConfig, device: &B::Device) -> Self {
        let std = (1.0 / d_in as f64).sqrt();
        Self {
            a: Param::from_tensor(Tensor::random(
                [d_in, config.rank],
                Distribution::Normal(0.0, std),
                device,
            )),
            b: Param::from_tensor(Tensor::zeros([config.rank, d_out], device)),
            scale: config.alpha / config.rank as f64,
        }
    }

    /// The low-rank update of `x`.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, in]`; returns `[batch, seq, out]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, t, d] = x.dims();
        let out = self.b.val().dims()[1];
        self.forward_flat(x.reshape([b * t, d]))
            .reshape([b, t, out])
    }

    /// The low-rank update of rows `x`.
    ///
    /// # Shapes
    /// - `x`: `[rows, in]`; returns `[rows, out]`
    pub fn forward_flat(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        x.matmul(self.a.val())
            .matmul(self.b.val())
            .mul_scalar(self.scale)
    }
}

/// The adapters of one block, by [`LoraTarget`] (`None` where a projection is not adapted).
#[derive(Module, Debug)]
pub struct BlockAdapters<B: Backend> {
    /// One slot per [`LoraTarget::ALL`] entry.
    pub slots: Vec<Option<Adapter<B>>>,
}

impl<B: Backend> BlockAdapters<B> {
    /// The adapter of `target`, if any.
    pub fn get(&self, target: LoraTarget) -> Option<&Adapter<B>> {
        self.slots.get(target.index()).and_then(Option::as_ref)
    }
}

/// What a LoRA checkpoint stores: every block's adapters and the value head.
#[derive(Module, Debug)]
pub struct LoraState<B: Backend> {
    /// Per block.
    pub blocks: Vec<BlockAdapters<B>>,
    /// The value head (trained with the adapters).
    pub value_head: burn::nn::Linear<B>,
}
