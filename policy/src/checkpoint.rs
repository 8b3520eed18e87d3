//! Checkpoints: model weights, config and tokenizer in one directory, written atomically;
//! read back whole with `load::checkpoint` (which also loads a LoRA checkpoint's base).

use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;

use crate::model::{PolicyConfig, PolicyModel};
use crate::model_info::ModelInfo;
use crate::{PolicyError, Result, Tokenizer};

const CONFIG: &str = "config.json";
const WEIGHTS: &str = "model"; // the recorder adds `.mpk`
const ADAPTERS: &str = "adapters"; // LoRA checkpoints: adapters and value head only
const TOKENIZER: &str = "tokenizer.json";

pub(crate) fn checkpoint_error(path: &Path, reason: impl std::fmt::Display) -> PolicyError {
    PolicyError::Checkpoint {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Saves `model`, its config and the tokenizer into `dir`. The files are written into a
/// sibling temporary directory that then replaces `dir`, so a crash never leaves a half
/// checkpoint behind. A model with LoRA adapters over a known base (`config.lora` and
/// `config.base` set) is saved as its adapters and value head only (`adapters.mpk`).
pub fn save<B: Backend>(
    dir: &Path,
    config: &PolicyConfig,
    model: &PolicyModel<B>,
    tokenizer: &Tokenizer,
) -> Result<()> {
    let parent = dir
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let name = dir
        .file_name()
        .ok_or_else(|| checkpoint_error(dir, "not a directory path"))?;
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| PolicyError::Io { path: p, source }
    };
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    config
        .save(tmp.join(CONFIG))
        .map_err(io(&tmp.join(CONFIG)))?;
    tokenizer.save(&tmp.join(TOKENIZER))?;
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    match (model.lora_state(), &config.lora, &config.base) {
        (Some(state), Some(_), Some(_)) => state
            .save_file(tmp.join(ADAPTERS), &recorder)
            .map_err(|e| checkpoint_error(&tmp, e))?,
        (None, Some(_), _) => {
            return Err(checkpoint_error(
                dir,
                "the config names LoRA adapters but the model has none",
            ));
        }
        _ => model
            .clone()
            .save_file(tmp.join(WEIGHTS), &recorder)
            .map_err(|e| checkpoint_error(&tmp, e))?,
    }
    let old = parent.join(format!(
        ".{}.old-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    if dir.exists() {
        std::fs::rename(dir, &old).map_err(io(dir))?;
    }
    std::fs::rename(&tmp, dir).map_err(io(dir))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// The model config of the checkpoint in `dir`, without its weights.
pub fn read_config(dir: &Path) -> Result<PolicyConfig> {
    let path = dir.join(CONFIG);
    let config = PolicyConfig::load(&path).map_err(|e| checkpoint_error(&path, e))?;
    config.validate().map_err(|e| checkpoint_error(&path, e))?;
    Ok(config)
}

/// Loads a LoRA checkpoint saved by [`save`] over `base`, the weights of its base model
/// already in memory (loaded once, shared by many checkpoints: a server swapping adapter
/// versions reads only the adapters). `base_info` says which model `base` is; a checkpoint
/// over another base (by digest), or one without adapters, is a [`PolicyError::Checkpoint`].
pub fn load_onto<B: Backend>(
    dir: &Path,
    base: &PolicyModel<B>,
    base_info: &ModelInfo,
    device: &B::Device,
) -> Result<(PolicyConfig, PolicyModel<B>, Tokenizer)> {
    let config = read_config(dir)?;
    let (Some(lora), Some(info)) = (&config.lora, &config.base) else {
        return Err(checkpoint_error(
            dir,
            "not a LoRA checkpoint over a base model",
        ));
    };
    if info.sha256 != base_info.sha256 {
        return Err(checkpoint_error(
            dir,
            format!(
                "its base model has SHA-256 {}, not the loaded base's {}",
                info.sha256, base_info.sha256
            ),
        ));
    }
    let tokenizer = Tokenizer::load(&dir.join(TOKENIZER))?;
    if tokenizer.vocab_size() != config.vocab_size {
        return Err(checkpoint_error(
            dir,
            format!(
                "the tokenizer has {} tokens but the model expects {}",
                tokenizer.vocab_size(),
                config.vocab_size
            ),
        ));
    }
    let model = apply_adapters(dir, lora, base.clone(), device)?;
    Ok((config, model, tokenizer))
}

/// What a checkpoint directory holds, read but not yet put together: the whole model, or
/// adapters to put on the base model it names (`load::checkpoint` loads that base).
pub(crate) enum Stored<B: Backend> {
    /// Every weight.
    Full(Box<PolicyModel<B>>),
    /// A LoRA checkpoint: its adapters' config and its base model's identity.
    Adapted {
        /// The adapters' config.
        lora: crate::LoraConfig,
        /// The base model they were trained on.
        base: ModelInfo,
    },
}

/// Reads a checkpoint saved by [`save`]: its config, its tokenizer and its weights (a LoRA
/// checkpoint's adapters are read when they are put on their base, [`apply_adapters`]). A
/// missing, truncated or mismatched file is a [`PolicyError::Checkpoint`] naming it, never a
/// panic.
pub(crate) fn open<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(PolicyConfig, Stored<B>, Tokenizer)> {
    let config_path = dir.join(CONFIG);
    let config = PolicyConfig::load(&config_path).map_err(|e| checkpoint_error(&config_path, e))?;
    config
        .validate()
        .map_err(|e| checkpoint_error(&config_path, e))?;
    let tokenizer = Tokenizer::load(&dir.join(TOKENIZER))?;
    if tokenizer.vocab_size() != config.vocab_size {
        return Err(checkpoint_error(
            dir,
            format!(
                "the tokenizer has {} tokens but the model expects {}",
                tokenizer.vocab_size(),
                config.vocab_size
            ),
        ));
    }
    if let (Some(lora), Some(base)) = (&config.lora, &config.base) {
        let stored = Stored::Adapted {
            lora: lora.clone(),
            base: base.clone(),
        };
        return Ok((config, stored, tokenizer));
    }
    let weights = dir.join(format!("{WEIGHTS}.mpk"));
    let model = config.init::<B>(device);
    let expected = crate::model::param_shapes(&model);
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    // burn panics on some malformed records (shape mismatches); keep that inside this call.
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.load_file(dir.join(WEIGHTS), &recorder, device)
    }));
    match loaded {
        Ok(Ok(model)) => {
            // burn accepts tensors of any shape into a parameter; a checkpoint whose weights do
            // not fit its config must not load silently.
            if crate::model::param_shapes(&model) != expected {
                return Err(checkpoint_error(
                    &weights,
                    "the weights do not match the config (shape mismatch)",
                ));
            }
            Ok((config, Stored::Full(Box::new(model)), tokenizer))
        }
        Ok(Err(e)) => Err(checkpoint_error(&weights, e)),
        Err(_) => Err(checkpoint_error(
            &weights,
            "the weights do not match the config (shape mismatch)",
        )),
    }
}

/// `base` with the adapters saved in `dir` (a LoRA checkpoint's `adapters.mpk`), checked
/// against `lora`'s shapes.
pub(crate) fn apply_adapters<B: Backend>(
    dir: &Path,
    lora: &crate::LoraConfig,
    base: PolicyModel<B>,
    device: &B::Device,
) -> Result<PolicyModel<B>> {
    let model = base.with_lora(lora, device);
    let state = model.lora_state().expect("adapters were just added");
    let path = dir.join(format!("{ADAPTERS}.mpk"));
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let expected = crate::model::param_shapes(&model);
    let state = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        state.load_file(dir.join(ADAPTERS), &recorder, device)
    }))
    .map_err(|_| checkpoint_error(&path, "the adapters do not match the config"))?
    .map_err(|e| checkpoint_error(&path, e))?;
    let model = model.with_lora_state(state);
    if crate::model::param_shapes(&model) != expected {
        return Err(checkpoint_error(
            &path,
            "the adapters do not match the config (shape mismatch)",
        ));
    }
    Ok(model)
}
