//! Hugging Face model directories: `config.json`, `model.safetensors` (or shards listed in
//! `model.safetensors.index.json`), `tokenizer.json` and `tokenizer_config.json`.
//!
//! The safetensors files are read with the `safetensors` crate rather than burn's store: the
//! tensors go through the same [`Weights`] map as GGUF imports (which burn's store does not
//! read), so one loader builds the decoder from both, with one shape check.

use std::collections::BTreeSet;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use burn::module::Param;
use burn::nn::{Embedding, Linear, RmsNorm};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use super::read;
use super::weights::{Weight, Weights};
use crate::model::{Block, PolicyConfig, PolicyModel};
use crate::{PolicyError, Result};

fn bad(reason: impl Into<String>) -> PolicyError {
    PolicyError::Import(reason.into())
}

/// The fields of a Hugging Face `config.json` that the decoder needs.
#[derive(Debug, Deserialize)]
struct HfConfig {
    model_type: String,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rope_theta: Option<f64>,
    /// transformers 5 moves `rope_theta` here, next to `rope_type`.
    #[serde(default)]
    rope_parameters: Option<serde_json::Value>,
    #[serde(default = "default_eps")]
    rms_norm_eps: f64,
    #[serde(default)]
    tie_word_embeddings: bool,
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    rope_scaling: Option<serde_json::Value>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    mlp_bias: bool,
    hidden_act: Option<String>,
}

fn default_eps() -> f64 {
    1e-6
}

/// The decoder config of a Hugging Face `config.json` (Llama, incl. SmolLM2, and Qwen2).
pub fn config_from_json(text: &str) -> Result<PolicyConfig> {
    let c: HfConfig = serde_json::from_str(text).map_err(|e| bad(format!("config.json: {e}")))?;
    let qwen2 = match c.model_type.as_str() {
        "llama" => false,
        "qwen2" => true,
        other => {
            return Err(bad(format!(
                "model_type {other:?} is not supported (llama and qwen2 are)"
            )));
        }
    };
    let unsupported = |what: &str| Err(bad(format!("config.json: {what} is not supported")));
    if c.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
        return unsupported("rope_scaling");
    }
    let mut theta = c.rope_theta;
    if let Some(p) = c.rope_parameters.as_ref().filter(|v| !v.is_null()) {
        if p.get("rope_type")
            .and_then(|t| t.as_str())
            .unwrap_or("default")
            != "default"
        {
            return unsupported("a rope_type other than default");
        }
        theta = theta.or_else(|| p.get("rope_theta").and_then(|t| t.as_f64()));
    }
    if c.mlp_bias {
        return unsupported("mlp_bias");
    }
    if !qwen2 && c.attention_bias {
        return unsupported("attention_bias on a llama model (a bias on o_proj)");
    }
    if c.hidden_act.as_deref().is_some_and(|a| a != "silu") {
        return unsupported("an activation other than silu");
    }
    if c.head_dim
        .is_some_and(|d| d * c.num_attention_heads != c.hidden_size)
    {
        return unsupported("head_dim × heads ≠ hidden_size");
    }
    let config = PolicyConfig::new(c.vocab_size)
        .with_d_model(c.hidden_size)
        .with_n_layers(c.num_hidden_layers)
        .with_n_heads(c.num_attention_heads)
        .with_n_kv_heads(c.num_key_value_heads.unwrap_or(c.num_attention_heads))
        .with_d_ff(c.intermediate_size)
        .with_rope_theta(theta.unwrap_or(10_000.0))
        .with_norm_eps(c.rms_norm_eps)
        .with_attn_bias(qwen2)
        .with_tie_embeddings(c.tie_word_embeddings)
        .with_rope_interleaved(false)
        .with_context_length(c.max_position_embeddings.unwrap_or(4096));
    config
        .validate()
        .map_err(|e| bad(format!("config.json: {e}")))?;
    Ok(config)
}

/// Converts one safetensors tensor to f32.
fn to_f32(name: &str, view: &safetensors::tensor::TensorView<'_>) -> Result<Weight> {
    let data = view.data();
    let values: Vec<f32> = match view.dtype() {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => {
            return Err(bad(format!(
                "tensor {name} has dtype {other:?} (F32, F16 and BF16 are supported)"
            )));
        }
    };
    Weight::new(view.shape().to_vec(), values)
}

/// Adds every tensor of one safetensors file to `weights`.
pub fn read_safetensors(bytes: &[u8], weights: &mut Weights) -> Result<()> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| bad(format!("safetensors: {e}")))?;
    for (name, view) in file.tensors() {
        let w = to_f32(&name, &view)?;
        weights.insert(name, w);
    }
    Ok(())
}

/// The tensors of a Hugging Face directory: `model.safetensors`, or every shard named in
/// `model.safetensors.index.json`; and the SHA-256 of the files' own digests in name order
/// (computed from the bytes already read).
pub fn weights(dir: &Path) -> Result<(Weights, String)> {
    let mut weights = Weights::default();
    let mut digests = String::new();
    let mut add = |path: &Path, weights: &mut Weights| -> Result<()> {
        let bytes = read(path)?;
        digests.push_str(&super::sha256_hex(&bytes));
        read_safetensors(&bytes, weights)
    };
    let single = dir.join("model.safetensors");
    let index = dir.join("model.safetensors.index.json");
    if single.exists() {
        add(&single, &mut weights)?;
    } else if index.exists() {
        let v: serde_json::Value = serde_json::from_slice(&read(&index)?)
            .map_err(|e| bad(format!("{}: {e}", index.display())))?;
        let shards: BTreeSet<String> = v["weight_map"]
            .as_object()
            .ok_or_else(|| bad("model.safetensors.index.json has no weight_map"))?
            .values()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect();
        for shard in shards {
            if shard.contains('/') || shard.contains("..") {
                return Err(bad(format!("shard name {shard:?} leaves the directory")));
            }
            add(&dir.join(&shard), &mut weights)?;
        }
    } else {
        return Err(bad(format!(
            "{} has neither model.safetensors nor model.safetensors.index.json",
            dir.display()
        )));
    }
    Ok((weights, super::sha256_hex(digests.as_bytes())))
}

