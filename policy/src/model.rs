//! The Llama-style decoder: RMSNorm, rotary positions, SwiGLU, optional grouped-query
//! attention, a language-model head and a value head.

use burn::config::Config;
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::activation::{silu, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use crate::cache::{KvCache, LayerCache};

/// Model sizes. The default is tiny (~0.66M parameters with a 1k vocabulary) so it trains on a
/// 2-core CPU in minutes.
#[derive(Config, Debug, PartialEq)]
pub struct PolicyConfig {
    /// Vocabulary size (the tokenizer's).
    pub vocab_size: usize,
    /// Hidden size.
    #[config(default = 128)]
    pub d_model: usize,
    /// Decoder blocks.
    #[config(default = 2)]
    pub n_layers: usize,
    /// Attention heads.
    #[config(default = 4)]
    pub n_heads: usize,
    /// Key/value heads (fewer than `n_heads` for grouped-query attention).
    #[config(default = 4)]
    pub n_kv_heads: usize,
    /// SwiGLU inner size.
    #[config(default = 352)]
    pub d_ff: usize,
    /// Rotary base.
    #[config(default = 10000.0)]
    pub rope_theta: f64,
    /// RMSNorm epsilon.
    #[config(default = 1e-5)]
    pub norm_eps: f64,
}

impl PolicyConfig {
    /// A larger preset (~6M parameters with a 1k vocabulary).
    pub fn small(vocab_size: usize) -> Self {
        Self::new(vocab_size)
            .with_d_model(256)
            .with_n_layers(6)
            .with_n_heads(8)
            .with_n_kv_heads(4)
            .with_d_ff(688)
    }

    /// Checks that the sizes fit together.
    pub fn validate(&self) -> Result<(), String> {
        let sizes = [
            self.vocab_size,
            self.d_model,
            self.n_layers,
            self.n_heads,
            self.n_kv_heads,
            self.d_ff,
        ];
        if sizes.contains(&0) {
            return Err("every size must be positive".into());
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(format!(
                "d_model {} does not divide into {} heads",
                self.d_model, self.n_heads
            ));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(format!(
                "{} heads do not divide into {} kv heads",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !(self.d_model / self.n_heads).is_multiple_of(2) {
            return Err("the head size must be even for rotary positions".into());
        }
        Ok(())
    }

    /// Builds the model with random weights.
    ///
    /// # Panics
    /// If [`PolicyConfig::validate`] fails.
    pub fn init<B: Backend>(&self, device: &B::Device) -> PolicyModel<B> {
        if let Err(e) = self.validate() {
            panic!("invalid PolicyConfig: {e}");
        }
        let head_dim = self.d_model / self.n_heads;
        let linear = |i, o| LinearConfig::new(i, o).with_bias(false).init(device);
        let blocks = (0..self.n_layers)
            .map(|_| Block {
                attn_norm: RmsNormConfig::new(self.d_model)
                    .with_epsilon(self.norm_eps)
                    .init(device),
                wq: linear(self.d_model, self.n_heads * head_dim),
                wk: linear(self.d_model, self.n_kv_heads * head_dim),
                wv: linear(self.d_model, self.n_kv_heads * head_dim),
                wo: linear(self.n_heads * head_dim, self.d_model),
                ffn_norm: RmsNormConfig::new(self.d_model)
                    .with_epsilon(self.norm_eps)
                    .init(device),
                w1: linear(self.d_model, self.d_ff),
                w2: linear(self.d_ff, self.d_model),
                w3: linear(self.d_model, self.d_ff),
                n_heads: self.n_heads,
                n_kv_heads: self.n_kv_heads,
                head_dim,
                rope_theta: self.rope_theta,
            })
            .collect();
        let model = PolicyModel {
            embed: EmbeddingConfig::new(self.vocab_size, self.d_model).init(device),
            blocks,
            norm: RmsNormConfig::new(self.d_model)
                .with_epsilon(self.norm_eps)
                .init(device),
            lm_head: linear(self.d_model, self.vocab_size),
            value_head: LinearConfig::new(self.d_model, 1).init(device),
        };
        // burn initialises parameters lazily, on first use, and every clone of an uninitialised
        // parameter draws its own values. Touch them all now so that a model and its clones
        // (a saved copy, a frozen reference) hold the same weights.
        model.visit(&mut Materialise);
        model
    }
}

/// The shape of every float parameter, in visiting order.
pub(crate) fn param_shapes<B: Backend>(model: &PolicyModel<B>) -> Vec<Vec<usize>> {
    struct Shapes(Vec<Vec<usize>>);
    impl<B: Backend> ModuleVisitor<B> for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.push(param.val().dims().to_vec());
        }
    }
    let mut shapes = Shapes(Vec::new());
    model.visit(&mut shapes);
    shapes.0
}

/// Forces lazy parameters to take their values.
struct Materialise;

impl<B: Backend> ModuleVisitor<B> for Materialise {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let _ = param.val();
    }
}

/// The policy network.
#[derive(Module, Debug)]
pub struct PolicyModel<B: Backend> {
    embed: Embedding<B>,
    blocks: Vec<Block<B>>,
    norm: RmsNorm<B>,
    lm_head: Linear<B>,
    value_head: Linear<B>,
}

/// One decoder block.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    attn_norm: RmsNorm<B>,
    wq: Linear<B>,
    wk: Linear<B>,
    wv: Linear<B>,
    wo: Linear<B>,
    ffn_norm: RmsNorm<B>,
    w1: Linear<B>,
    w2: Linear<B>,
    w3: Linear<B>,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    rope_theta: f64,
}

