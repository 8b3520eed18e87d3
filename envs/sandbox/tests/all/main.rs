//! Integration tests of the sandbox (one binary, as wasmtime lays out its tests).

mod faults;
mod guests;
mod hostile;
mod parity;

use std::sync::OnceLock;
use std::time::Duration;

use sandgym_sandbox::{CpuLimit, Limits, Sandbox, SandboxConfig};

/// A sandbox with tight limits, shared by the tests of this binary.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        Sandbox::new(test_config(CpuLimit::Deadline(Duration::from_millis(300)))).unwrap()
    })
}

pub fn test_config(cpu: CpuLimit) -> SandboxConfig {
    SandboxConfig {
        limits: Limits {
            cpu,
            memory_bytes: 128 << 20,
            ..Limits::default()
        },
        max_instances: 32,
        cache_dir: Some(
            std::env::temp_dir().join(format!("sandgym-test-cache-{}", std::process::id())),
        ),
        ..SandboxConfig::default()
    }
}