/// The directory's chat template: `chat_template.jinja`, else the one in
/// `tokenizer_config.json`, if either is there.
pub fn chat_template(dir: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(dir.join("chat_template.jinja")) {
        return Some(text);
    }
    let text = std::fs::read_to_string(dir.join("tokenizer_config.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("chat_template")?.as_str().map(str::to_owned)
}

/// A tensor of `shape` from row-major values.
fn tensor<B: Backend, const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(burn::tensor::TensorData::new(values, shape), device)
}

/// `[rows, cols]` row-major values transposed to `[cols, rows]`.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// Builds the decoder from pretrained tensors in Hugging Face's Llama/Qwen2 naming and layout
/// (the tensor-name map: see [`Weights`]; GGUF imports are renamed to it). Every tensor the
/// config implies must be present with its shape; the value head (not part of a language
/// model) starts at zero. Tensors left over (e.g. rotary caches) are returned by name.
pub(crate) fn decoder_from_weights<B: Backend>(
    config: &PolicyConfig,
    weights: &mut Weights,
    device: &B::Device,
) -> crate::Result<(PolicyModel<B>, Vec<String>)> {
    config
        .validate()
        .map_err(|e| crate::PolicyError::Import(format!("config: {e}")))?;
    let (d, ff, v) = (config.d_model, config.d_ff, config.vocab_size);
    let hd = d / config.n_heads;
    let (qd, kvd) = (config.n_heads * hd, config.n_kv_heads * hd);
    let mut linear = |name: &str, din: usize, dout: usize, bias: bool| {
        let w = weights.take(&format!("{name}.weight"), &[dout, din])?;
        let weight = tensor::<B, 2>(transpose(&w.values, dout, din), [din, dout], device);
        let bias = if bias {
            let b = weights.take(&format!("{name}.bias"), &[dout])?;
            Some(Param::from_tensor(tensor::<B, 1>(b.values, [dout], device)))
        } else {
            None
        };
        Ok::<_, crate::PolicyError>(Linear {
            weight: Param::from_tensor(weight),
            bias,
        })
    };
    let mut blocks = Vec::with_capacity(config.n_layers);
    for i in 0..config.n_layers {
        let p = format!("model.layers.{i}");
        let b = config.attn_bias;
        let wq = linear(&format!("{p}.self_attn.q_proj"), d, qd, b)?;
        let wk = linear(&format!("{p}.self_attn.k_proj"), d, kvd, b)?;
        let wv = linear(&format!("{p}.self_attn.v_proj"), d, kvd, b)?;
        let wo = linear(&format!("{p}.self_attn.o_proj"), qd, d, false)?;
        let w1 = linear(&format!("{p}.mlp.gate_proj"), d, ff, false)?;
        let w2 = linear(&format!("{p}.mlp.down_proj"), ff, d, false)?;
        let w3 = linear(&format!("{p}.mlp.up_proj"), d, ff, false)?;
        blocks.push((p, wq, wk, wv, wo, w1, w2, w3));
    }
    let lm_head = if config.tie_embeddings {
        None
    } else {
        Some(linear("lm_head", d, v, false)?)
    };
    let mut norm = |name: &str| {
        let g = weights.take(name, &[d])?;
        Ok::<_, crate::PolicyError>(RmsNorm {
            gamma: Param::from_tensor(tensor::<B, 1>(g.values, [d], device)),
            epsilon: config.norm_eps,
        })
    };
    let blocks = blocks
        .into_iter()
        .map(|(p, wq, wk, wv, wo, w1, w2, w3)| {
            Ok(Block {
                attn_norm: norm(&format!("{p}.input_layernorm.weight"))?,
                ffn_norm: norm(&format!("{p}.post_attention_layernorm.weight"))?,
                wq,
                wk,
                wv,
                wo,
                w1,
                w2,
                w3,
                n_heads: config.n_heads,
                n_kv_heads: config.n_kv_heads,
                head_dim: hd,
                rope_theta: config.rope_theta,
                rope_interleaved: config.rope_interleaved,
                adapters: None,
            })
        })
        .collect::<crate::Result<Vec<_>>>()?;
    let final_norm = norm("model.norm.weight")?;
    let embed = weights.take("model.embed_tokens.weight", &[v, d])?;
    let model = PolicyModel {
        embed: Embedding {
            weight: Param::from_tensor(tensor::<B, 2>(embed.values, [v, d], device)),
        },
        blocks,
        norm: final_norm,
        lm_head,
        value_head: Linear {
            weight: Param::from_tensor(Tensor::zeros([d, 1], device)),
            bias: Some(Param::from_tensor(Tensor::zeros([1], device))),
        },
    };
    Ok((model, weights.remaining()))
}
