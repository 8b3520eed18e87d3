//! Named f32 tensors in Hugging Face's Llama layout, the common ground of every import.

use std::collections::HashMap;

use crate::{PolicyError, Result};

/// One tensor: row-major f32 values and their shape (PyTorch's, e.g. `[out, in]` for a
/// projection).
#[derive(Clone, Debug, PartialEq)]
pub struct Weight {
    /// The shape.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values, row-major.
    pub values: Vec<f32>,
}

impl Weight {
    /// A tensor of `shape` holding `values`; the count must match.
    pub fn new(shape: Vec<usize>, values: Vec<f32>) -> Result<Self> {
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(values.len()) {
            return Err(PolicyError::Import(format!(
                "a tensor of shape {shape:?} cannot hold {} values",
                values.len()
            )));
        }
        Ok(Self { shape, values })
    }
}

/// A model's tensors by their Hugging Face names (`model.layers.0.self_attn.q_proj.weight`
/// …), whatever file they came from: safetensors are read as they are, GGUF tensors are renamed
/// and llama.cpp's rotary row order is undone, so one loader builds the decoder from both.
#[derive(Debug, Default)]
pub struct Weights {
    tensors: HashMap<String, Weight>,
}

impl Weights {
    /// Adds a tensor (a later one of the same name replaces it).
    pub fn insert(&mut self, name: impl Into<String>, weight: Weight) {
        self.tensors.insert(name.into(), weight);
    }

    /// Removes and returns `name`, checking its shape.
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Weight> {
        let w = self
            .tensors
            .remove(name)
            .ok_or_else(|| PolicyError::Import(format!("the checkpoint has no tensor `{name}`")))?;
        if w.shape != shape {
            return Err(PolicyError::Import(format!(
                "tensor `{name}` has shape {:?}, the config implies {shape:?}",
                w.shape
            )));
        }
        Ok(w)
    }

    /// Whether `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The names of the tensors not taken yet, sorted.
    pub fn remaining(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tensors.keys().cloned().collect();
        names.sort();
        names
    }

    /// The number of tensors held.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// llama.cpp's converter reorders the rows of `q_proj`/`k_proj` (and their biases) so that each
/// head's rotary pairs are interleaved; this puts them back in Hugging Face's half-split order.
/// `rows` is `heads * head_dim`; each row holds `cols` values (1 for a bias).
///
/// HF row `h·d + s·d/2 + j` is stored at row `h·d + 2j + s`.
pub fn unpermute_rotary(values: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    let rows = values.len() / cols.max(1);
    let head_dim = rows / heads.max(1);
    let half = head_dim / 2;
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for s in 0..2 {
            for j in 0..half {
                let hf = h * head_dim + s * half + j;
                let gg = h * head_dim + 2 * j + s;
                out[hf * cols..(hf + 1) * cols]
                    .copy_from_slice(&values[gg * cols..(gg + 1) * cols]);
            }
        }
    }
    out
}
