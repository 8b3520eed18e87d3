//! [`ModelInfo`]: which model a policy was made from, recorded with it.

use serde::{Deserialize, Serialize};

/// Where a model came from, saved beside anything trained from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// What the user named (`smollm2-135m-instruct`, a path).
    pub source: String,
    /// `gguf`, `hf` or `checkpoint`.
    pub format: String,
    /// SHA-256 of the weights: the GGUF file; for a Hugging Face directory, of the
    /// safetensors files' digests in name order; for a checkpoint, of `model.mpk` (or
    /// `adapters.mpk`).
    pub sha256: String,
}
