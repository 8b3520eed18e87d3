//! Backends and device selection.

use burn::backend::{Autodiff, NdArray};

/// The CPU backend for inference (ndarray).
pub type Cpu = NdArray<f32>;
/// The CPU backend for training.
pub type CpuTrain = Autodiff<Cpu>;

/// The CUDA backend (feature `cuda`).
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Cuda<f32>;

/// The device of the default (CPU) backend.
pub fn select_device() -> burn::backend::ndarray::NdArrayDevice {
    Default::default()
}
