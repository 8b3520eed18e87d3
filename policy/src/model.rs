//! The Llama-style decoder: RMSNorm, rotary positions, SwiGLU, optional grouped-query
//! attention, a language-model head and a value head.

use crate::fused;
use burn::config::Config;
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, RmsNorm, RmsNormConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use crate::cache::{KvCache, LayerCache};
use crate::lora::LoraTarget;
use crate::packing::Packing;

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
    /// Biases on the query, key and value projections (Qwen2).
    #[config(default = false)]
    pub attn_bias: bool,
    /// The output projection shares the token embedding's weights.
    #[config(default = false)]
    pub tie_embeddings: bool,
    /// Rotary positions over interleaved pairs `(0,1), (2,3), …` (sandgym's own models);
    /// `false` rotates the two halves of each head `(i, i + d/2)` as Hugging Face's Llama and
    /// Qwen2 do.
    #[config(default = true)]
    pub rope_interleaved: bool,
    /// The longest sequence (prompt and generation) the model may be given.
    #[config(default = 4096)]
    pub context_length: usize,
    /// LoRA adapters over the (frozen) weights, when set.
    #[config(default = "None")]
    pub lora: Option<crate::lora::LoraConfig>,
    /// The pretrained model these weights came from. With `lora`, a checkpoint stores only
    /// the adapters and value head, and loading it loads this model first (checking its
    /// digest).
    #[config(default = "None")]
    pub base: Option<crate::model_info::ModelInfo>,
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
        if let Some(lora) = &self.lora {
            lora.validate()?;
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
        let qkv = |i, o| {
            LinearConfig::new(i, o)
                .with_bias(self.attn_bias)
                .init(device)
        };
        let blocks = (0..self.n_layers)
            .map(|_| Block {
                attn_norm: RmsNormConfig::new(self.d_model)
                    .with_epsilon(self.norm_eps)
                    .init(device),
                wq: qkv(self.d_model, self.n_heads * head_dim),
                wk: qkv(self.d_model, self.n_kv_heads * head_dim),
                wv: qkv(self.d_model, self.n_kv_heads * head_dim),
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
                rope_interleaved: self.rope_interleaved,
                adapters: None,
            })
            .collect();
        let model = PolicyModel {
            embed: EmbeddingConfig::new(self.vocab_size, self.d_model).init(device),
            blocks,
            norm: RmsNormConfig::new(self.d_model)
                .with_epsilon(self.norm_eps)
                .init(device),
            lm_head: (!self.tie_embeddings).then(|| linear(self.d_model, self.vocab_size)),
            value_head: LinearConfig::new(self.d_model, 1).init(device),
        };
        // burn initialises parameters lazily, on first use, and every clone of an uninitialised
        // parameter draws its own values. Touch them all now so that a model and its clones
        // (a saved copy, a frozen reference) hold the same weights.
        let model = match &self.lora {
            Some(lora) => model.with_lora(lora, device),
            None => model,
        };
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
    pub(crate) embed: Embedding<B>,
    pub(crate) blocks: Vec<Block<B>>,
    pub(crate) norm: RmsNorm<B>,
    /// `None` when the output projection is the token embedding's transpose.
    pub(crate) lm_head: Option<Linear<B>>,
    pub(crate) value_head: Linear<B>,
}

/// One decoder block.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    pub(crate) attn_norm: RmsNorm<B>,
    pub(crate) wq: Linear<B>,
    pub(crate) wk: Linear<B>,
    pub(crate) wv: Linear<B>,
    pub(crate) wo: Linear<B>,
    pub(crate) ffn_norm: RmsNorm<B>,
    /// Gate.
    pub(crate) w1: Linear<B>,
    /// Down.
    pub(crate) w2: Linear<B>,
    /// Up.
    pub(crate) w3: Linear<B>,
    /// LoRA adapters, when the model has them.
    pub(crate) adapters: Option<crate::lora::BlockAdapters<B>>,
    pub(crate) n_heads: usize,
    pub(crate) n_kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) rope_theta: f64,
    pub(crate) rope_interleaved: bool,
}

