//! GGUF, llama.cpp's model format: metadata, tensors (dequantised to f32) and the tokenizer.
//!
//! The reader is written here rather than taken from a crate: the format is a short,
//! documented header followed by aligned tensor data, and the crates that read it bring a
//! tensor library of their own (candle) that this project does not otherwise build. Every
//! length and count in the file is checked against the file's size before it is used, so a
//! truncated or hostile file is an [`PolicyError::Import`], never a panic or a huge allocation.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::weights::{Weight, Weights, unpermute_rotary};
use crate::model::PolicyConfig;
use crate::{PolicyError, Result};

fn bad(reason: impl Into<String>) -> PolicyError {
    PolicyError::Import(format!("GGUF: {}", reason.into()))
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Any unsigned or signed integer type.
    Int(i128),
    /// `f32` or `f64`.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string.
    Str(String),
    /// An array of values.
    Array(Vec<MetaValue>),
}

impl MetaValue {
    fn as_usize(&self) -> Option<usize> {
        match self {
            MetaValue::Int(i) => usize::try_from(*i).ok(),
            _ => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match self {
            MetaValue::Float(f) => Some(*f),
            MetaValue::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The tensor types this reader dequantises (llama.cpp's `ggml_type` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// Blocks of 32: an f16 scale and 32 4-bit values offset by 8.
    Q4_0,
    /// Blocks of 32: an f16 scale, an f16 minimum and 32 4-bit values.
    Q4_1,
    /// Blocks of 32: an f16 scale and 32 signed bytes.
    Q8_0,
}

impl TensorType {
    fn from_id(id: u32) -> Result<Self> {
        Ok(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            8 => Self::Q8_0,
            30 => Self::Bf16,
            other => {
                return Err(bad(format!(
                    "tensor type {other} is not supported (F32, F16, BF16, Q4_0, Q4_1 and Q8_0 are)"
                )));
            }
        })
    }

    /// Bytes taken by `n` values (`n` a multiple of the block size for block types).
    fn bytes(self, n: usize) -> Option<usize> {
        match self {
            Self::F32 => n.checked_mul(4),
            Self::F16 | Self::Bf16 => n.checked_mul(2),
            Self::Q4_0 => n.is_multiple_of(32).then(|| n / 32 * 18),
            Self::Q4_1 => n.is_multiple_of(32).then(|| n / 32 * 20),
            Self::Q8_0 => n.is_multiple_of(32).then(|| n / 32 * 34),
        }
    }
}

fn f16(b: &[u8]) -> f32 {
    half::f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Dequantises `n` values of type `ty` from `data` (exactly [`TensorType`]'s byte count).
pub fn dequantize(ty: TensorType, data: &[u8], n: usize) -> Result<Vec<f32>> {
    if ty.bytes(n) != Some(data.len()) {
        return Err(bad(format!(
            "{n} values of {ty:?} do not take {} bytes",
            data.len()
        )));
    }
    let mut out = Vec::with_capacity(n);
    match ty {
        TensorType::F32 => out.extend(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        ),
        TensorType::F16 => out.extend(data.chunks_exact(2).map(f16)),
        TensorType::Bf16 => out.extend(
            data.chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        ),
        TensorType::Q4_0 => {
            for block in data.chunks_exact(18) {
                let d = f16(&block[..2]);
                let qs = &block[2..];
                out.extend(qs.iter().map(|q| ((q & 0x0f) as f32 - 8.0) * d));
                out.extend(qs.iter().map(|q| ((q >> 4) as f32 - 8.0) * d));
            }
        }
        TensorType::Q4_1 => {
            for block in data.chunks_exact(20) {
                let (d, m) = (f16(&block[..2]), f16(&block[2..4]));
                let qs = &block[4..];
                out.extend(qs.iter().map(|q| (q & 0x0f) as f32 * d + m));
                out.extend(qs.iter().map(|q| (q >> 4) as f32 * d + m));
            }
        }
        TensorType::Q8_0 => {
            for block in data.chunks_exact(34) {
                let d = f16(&block[..2]);
                out.extend(block[2..].iter().map(|&q| q as i8 as f32 * d));
            }
        }
    }
    Ok(out)
}

/// One tensor's entry in the file.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight` …).
    pub name: String,
    /// llama.cpp's dimensions, fastest-varying first (the reverse of PyTorch's shape).
    pub dims: Vec<usize>,
    /// Its type.
    pub ty: TensorType,
    offset: usize,
}

/// A parsed GGUF file held in memory.
#[derive(Debug)]
pub struct GgufFile {
    /// Metadata by key.
    pub metadata: HashMap<String, MetaValue>,
    /// The tensors, in file order.
    pub tensors: Vec<TensorInfo>,
    data: Vec<u8>,
    data_start: usize,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| bad(format!("truncated at byte {}", self.at)))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// A count that cannot exceed what the rest of the file could hold (`min_size` bytes each).
    fn count(&mut self, min_size: usize) -> Result<usize> {
        let n = self.u64()?;
        let left = (self.bytes.len() - self.at) / min_size.max(1);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or_else(|| {
                bad(format!(
                    "a count of {n} at byte {} exceeds the file",
                    self.at
                ))
            })
    }
    fn string(&mut self) -> Result<String> {
        let n = self.count(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| bad("a string is not UTF-8"))
    }
    fn value(&mut self, ty: u32, depth: u32) -> Result<MetaValue> {
        let int = |b: &[u8], signed: bool| -> i128 {
            let mut buf = [0u8; 16];
            buf[..b.len()].copy_from_slice(b);
            if signed && b[b.len() - 1] & 0x80 != 0 {
                buf[b.len()..].fill(0xff);
            }
            i128::from_le_bytes(buf)
        };
        Ok(match ty {
            0 => MetaValue::Int(int(self.take(1)?, false)),
            1 => MetaValue::Int(int(self.take(1)?, true)),
            2 => MetaValue::Int(int(self.take(2)?, false)),
            3 => MetaValue::Int(int(self.take(2)?, true)),
            4 => MetaValue::Int(int(self.take(4)?, false)),
            5 => MetaValue::Int(int(self.take(4)?, true)),
            6 => MetaValue::Float(f32::from_le_bytes(self.take(4)?.try_into().expect("4")) as f64),
            7 => MetaValue::Bool(self.take(1)?[0] != 0),
            8 => MetaValue::Str(self.string()?),
            9 if depth < 4 => {
                let item = self.u32()?;
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    items.push(self.value(item, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::Int(int(self.take(8)?, false)),
            11 => MetaValue::Int(int(self.take(8)?, true)),
            12 => MetaValue::Float(f64::from_le_bytes(self.take(8)?.try_into().expect("8"))),
            other => return Err(bad(format!("unknown metadata type {other}"))),
        })
    }
}

impl GgufFile {
    /// Parses a GGUF file (versions 2 and 3).
    pub fn parse(data: Vec<u8>) -> Result<Self> {
        let mut c = Cursor {
            bytes: &data,
            at: 0,
        };
        if c.take(4)? != b"GGUF" {
            return Err(bad("not a GGUF file (no GGUF magic)"));
        }
        let version = c.u32()?;
        if !(2..=3).contains(&version) {
            return Err(bad(format!(
                "version {version} is not supported (2 and 3 are)"
            )));
        }
        let n_tensors = c.count(24)?;
        let n_meta = c.count(12)?;
        let mut metadata = HashMap::new();
        for _ in 0..n_meta {
            let key = c.string()?;
            let ty = c.u32()?;
            let value = c.value(ty, 0)?;
            metadata.insert(key, value);
        }
        let mut tensors = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = c.string()?;
            let n_dims = c.u32()? as usize;
            if !(1..=4).contains(&n_dims) {
                return Err(bad(format!("tensor {name} has {n_dims} dimensions")));
            }
            let dims = (0..n_dims)
                .map(|_| {
                    c.u64().and_then(|d| {
                        usize::try_from(d).map_err(|_| bad(format!("tensor {name}: dimension {d}")))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let ty = TensorType::from_id(c.u32()?)?;
            let offset = usize::try_from(c.u64()?).map_err(|_| bad("tensor offset"))?;
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
            });
        }
        let align = metadata
            .get("general.alignment")
            .and_then(MetaValue::as_usize)
            .unwrap_or(32)
            .max(1);
        let data_start = c.at.div_ceil(align) * align;
        let file = Self {
            metadata,
            tensors,
            data,
            data_start,
        };
        for t in &file.tensors {
            file.tensor_bytes(t)?;
        }
        Ok(file)
    }

    fn tensor_bytes(&self, t: &TensorInfo) -> Result<&[u8]> {
        let n = t
            .dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad(format!("tensor {} is too large", t.name)))?;
        let len =
            t.ty.bytes(n)
                .ok_or_else(|| bad(format!("tensor {}: {n} values of {:?}", t.name, t.ty)))?;
        let start = self.data_start.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.data.len() => Ok(&self.data[s..e]),
            _ => Err(bad(format!("tensor {} lies outside the file", t.name))),
        }
    }

    /// A tensor dequantised to f32 in PyTorch's shape (dimensions reversed).
    pub fn tensor(&self, t: &TensorInfo) -> Result<Weight> {
        let n = t.dims.iter().product();
        let values = dequantize(t.ty, self.tensor_bytes(t)?, n)?;
        Weight::new(t.dims.iter().rev().copied().collect(), values)
    }

    fn meta(&self, key: &str) -> Result<&MetaValue> {
        self.metadata
            .get(key)
            .ok_or_else(|| bad(format!("metadata key {key} is missing")))
    }

    fn meta_usize(&self, key: &str) -> Result<usize> {
        self.meta(key)?
            .as_usize()
            .ok_or_else(|| bad(format!("metadata key {key} is not a count")))
    }

    /// The architecture (`general.architecture`).
    pub fn architecture(&self) -> Result<&str> {
        self.meta("general.architecture")?
            .as_str()
            .ok_or_else(|| bad("general.architecture is not a string"))
    }

    /// The decoder's config from the metadata (Llama and Qwen2 architectures).
    pub fn config(&self) -> Result<PolicyConfig> {
        let arch = self.architecture()?;
        if !matches!(arch, "llama" | "qwen2") {
            return Err(bad(format!(
                "architecture {arch} is not supported (llama and qwen2 are)"
            )));
        }
        let key = |k: &str| format!("{arch}.{k}");
        let embed = self
            .tensors
            .iter()
            .find(|t| t.name == "token_embd.weight")
            .ok_or_else(|| bad("no token_embd.weight tensor"))?;
        let vocab = embed.dims.get(1).copied().unwrap_or(0);
        let heads = self.meta_usize(&key("attention.head_count"))?;
        let kv = self
            .meta_usize(&key("attention.head_count_kv"))
            .unwrap_or(heads);
        let has = |name: &str| self.tensors.iter().any(|t| t.name == name);
        Ok(PolicyConfig::new(vocab)
            .with_d_model(self.meta_usize(&key("embedding_length"))?)
            .with_n_layers(self.meta_usize(&key("block_count"))?)
            .with_n_heads(heads)
            .with_n_kv_heads(kv)
            .with_d_ff(self.meta_usize(&key("feed_forward_length"))?)
            .with_rope_theta(
                self.metadata
                    .get(&key("rope.freq_base"))
                    .and_then(MetaValue::as_f64)
                    .unwrap_or(10_000.0),
            )
            .with_norm_eps(
                self.metadata
                    .get(&key("attention.layer_norm_rms_epsilon"))
                    .and_then(MetaValue::as_f64)
                    .unwrap_or(1e-5),
            )
            .with_attn_bias(has("blk.0.attn_q.bias"))
            .with_tie_embeddings(!has("output.weight"))
            .with_rope_interleaved(false)
            .with_context_length(self.meta_usize(&key("context_length")).unwrap_or(4096)))
    }

    /// Every tensor, dequantised, under its Hugging Face name; for the `llama` architecture
    /// the rotary row order of the query and key projections is put back (see
    /// [`unpermute_rotary`]).
    pub fn weights(&self, config: &PolicyConfig) -> Result<Weights> {
        let llama = self.architecture()? == "llama";
        let mut out = Weights::default();
        for t in &self.tensors {
            let name = hf_name(&t.name)
                .ok_or_else(|| bad(format!("tensor {} has no Hugging Face counterpart", t.name)))?;
            let mut w = self.tensor(t)?;
            if llama {
                let cols = if w.shape.len() == 2 { w.shape[1] } else { 1 };
                if name.contains(".q_proj.") {
                    w.values = unpermute_rotary(&w.values, config.n_heads, cols);
                } else if name.contains(".k_proj.") {
                    w.values = unpermute_rotary(&w.values, config.n_kv_heads, cols);
                }
            }
            out.insert(name, w);
        }
        Ok(out)
    }

    /// The tokenizer in the metadata as Hugging Face `tokenizer.json` text (byte-level BPE
    /// models: `tokenizer.ggml.model = gpt2`; the pre-tokenizer from `tokenizer.ggml.pre`).
    pub fn tokenizer_json(&self) -> Result<String> {
        let model = self
            .meta("tokenizer.ggml.model")?
            .as_str()
            .unwrap_or_default();
        if model != "gpt2" {
            return Err(bad(format!(
                "tokenizer model {model:?} is not supported (byte-level BPE, `gpt2`, is); \
                 import the model's Hugging Face directory instead"
            )));
        }
        let strings = |key: &str| -> Result<Vec<String>> {
            match self.meta(key)? {
                MetaValue::Array(items) => items
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| bad(format!("{key} holds a non-string")))
                    })
                    .collect(),
                _ => Err(bad(format!("{key} is not an array"))),
            }
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        let merges = strings("tokenizer.ggml.merges")?;
        let types: Vec<usize> = match self.metadata.get("tokenizer.ggml.token_type") {
            Some(MetaValue::Array(items)) => {
                items.iter().map(|v| v.as_usize().unwrap_or(1)).collect()
            }
            _ => vec![1; tokens.len()],
        };
        let pre = self
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(MetaValue::as_str)
            .unwrap_or("default");
        let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
        let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
        let pre_tokenizer = match pre {
            "default" | "gpt2" => byte_level(true),
            "smollm" => json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            "qwen2" => json!({"type": "Sequence", "pretokenizers": [
                split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                byte_level(false)]}),
            "llama-bpe" => json!({"type": "Sequence", "pretokenizers": [
                split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                byte_level(false)]}),
            other => {
                return Err(bad(format!(
                    "pre-tokenizer {other:?} is not supported (default, gpt2, smollm, qwen2 and \
                     llama-bpe are)"
                )));
            }
        };
        let vocab: serde_json::Map<String, Value> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), json!(i)))
            .collect();
        // Control (3) and user-defined (4) tokens are matched whole, before the BPE.
        let added: Vec<Value> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, ty))| matches!(ty, 3 | 4))
            .map(|(i, (t, ty))| {
                json!({"id": i, "content": t, "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": *ty == 4, "special": *ty == 3})
            })
            .collect();
        let tokenizer = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": vocab, "merges": merges}
        });
        Ok(tokenizer.to_string())
    }
}

/// The Hugging Face name of a llama.cpp tensor name.
fn hf_name(gguf: &str) -> Option<String> {
    let fixed = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_owned());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (part, kind) = rest.rsplit_once('.')?;
    let hf = match part {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_hugging_face() {
        assert_eq!(
            hf_name("blk.12.attn_q.weight").as_deref(),
            Some("model.layers.12.self_attn.q_proj.weight")
        );
        assert_eq!(
            hf_name("blk.0.ffn_down.weight").as_deref(),
            Some("model.layers.0.mlp.down_proj.weight")
        );
        assert_eq!(hf_name("output.weight").as_deref(), Some("lm_head.weight"));
        assert_eq!(hf_name("blk.x.attn_q.weight"), None);
        assert_eq!(hf_name("rope_freqs.weight"), None);
    }
}