/// Rotates `x` by its positions.
///
/// # Shapes
/// - `x`: `[batch, heads, seq, head_dim]`
/// - `positions`: `[batch, seq]`
fn rope<B: Backend>(x: Tensor<B, 4>, positions: &Tensor<B, 2, Int>, theta: f64) -> Tensor<B, 4> {
    let [b, h, t, d] = x.dims();
    let device = x.device();
    let half = d / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| (theta.powf(-(2.0 * i as f64) / d as f64)) as f32)
        .collect();
    let inv = Tensor::<B, 1>::from_floats(inv.as_slice(), &device).reshape([1, 1, half]);
    let angles = positions.clone().float().reshape([b, t, 1]) * inv; // [b, t, half]
    let (cos, sin) = (
        angles.clone().cos().unsqueeze_dim::<4>(1),
        angles.sin().unsqueeze_dim::<4>(1),
    ); // [b, 1, t, half]
    let pairs = x.reshape([b, h, t, half, 2]);
    let even = pairs.clone().narrow(4, 0, 1).reshape([b, h, t, half]);
    let odd = pairs.narrow(4, 1, 1).reshape([b, h, t, half]);
    let rot_even = even.clone() * cos.clone() - odd.clone() * sin.clone();
    let rot_odd = even * sin + odd * cos;
    Tensor::stack::<5>(vec![rot_even, rot_odd], 4).reshape([b, h, t, d])
}

impl<B: Backend> Block<B> {
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]`
    /// - `positions`: `[batch, seq]`
    /// - `bias`: `[batch, 1, seq, past + seq]` (0 where attention is allowed, -inf elsewhere)
    fn forward(
        &self,
        x: Tensor<B, 3>,
        positions: &Tensor<B, 2, Int>,
        bias: &Tensor<B, 4>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 3> {
        let [b, t, _] = x.dims();
        let (h, kvh, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let normed = self.attn_norm.forward(x.clone());
        let q = self
            .wq
            .forward(normed.clone())
            .reshape([b, t, h, hd])
            .swap_dims(1, 2); // [b, h, t, hd]
        let k = self
            .wk
            .forward(normed.clone())
            .reshape([b, t, kvh, hd])
            .swap_dims(1, 2); // [b, kvh, t, hd]
        let v = self
            .wv
            .forward(normed)
            .reshape([b, t, kvh, hd])
            .swap_dims(1, 2);
        let q = rope(q, positions, self.rope_theta);
        let k = rope(k, positions, self.rope_theta);
        let (k, v) = match cache {
            Some(cache) => cache.append(k, v),
            None => (k, v),
        }; // [b, kvh, past + t, hd]
        let total = k.dims()[2];
        let group = h / kvh;
        let k = k
            .unsqueeze_dim::<5>(2)
            .repeat_dim(2, group)
            .reshape([b, h, total, hd]);
        let v = v
            .unsqueeze_dim::<5>(2)
            .repeat_dim(2, group)
            .reshape([b, h, total, hd]);
        let scores = q.matmul(k.swap_dims(2, 3)).div_scalar((hd as f64).sqrt()) + bias.clone(); // [b, h, t, total]
        let attn = softmax(scores, 3).matmul(v); // [b, h, t, hd]
        let attn = attn.swap_dims(1, 2).reshape([b, t, h * hd]);
        let x = x + self.wo.forward(attn);
        let normed = self.ffn_norm.forward(x.clone());
        let ffn = self
            .w2
            .forward(silu(self.w1.forward(normed.clone())) * self.w3.forward(normed));
        x + ffn
    }
}

/// What a forward pass returns.
#[derive(Debug)]
pub struct Output<B: Backend> {
    /// Next-token logits, `[batch, seq, vocab]`.
    pub logits: Tensor<B, 3>,
    /// State values (PPO's critic), `[batch, seq]`.
    pub values: Tensor<B, 2>,
}

impl<B: Backend> PolicyModel<B> {
    /// A forward pass over `tokens` that continues the sequences held in `cache` (if any).
    ///
    /// # Shapes
    /// - `tokens`, `positions`: `[batch, seq]`
    /// - `bias`: `[batch, 1, seq, past + seq]`, 0 where query `i` may attend to key `j`, `-inf`
    ///   elsewhere (causality and padding)
    pub fn forward(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        mut cache: Option<&mut KvCache<B>>,
    ) -> Output<B> {
        let mut x = self.embed.forward(tokens); // [b, t, d]
        for (i, block) in self.blocks.iter().enumerate() {
            let layer = cache.as_deref_mut().map(|c| c.layer(i));
            x = block.forward(x, &positions, &bias, layer);
        }
        let x = self.norm.forward(x);
        let [b, t, _] = x.dims();
        Output {
            logits: self.lm_head.forward(x.clone()),
            values: self.value_head.forward(x).reshape([b, t]),
        }
    }

    /// The number of decoder blocks.
    pub fn n_layers(&self) -> usize {
        self.blocks.len()
    }
}