/// The rotary embedding of a forward pass's positions, computed once and shared by every
/// block.
///
/// Rotating a head is `x·cos + rot(x)·sin`, with `rot` the signed permutation that pairs the
/// dimensions (`rotate_half` or interleaved pairs) written as a `[head_dim, head_dim]` matrix,
/// and `cos`/`sin` laid out like the projections' output (`[batch, seq, heads, head_dim]`,
/// repeated over the heads). Every op is then a same-shape elementwise op or one small GEMM
/// over contiguous data: the narrow/concatenate form over `[batch, heads, seq, half]` views,
/// broadcast over the heads, ran on the CPU backends' scalar strided paths and cost more than
/// the block's projections.
#[derive(Clone, Debug)]
struct Rotary<B: Backend> {
    /// `[batch, seq, n_heads, head_dim]` times attention's `1 / sqrt(head_dim)` (a rotated
    /// query comes out scaled), then `[batch, seq, n_kv_heads, head_dim]` unscaled.
    cos: [Tensor<B, 4>; 2],
    /// Like `cos`.
    sin: [Tensor<B, 4>; 2],
    /// `[head_dim, head_dim]`: `x · rot` is `rotate_half(x)` (or its interleaved form).
    rot: Tensor<B, 2>,
}

impl<B: Backend> Rotary<B> {
    /// Pair `i` of a `d`-dimensional head turns at frequency `theta^(-2i/d)`; `interleaved`
    /// pairs dimensions `(2i, 2i + 1)`, else `(i, i + d/2)` (Hugging Face's `rotate_half`).
    ///
    /// # Shapes
    /// - `positions`: `[batch, seq]`
    fn new(
        positions: &Tensor<B, 2, Int>,
        theta: f64,
        d: usize,
        interleaved: bool,
        heads: [usize; 2],
    ) -> Self {
        let [b, t] = positions.dims();
        let device = positions.device();
        let half = d / 2;
        // The frequency of each of the `d` dimensions, in the layout the pairing uses.
        let freq = |j: usize| {
            let pair = if interleaved { j / 2 } else { j % half };
            theta.powf(-(2.0 * pair as f64) / d as f64) as f32
        };
        let inv: Vec<f32> = (0..d).map(freq).collect();
        let inv = Tensor::<B, 1>::from_floats(inv.as_slice(), &device).reshape([1, 1, 1, d]);
        let angles = positions.clone().float().reshape([b, t, 1, 1]) * inv; // [b, t, 1, d]
        let (cos, sin) = (angles.clone().cos(), angles.sin());
        // The queries' tables carry attention's 1/sqrt(d): the scores need no pass of their own.
        let scale = 1.0 / (d as f64).sqrt();
        let spread = |x: &Tensor<B, 4>| {
            let [q, kv] = heads.map(|h| x.clone().repeat_dim(2, h));
            [q.mul_scalar(scale), kv]
        };
        // rot[i][j] = 1 where output j takes +x_i, -1 where it takes -x_i.
        let mut rot = vec![0f32; d * d];
        for j in 0..d {
            let (from, sign) = match (interleaved, j) {
                (true, j) if j % 2 == 0 => (j + 1, -1.0),
                (true, j) => (j - 1, 1.0),
                (false, j) if j < half => (j + half, -1.0),
                (false, j) => (j - half, 1.0),
            };
            rot[from * d + j] = sign;
        }
        Self {
            cos: spread(&cos),
            sin: spread(&sin),
            rot: Tensor::from_data(burn::tensor::TensorData::new(rot, [d, d]), &device),
        }
    }

    /// Rotates `x`, whose heads are the query heads (`kv` false) or the key/value heads.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, heads, head_dim]`
    fn apply(&self, x: Tensor<B, 4>, kv: bool) -> Tensor<B, 4> {
        let i = usize::from(kv);
        let [b, t, h, d] = x.dims();
        let turned = x
            .clone()
            .reshape([b * t * h, d])
            .matmul(self.rot.clone())
            .reshape([b, t, h, d]);
        x * self.cos[i].clone() + turned * self.sin[i].clone()
    }
}

