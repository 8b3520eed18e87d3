//! Pretrained models: Hugging Face directories (safetensors), GGUF files, and models sandgym
//! knows by name, loaded into the same decoder the trainer improves.
//!
//! `load::model` takes what a user writes after `--model`:
//! - a known name (see [`KNOWN_MODELS`]), fetched into the cache on first use;
//! - a Hugging Face directory (`config.json`, `model.safetensors` or sharded, `tokenizer.json`),
//!   Llama (SmolLM2 included) or Qwen2;
//! - a `.gguf` file (F32, F16, BF16, Q8_0, Q4_0, Q4_1 tensors, dequantised to f32; the
//!   tokenizer rebuilt from the file's metadata);
//! - a sandgym checkpoint directory.
//!
//! The tokenizer's chat format (ChatML for SmolLM2 and Qwen2) decides how conversations are
//! rendered; see [`ChatFormat`](crate::ChatFormat).

mod gguf;
mod hf;
mod weights;

use std::path::Path;

use burn::tensor::backend::Backend;

pub use crate::fetch::{
    KNOWN_MODELS, KnownModel, RegistryFile, cache_dir, sha256_file, sha256_hex,
};
pub use gguf::{GgufFile, MetaValue, TensorInfo, TensorType, dequantize};
pub use hf::{chat_template, config_from_json, read_safetensors};
pub use weights::{Weight, Weights, unpermute_rotary};

pub use crate::model_info::ModelInfo;

use crate::model::{PolicyConfig, PolicyModel};
use crate::{PolicyError, Result, Tokenizer};

/// A loaded model with its config, tokenizer and identity.
#[derive(Debug)]
pub struct Pretrained<B: Backend> {
    /// The decoder's config.
    pub config: PolicyConfig,
    /// The decoder.
    pub model: PolicyModel<B>,
    /// The model's tokenizer (its chat format detected).
    pub tokenizer: Tokenizer,
    /// Where it came from.
    pub info: ModelInfo,
}

/// The absolute form of a path the user gave, so that a checkpoint naming it as its base
/// loads from any working directory.
pub(crate) fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| PolicyError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Builds the decoder from `weights`; tensors left over are an error (they would be silently
/// ignored parts of the model).
fn build<B: Backend>(
    config: &PolicyConfig,
    mut weights: Weights,
    device: &B::Device,
) -> Result<PolicyModel<B>> {
    let (model, rest) = hf::decoder_from_weights(config, &mut weights, device)?;
    let rest: Vec<String> = rest
        .into_iter()
        .filter(|n| !n.ends_with("rotary_emb.inv_freq"))
        .collect();
    if !rest.is_empty() {
        return Err(PolicyError::Import(format!(
            "tensors the decoder has no place for: {}",
            rest.join(", ")
        )));
    }
    Ok(model)
}

fn check_vocab(config: &PolicyConfig, tokenizer: &Tokenizer) -> Result<()> {
    if tokenizer.vocab_size() != config.vocab_size {
        return Err(PolicyError::Import(format!(
            "the tokenizer has {} tokens but the model's embedding has {} rows",
            tokenizer.vocab_size(),
            config.vocab_size
        )));
    }
    Ok(())
}

/// Loads a GGUF file.
pub fn load_gguf<B: Backend>(path: &Path, device: &B::Device) -> Result<Pretrained<B>> {
    let bytes = read(path)?;
    let sha256 = sha256_hex(&bytes);
    let file = GgufFile::parse(bytes)?;
    let config = file.config()?;
    let tokenizer = Tokenizer::from_json(&file.tokenizer_json()?)?;
    check_vocab(&config, &tokenizer)?;
    let weights = file.weights(&config)?;
    drop(file);
    let model = build(&config, weights, device)?;
    Ok(Pretrained {
        config,
        model,
        tokenizer,
        info: ModelInfo {
            source: absolute(path),
            format: "gguf".into(),
            sha256,
        },
    })
}

/// Loads a Hugging Face directory.
pub fn load_hf<B: Backend>(dir: &Path, device: &B::Device) -> Result<Pretrained<B>> {
    let config_text = String::from_utf8(read(&dir.join("config.json"))?)
        .map_err(|_| PolicyError::Import("config.json is not UTF-8".into()))?;
    let config = config_from_json(&config_text)?;
    let tokenizer = Tokenizer::load(&dir.join("tokenizer.json"))?;
    if let Some(template) = chat_template(dir)
        && template.contains("<|im_start|>")
        && tokenizer.format().name != "chatml"
    {
        return Err(PolicyError::Import(format!(
            "the chat template is ChatML but the tokenizer's special tokens say {}",
            tokenizer.format().name
        )));
    }
    check_vocab(&config, &tokenizer)?;
    let (weights, sha256) = hf::weights(dir)?;
    let model = build(&config, weights, device)?;
    Ok(Pretrained {
        config,
        model,
        tokenizer,
        info: ModelInfo {
            source: absolute(dir),
            format: "hf".into(),
            sha256,
        },
    })
}
