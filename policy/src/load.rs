//! Loading a policy from where it is kept: a sandgym checkpoint ([`checkpoint`]; a LoRA
//! checkpoint over the base model it names) or any model `--model` names ([`model`]: a known
//! name, a GGUF file, a Hugging Face directory or a checkpoint). The two call each other (a
//! LoRA checkpoint's base may be any model; a model may be a checkpoint), so they live
//! together above [`crate::checkpoint`] (storage) and [`crate::pretrained`] (formats).

use std::path::Path;

use burn::tensor::backend::Backend;

use crate::checkpoint::{Stored, apply_adapters, checkpoint_error, open};
use crate::model::{PolicyConfig, PolicyModel};
use crate::model_info::ModelInfo;
use crate::pretrained::{
    KNOWN_MODELS, KnownModel, Pretrained, absolute, load_gguf, load_hf, sha256_file,
};
use crate::{PolicyError, Result, Tokenizer};

/// Loads a checkpoint saved by [`crate::checkpoint::save`]: a LoRA checkpoint's base model
/// is loaded from where it names (checked against its digest) and the saved adapters and
/// value head are put on it. A missing, truncated or mismatched file is a
/// [`PolicyError::Checkpoint`] naming it, never a panic.
pub fn checkpoint<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(PolicyConfig, PolicyModel<B>, Tokenizer)> {
    let (config, stored, tokenizer) = open::<B>(dir, device)?;
    let model = match stored {
        Stored::Full(model) => *model,
        Stored::Adapted { lora, base } => {
            let loaded = model::<B>(&base.source, device).map_err(|e| {
                checkpoint_error(dir, format!("its base model {}: {e}", base.source))
            })?;
            if loaded.info.sha256 != base.sha256 {
                return Err(checkpoint_error(
                    dir,
                    format!(
                        "its base model {} has SHA-256 {}, the adapters were trained on {}",
                        base.source, loaded.info.sha256, base.sha256
                    ),
                ));
            }
            apply_adapters(dir, &lora, loaded.model, device)?
        }
    };
    Ok((config, model, tokenizer))
}

/// Loads what `spec` names: a known model (fetched into the cache on first use), a GGUF file,
/// a Hugging Face directory or a sandgym checkpoint directory.
pub fn model<B: Backend>(spec: &str, device: &B::Device) -> Result<Pretrained<B>> {
    if let Some(known) = KnownModel::find(spec) {
        let path = known.fetch()?;
        crate::blas::fetch_for_pretrained();
        let mut loaded = load_gguf(&path, device)?;
        if loaded.info.sha256 != known.sha256 {
            return Err(PolicyError::Import(format!(
                "{} in the cache has SHA-256 {}, expected {}; delete it and fetch again",
                path.display(),
                loaded.info.sha256,
                known.sha256
            )));
        }
        loaded.info.source = known.name.into();
        return Ok(loaded);
    }
    let path = Path::new(spec);
    if path.is_file() {
        return load_gguf(path, device);
    }
    let weights = ["model.mpk", "adapters.mpk"]
        .iter()
        .map(|f| path.join(f))
        .find(|p| p.is_file());
    if let Some(weights) = weights {
        let (config, model, tokenizer) = checkpoint::<B>(path, device)?;
        let sha256 = sha256_file(&weights)?;
        return Ok(Pretrained {
            config,
            model,
            tokenizer,
            info: ModelInfo {
                source: absolute(path),
                format: "checkpoint".into(),
                sha256,
            },
        });
    }
    if path.join("config.json").is_file() {
        return load_hf(path, device);
    }
    let names: Vec<&str> = KNOWN_MODELS.iter().map(|m| m.name).collect();
    Err(PolicyError::Import(format!(
        "{spec:?} is neither a known model ({}), a .gguf file, a Hugging Face directory nor a \
         sandgym checkpoint",
        names.join(", ")
    )))
}
