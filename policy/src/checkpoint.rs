//! Checkpoints: model weights, config and tokenizer in one directory, written atomically.

use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;

use crate::model::{PolicyConfig, PolicyModel};
use crate::{PolicyError, Result, Tokenizer};

const CONFIG: &str = "config.json";
const WEIGHTS: &str = "model"; // the recorder adds `.mpk`
const TOKENIZER: &str = "tokenizer.json";

fn checkpoint_error(path: &Path, reason: impl std::fmt::Display) -> PolicyError {
    PolicyError::Checkpoint {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Saves `model`, its config and the tokenizer into `dir`. The files are written into a
/// sibling temporary directory that then replaces `dir`, so a crash never leaves a half
/// checkpoint behind.
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
    model
        .clone()
        .save_file(
            tmp.join(WEIGHTS),
            &NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
        )
        .map_err(|e| checkpoint_error(&tmp, e))?;
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

/// Loads a checkpoint saved by [`save`]. A missing, truncated or mismatched file is a
/// [`PolicyError::Checkpoint`] naming it, never a panic.
pub fn load<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(PolicyConfig, PolicyModel<B>, Tokenizer)> {
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
            Ok((config, model, tokenizer))
        }
        Ok(Err(e)) => Err(checkpoint_error(&weights, e)),
        Err(_) => Err(checkpoint_error(
            &weights,
            "the weights do not match the config (shape mismatch)",
        )),
    }
}
