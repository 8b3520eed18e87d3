//! Limits and settings of a [`Sandbox`](crate::Sandbox).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How guest CPU time is bounded per call.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuLimit {
    /// Wall-clock deadline per call, enforced by epoch interruption (cheap: ~11–15 % overhead).
    /// The epoch ticks every millisecond and each tick compares the clock with the call's
    /// deadline, so a call ends within a few milliseconds of it however much of its time
    /// went into host calls.
    Deadline(#[serde(with = "millis")] Duration),
    /// Deterministic instruction budget per call (fuel; ~30–50 % overhead). The same guest and
    /// inputs always stop at the same point, whatever the machine's load.
    Fuel(u64),
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Per-instance resource limits. All are on by default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// CPU per call into the guest.
    pub cpu: CpuLimit,
    /// CPU for making an instance: instantiation and the guest's `init` (which may build
    /// large state, e.g. a database of thousands of rows). `None` gives
    /// [`INIT_CPU_FACTOR`] times `cpu`; a value must be of the same kind (deadline or fuel).
    pub init_cpu: Option<CpuLimit>,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: usize,
    /// Table elements per table.
    pub table_elements: usize,
    /// The guest's wasm stack, in bytes.
    pub stack_bytes: usize,
    /// Largest string or byte list a guest may return from one call (observation, spec,
    /// snapshot, error detail), in bytes. The copy out of the guest itself is bounded by it
    /// (plus 64 KiB for the rest of a call's result), so a larger value is never copied.
    pub max_output_bytes: usize,
    /// Bytes of guest stderr kept: the tail of what the current call wrote (for panic
    /// messages). Writing more never fails; the oldest bytes are dropped.
    pub stderr_bytes: usize,
    /// Resource handles (WASI pollables and streams, the guest's own resources) an instance may
    /// hold at once.
    pub max_handles: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu: CpuLimit::Deadline(Duration::from_secs(2)),
            init_cpu: None,
            memory_bytes: 256 << 20,
            table_elements: 100_000,
            stack_bytes: 512 << 10,
            max_output_bytes: 1 << 20,
            stderr_bytes: 64 << 10,
            max_handles: 10_000,
        }
    }
}

/// How many times the per-call CPU budget making an instance gets when
/// [`Limits::init_cpu`] is not set (30 s under the default 2 s deadline).
pub const INIT_CPU_FACTOR: u32 = 15;

impl Limits {
    /// The CPU budget for making an instance ([`Limits::init_cpu`], else
    /// [`INIT_CPU_FACTOR`] × [`Limits::cpu`]).
    pub fn init_budget(&self) -> CpuLimit {
        match (self.init_cpu, self.cpu) {
            (Some(init), _) => init,
            (None, CpuLimit::Deadline(d)) => CpuLimit::Deadline(d.saturating_mul(INIT_CPU_FACTOR)),
            (None, CpuLimit::Fuel(f)) => {
                CpuLimit::Fuel(f.saturating_mul(u64::from(INIT_CPU_FACTOR)))
            }
        }
    }
}

/// Settings of a [`Sandbox`](crate::Sandbox): limits for every instance, the instance pool and
/// the compiled-module cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Limits applied to every guest instance.
    pub limits: Limits,
    /// Use wasmtime's pooling allocator (pre-reserved instance slots; fast instantiation).
    pub pooling: bool,
    /// Most guest instances alive at once when pooling.
    pub max_instances: u32,
    /// Where compiled guests are cached; `None` disables the disk cache. The default is
    /// `$SANDGYM_CACHE_DIR`, else `$XDG_CACHE_HOME/sandgym`, else `~/.cache/sandgym`.
    pub cache_dir: Option<PathBuf>,
    /// Give every episode a fresh instance (strongest isolation) instead of reusing the
    /// instance across episodes until it faults (fastest; the guest's `reset` must clear its
    /// state, which `check_env` verifies).
    pub fresh_instance_per_episode: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            pooling: true,
            max_instances: 256,
            cache_dir: default_cache_dir(),
            fresh_instance_per_episode: false,
        }
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("SANDGYM_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("sandgym")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("sandgym")))
}