impl<B: Backend> Block<B> {
    /// A projection plus its adapter's update, if it has one.
    ///
    /// The `[batch, seq]` rows are flattened into one matrix first: burn's `Linear` on a
    /// `[batch, seq, in]` input runs one matrix product per batch row (a vector product per
    /// row when decoding, and `batch` weight-sized partial gradients summed afterwards in
    /// backward), while one `[batch * seq, in]` product is a single large GEMM.
    fn project(&self, target: LoraTarget, lin: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, t, d] = x.dims();
        let flat = x.reshape([b * t, d]);
        let y = match self.adapters.as_ref().and_then(|a| a.get(target)) {
            Some(adapter) => fused::linear(lin, flat.clone()) + adapter.forward_flat(flat),
            None => fused::linear(lin, flat),
        };
        let out = y.dims()[1];
        y.reshape([b, t, out])
    }

    /// # Shapes
    /// - `x`: `[batch, seq, d_model]`
    /// - `rotary`: the angles of the `seq` positions
    /// - `bias`: `[batch, heads, seq, past + seq]` (0 where attention is allowed, -inf
    ///   elsewhere; [`PolicyModel::forward`] repeats its `[batch, 1, …]` bias over the heads)
    fn forward(
        &self,
        x: Tensor<B, 3>,
        rotary: &Rotary<B>,
        bias: &Tensor<B, 4>,
        cache: Option<&mut LayerCache<B>>,
        packing: Option<&Packing<B>>,
    ) -> Tensor<B, 3> {
        // `x` holds the batch's tokens as one sequence when it is packed (`[1, tokens, d]`);
        // attention runs on the padded `[b, t]` layout.
        let [xb, xt, _] = x.dims();
        let [b, t] = packing.map_or([xb, xt], |p| [p.rows(), p.seq()]);
        let spread = |y: Tensor<B, 4>| match packing {
            Some(p) => p.unpack_heads(y),
            None => y,
        };
        let (h, kvh, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let normed = fused::rms_norm(&self.attn_norm, x.clone());
        // Rotated in the projections' own `[b, t, heads, hd]` layout, then made head-major;
        // the queries come out of the rotation already scaled by 1/sqrt(hd).
        let q = fused::swap_12(spread(
            rotary.apply(
                self.project(LoraTarget::Q, &self.wq, normed.clone())
                    .reshape([xb, xt, h, hd]),
                false,
            ),
        )); // [b, h, t, hd]
        let k = fused::swap_12(spread(
            rotary.apply(
                self.project(LoraTarget::K, &self.wk, normed.clone())
                    .reshape([xb, xt, kvh, hd]),
                true,
            ),
        )); // [b, kvh, t, hd]
        let v = fused::swap_12(spread(
            self.project(LoraTarget::V, &self.wv, normed)
                .reshape([xb, xt, kvh, hd]),
        ));
        // A prefix every row shares comes first, held once (see `LayerCache`).
        let (k, v, shared) = match cache {
            Some(cache) => {
                let (k, v) = cache.append(k, v);
                (k, v, cache.shared())
            }
            None => (k, v, None),
        }; // [b, kvh, past + t, hd]
        let total = k.dims()[2];
        let group = h / kvh;
        // Grouped-query attention without copying keys and values for every head: the
        // `group` query heads that share a key/value head are stacked along the sequence, so
        // one product per key/value head serves them all (head `i` reads key/value head
        // `i / group`, as Hugging Face's `repeat_kv` lays them out). burn's `repeat_dim` took
        // most of a decoding step's time.
        let q = q.reshape([b, kvh, group * t, hd]);
        let own = q.clone().matmul(k.swap_dims(2, 3)); // [b, kvh, group * t, total]
        // Against the shared prefix (`[1, kvh, prefix, hd]`) by broadcasting over the rows:
        // the same products as over a copy per row, reading one copy.
        let (scores, prefix) = match &shared {
            None => (own, 0),
            Some((pk, _)) => {
                let on_prefix = q.matmul(pk.clone().swap_dims(2, 3));
                (Tensor::cat(vec![on_prefix, own], 3), pk.dims()[2])
            }
        };
        // [b, h, t, prefix + total]; the bias comes repeated over the heads.
        let scores = scores.reshape([b, h, t, prefix + total]) + bias.clone();
        let weights = fused::softmax_last(scores).reshape([b, kvh, group * t, prefix + total]);
        let attn = match shared {
            None => weights.matmul(v),
            Some((_, pv)) => {
                let on_prefix = weights.clone().narrow(3, 0, prefix).matmul(pv);
                weights.narrow(3, prefix, total).matmul(v) + on_prefix
            }
        }
        .reshape([b, h, t, hd]);
        let attn = fused::swap_12(attn).reshape([b, t, h * hd]);
        let attn = match packing {
            Some(p) => p.pack(attn),
            None => attn,
        };
        let x = x + self.project(LoraTarget::O, &self.wo, attn);
        let normed = fused::rms_norm(&self.ffn_norm, x.clone());
        let gate = self.project(LoraTarget::Gate, &self.w1, normed.clone());
        let up = self.project(LoraTarget::Up, &self.w3, normed);
        x + self.project(LoraTarget::Down, &self.w2, fused::swiglu(gate, up))
    }
}

