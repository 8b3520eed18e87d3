//! LoRA: low-rank adapters over a frozen pretrained decoder.
//!
//! Each targeted projection `W` (`[in, out]`) gains `A` (`[in, r]`) and `B` (`[r, out]`) and
//! computes `x·W + (alpha / r)·x·A·B`. `A` starts random, `B` at zero, so an adapted model
//! starts exactly where its base is. With adapters on, only they and the value head train;
//! checkpoints hold them (plus the base model's identity and digest) instead of the base
//! weights, and [`PolicyModel::merge_lora`] folds them into plain weights.

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};
use serde::{Deserialize, Serialize};

use crate::model::PolicyModel;

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

    /// `scale·A·B`, the change to the weight (`[in, out]`).
    pub fn delta(&self) -> Tensor<B, 2> {
        self.a.val().matmul(self.b.val()).mul_scalar(self.scale)
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

/// Sets every parameter's `require_grad` to `train`.
struct RequireGrad(bool);

impl<B: Backend> burn::module::ModuleMapper<B> for RequireGrad {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.set_require_grad(self.0)
    }
}

impl<B: Backend> PolicyModel<B> {
    /// Whether the model carries adapters.
    pub fn has_lora(&self) -> bool {
        self.blocks.iter().any(|b| b.adapters.is_some())
    }

    /// Adds fresh adapters (see the module docs) and freezes everything else but the value
    /// head. Replaces adapters the model had.
    pub fn with_lora(mut self, config: &LoraConfig, device: &B::Device) -> Self {
        for block in &mut self.blocks {
            let shape = |lin: &burn::nn::Linear<B>| {
                let [i, o] = lin.weight.val().dims();
                (i, o)
            };
            let sizes = [
                shape(&block.wq),
                shape(&block.wk),
                shape(&block.wv),
                shape(&block.wo),
                shape(&block.w1),
                shape(&block.w3),
                shape(&block.w2),
            ];
            let slots = LoraTarget::ALL
                .iter()
                .map(|t| {
                    config.targets.contains(t).then(|| {
                        let (i, o) = sizes[t.index()];
                        Adapter::new(i, o, config, device)
                    })
                })
                .collect();
            block.adapters = Some(BlockAdapters { slots });
        }
        self.freeze_base()
    }

    /// Marks the base weights (everything but adapters and the value head) as not trainable;
    /// a model without adapters is returned unchanged.
    pub fn freeze_base(mut self) -> Self {
        if !self.has_lora() {
            return self;
        }
        self.embed = self.embed.map(&mut RequireGrad(false));
        self.norm = self.norm.map(&mut RequireGrad(false));
        self.lm_head = self.lm_head.map(|h| h.map(&mut RequireGrad(false)));
        for block in &mut self.blocks {
            let adapters = block.adapters.take();
            *block = block.clone().map(&mut RequireGrad(false));
            block.adapters = adapters.map(|a| a.map(&mut RequireGrad(true)));
        }
        self
    }

    /// The adapters and value head (what a LoRA checkpoint stores), if the model has adapters.
    pub fn lora_state(&self) -> Option<LoraState<B>> {
        let blocks = self
            .blocks
            .iter()
            .map(|b| b.adapters.clone())
            .collect::<Option<Vec<_>>>()?;
        Some(LoraState {
            blocks,
            value_head: self.value_head.clone(),
        })
    }

    /// Puts saved adapters and value head in place (the base must be the one they were
    /// trained on) and freezes the base.
    pub fn with_lora_state(mut self, state: LoraState<B>) -> Self {
        for (block, adapters) in self.blocks.iter_mut().zip(state.blocks) {
            block.adapters = Some(adapters);
        }
        self.value_head = state.value_head;
        self.freeze_base()
    }

    /// The model to sample from: a model with adapters merged into plain weights (the same
    /// function; each adapted projection costs one product instead of three, which tripled a
    /// decoding step's time), any other unchanged.
    pub fn for_inference(self) -> Self {
        if self.has_lora() {
            self.merge_lora()
        } else {
            self
        }
    }

    /// Folds the adapters into the projection weights: the same function, no adapters, every
    /// parameter trainable again.
    pub fn merge_lora(mut self) -> Self {
        for block in &mut self.blocks {
            let Some(adapters) = block.adapters.take() else {
                continue;
            };
            let lins = [
                &mut block.wq,
                &mut block.wk,
                &mut block.wv,
                &mut block.wo,
                &mut block.w1,
                &mut block.w3,
                &mut block.w2,
            ];
            for (target, lin) in LoraTarget::ALL.iter().zip(lins) {
                if let Some(a) = adapters.get(*target) {
                    let merged = lin.weight.val() + a.delta();
                    lin.weight = Param::from_tensor(merged);
                }
            }
        }
        self.map(&mut RequireGrad(true))
    }
}
