//! Backends and device selection.

use std::fmt;
use std::str::FromStr;

use burn::backend::{Autodiff, Flex};

use crate::{PolicyError, Result};

/// The CPU backend for inference: burn-flex (f32). Its matmuls run on the `gemm` crate and
/// take transposed and strided views without copying, and its elementwise ops work in place
/// on tensors nobody else holds; on SmolLM2-135M (`sandgym bench policy`) it decodes twice as
/// fast as burn-ndarray did (101 against 46 tokens/s at batch 64).
pub type Cpu = Flex<f32>;
/// The CPU backend for training.
pub type CpuTrain = Autodiff<Cpu>;

/// The CUDA backend for inference (feature `cuda`).
#[cfg(feature = "cuda")]
pub type Gpu = burn::backend::Cuda<f32>;
/// The CUDA backend for training (feature `cuda`).
#[cfg(feature = "cuda")]
pub type GpuTrain = Autodiff<Gpu>;

/// The device of the default (CPU) backend.
pub fn select_device() -> burn::backend::flex::FlexDevice {
    Default::default()
}

/// Where the policy runs.
///
/// ```
/// use sandgym_policy::DeviceKind;
/// let kind: DeviceKind = "cpu".parse()?;
/// assert_eq!(kind.check()?, DeviceKind::Cpu);
/// assert!("tpu".parse::<DeviceKind>().is_err());
/// # Ok::<(), sandgym_policy::PolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// burn-flex on the CPU (always available).
    #[default]
    Cpu,
    /// burn-cuda on the first NVIDIA GPU (feature `cuda`, libcuda present).
    Cuda,
}

impl DeviceKind {
    /// Confirms that this device can be used here, so that a missing GPU is a clear error
    /// before any work starts (burn-cuda panics in a worker thread when libcuda is absent).
    pub fn check(self) -> Result<Self> {
        match self {
            DeviceKind::Cpu => Ok(self),
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda => Err(PolicyError::Device(
                "this build has no CUDA support; rebuild with `--features cuda`".into(),
            )),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => match load_libcuda() {
                Ok(()) => Ok(self),
                Err(why) => Err(PolicyError::Device(format!(
                    "no NVIDIA driver found: libcuda.so.1 does not load ({why})"
                ))),
            },
        }
    }
}

/// Work that runs on whichever backend a [`DeviceKind`] selects. Its `run` is generic over the
/// (training) backend, so the CPU/CUDA choice is written once, in [`DeviceKind::dispatch`];
/// inference work uses `B::InnerBackend`.
pub trait OnDevice {
    /// What the work returns.
    type Output;
    /// Runs the work on backend `B` and its default device.
    fn run<B: burn::tensor::backend::AutodiffBackend>(self, device: B::Device) -> Self::Output;
}

impl DeviceKind {
    /// Runs `work` on this device's backend ([`CpuTrain`], or `GpuTrain` with the `cuda`
    /// feature), after [`check`](Self::check)ing that the device can be used.
    pub fn dispatch<W: OnDevice>(self, work: W) -> Result<W::Output> {
        match self.check()? {
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => Ok(work.run::<GpuTrain>(Default::default())),
            _ => Ok(work.run::<CpuTrain>(Default::default())),
        }
    }
}

impl FromStr for DeviceKind {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cpu" => Ok(DeviceKind::Cpu),
            "cuda" | "gpu" => Ok(DeviceKind::Cuda),
            other => Err(PolicyError::Device(format!(
                "unknown device `{other}`; expected cpu or cuda"
            ))),
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

/// Whether the NVIDIA driver library loads, asked of the system's dynamic loader itself, so
/// that `LD_LIBRARY_PATH`, the loader's cache and a container runtime's mounts all count.
#[cfg(feature = "cuda")]
fn load_libcuda() -> std::result::Result<(), String> {
    // SAFETY: loading libcuda runs its initialisers, as burn-cuda's own loading does next; the
    // library is closed again at once and none of its symbols is called here.
    unsafe { libloading::Library::new("libcuda.so.1") }
        .map(drop)
        .map_err(|e| e.to_string())
}