/// What [`PolicyModel::forward_rows`] returns.
#[derive(Debug)]
pub struct RowOutput<B: Backend> {
    /// Next-token logits at the rows asked for, `[rows, vocab]`.
    pub logits: Tensor<B, 2>,
    /// State values (PPO's critic), `[batch, seq]`.
    pub values: Tensor<B, 2>,
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
        cache: Option<&mut KvCache<B>>,
    ) -> Output<B> {
        self.forward_packed(tokens, positions, bias, cache, None)
    }

    /// [`PolicyModel::forward`] over a padded batch whose padding `packing` skips (see
    /// [`Packing`]): the same outputs at every token.
    pub fn forward_packed(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        cache: Option<&mut KvCache<B>>,
        packing: Option<&Packing<B>>,
    ) -> Output<B> {
        let x = self.hidden(tokens, positions, bias, cache, packing);
        self.outputs(x)
    }

    /// Like [`PolicyModel::forward`], but the logits and values of the last position only
    /// (`[batch, 1, vocab]` and `[batch, 1]`): what a prefill before decoding needs. The
    /// output projection over a 49k vocabulary is a fifth of a 135M model's compute per
    /// position, and its `[batch, seq, vocab]` result the largest tensor of a prefill.
    ///
    /// # Panics
    /// When `seq` is 0 (there is no last position).
    pub fn forward_last(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        cache: Option<&mut KvCache<B>>,
    ) -> Output<B> {
        self.forward_last_packed(tokens, positions, bias, cache, None)
    }

    /// [`PolicyModel::forward_last`] over a padded batch whose padding `packing` skips (see
    /// [`Packing`]).
    ///
    /// # Panics
    /// When `seq` is 0 (there is no last position).
    pub fn forward_last_packed(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        cache: Option<&mut KvCache<B>>,
        packing: Option<&Packing<B>>,
    ) -> Output<B> {
        let x = self.hidden(tokens, positions, bias, cache, packing);
        let t = x.dims()[1];
        self.outputs(x.narrow(1, t - 1, 1))
    }

    /// Like [`PolicyModel::forward`], but the logits of the `rows` only: `rows` holds flat
    /// positions (`row * seq + position`) and the logits come back `[rows, vocab]`, in their
    /// order, with the values at every position. What a training pass needs: its losses read
    /// the logits where an action's tokens are, so the output projection and the tensors
    /// that follow it (scaled, masked, normalised) are not computed at the other positions
    /// (a customer-service SFT step's peak RSS: 9.9 → 9.1 GB; its time about the same).
    pub fn forward_rows(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        cache: Option<&mut KvCache<B>>,
        rows: Tensor<B, 1, Int>,
    ) -> RowOutput<B> {
        self.forward_rows_packed(tokens, positions, bias, cache, rows, None)
    }

    /// [`PolicyModel::forward_rows`] over a padded batch whose padding `packing` skips (see
    /// [`Packing`]): the same logits and, at every token, the same values (0's value at the
    /// padding).
    pub fn forward_rows_packed(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        cache: Option<&mut KvCache<B>>,
        rows: Tensor<B, 1, Int>,
        packing: Option<&Packing<B>>,
    ) -> RowOutput<B> {
        let x = fused::rms_norm(
            &self.norm,
            self.hidden(tokens, positions, bias, cache, packing),
        );
        let [b, t, d] = x.dims();
        let flat = x.reshape([b * t, d]);
        let values = self.value_head.forward(flat.clone()).reshape([b, t]);
        let logits = if rows.dims()[0] == 0 {
            Tensor::zeros([0, self.vocab_size()], &flat.device())
        } else {
            self.head(flat.select(0, rows))
        };
        RowOutput { logits, values }
    }

    /// The output projection of normed hidden rows `[n, d_model]`: logits `[n, vocab]`.
    fn head(&self, rows: Tensor<B, 2>) -> Tensor<B, 2> {
        match &self.lm_head {
            Some(head) => fused::linear(head, rows),
            // `[n, d] · [d, vocab]` against the table's transposed view: the GEMM reads the
            // table in place and the logits come out contiguous, so nothing downstream copies
            // the largest tensor of a pass.
            None => fused::matmul(rows, self.embed.weight.val().transpose()),
        }
    }

    /// The decoder blocks' output before the final norm, `[batch, seq, d_model]` (zero at
    /// the positions `packing` skips).
    fn hidden(
        &self,
        tokens: Tensor<B, 2, Int>,
        positions: Tensor<B, 2, Int>,
        bias: Tensor<B, 4>,
        mut cache: Option<&mut KvCache<B>>,
        packing: Option<&Packing<B>>,
    ) -> Tensor<B, 3> {
        let t = tokens.dims()[1];
        let (tokens, positions) = match packing {
            Some(p) => (p.pack_ints(tokens), p.pack_ints(positions)),
            None => (tokens, positions),
        };
        let mut x = self.embed.forward(tokens); // [b, t, d], or [1, tokens, d] packed
        let Some(first) = self.blocks.first() else {
            return match packing {
                Some(p) => p.unpack(x),
                None => x,
            };
        };
        let rotary = Rotary::new(
            &positions,
            first.rope_theta,
            first.head_dim,
            first.rope_interleaved,
            [first.n_heads, first.n_kv_heads],
        );
        let bias = match cache.as_deref_mut() {
            Some(c) if !c.is_empty() => {
                // The layers' buffers may hold free slots after the new ones (see
                // `LayerCache`): masked for every query.
                c.reserve(t);
                let [b, _, t, total] = bias.dims();
                match c.capacity().checked_sub(total) {
                    Some(free) if free > 0 => {
                        let masked = Tensor::full([b, 1, t, free], f32::NEG_INFINITY, &x.device());
                        Tensor::cat(vec![bias, masked], 3)
                    }
                    _ => bias,
                }
            }
            _ => bias,
        };
        // The bias repeated over the heads once for every block: adding a `[b, 1, t, total]`
        // bias to `[b, h, t, total]` scores broadcasts over a middle dimension, which the CPU
        // backend runs element by element; same-shaped tensors add at memory speed.
        let bias = bias.repeat_dim(1, first.n_heads);
        for (i, block) in self.blocks.iter().enumerate() {
            let layer = cache.as_deref_mut().map(|c| c.layer(i));
            x = block.forward(x, &rotary, &bias, layer, packing);
        }
        match packing {
            Some(p) => p.unpack(x),
            None => x,
        }
    }

    /// The final norm, the output projection and the value head over hidden states.
    fn outputs(&self, x: Tensor<B, 3>) -> Output<B> {
        let x = fused::rms_norm(&self.norm, x);
        let [b, t, d] = x.dims();
        let rows = x.reshape([b * t, d]); // one GEMM over every position (see `Block::project`)
        let logits = self.head(rows.clone());
        let vocab = logits.dims()[1];
        let logits = logits.reshape([b, t, vocab]);
        Output {
            logits,
            values: self.value_head.forward(rows).reshape([b, t]),
        }
    }

    /// The logits of one sequence at every position (a causal forward pass, no cache).
    ///
    /// # Shapes
    /// - returns `[seq, vocab]`
    pub fn logits_of(&self, ids: &[u32]) -> Tensor<B, 2> {
        let device = self.embed.weight.device();
        let t = ids.len();
        let tokens = Tensor::<B, 1, Int>::from_data(
            burn::tensor::TensorData::new(ids.iter().map(|&i| i as i64).collect(), [t]),
            &device,
        )
        .reshape([1, t]);
        let positions = Tensor::<B, 1, Int>::arange(0..t as i64, &device).reshape([1, t]);
        let bias = crate::causal_bias::<B>(t, &device);
        let out = self.forward(tokens, positions, bias, None);
        let vocab = out.logits.dims()[2];
        out.logits.reshape([t, vocab])
    }

    /// The number of decoder blocks.
    pub fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    /// The size of the vocabulary the model reads and predicts.
    pub fn vocab_size(&self) -> usize {
        self.embed.weight.dims()[0]
    }
}
