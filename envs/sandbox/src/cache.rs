//! Compiled guests cached on disk, keyed by the hash of the guest bytes and the engine's
//! compilation settings.

use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::{Result, SandboxError};

/// The cache key of `wasm` for `engine`: SHA-256 of the bytes plus a hash of everything in the
/// engine's configuration that affects compiled code.
pub(crate) fn key(engine: &Engine, wasm: &[u8]) -> String {
    let digest = Sha256::digest(wasm);
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}-{:016x}", h.finish())
}

/// Loads `wasm` from the cache in `dir`, or compiles it and stores the result atomically.
/// A cache entry that cannot be read (truncated, from another wasmtime) is recompiled.
pub(crate) fn load(engine: &Engine, wasm: &[u8], dir: Option<&Path>) -> Result<Component> {
    let Some(dir) = dir else {
        return Component::new(engine, wasm).map_err(SandboxError::Load);
    };
    let path = dir.join(format!("{}.cwasm", key(engine, wasm)));
    if path.is_file() {
        // SAFETY: the file was written by `Component::serialize` of this process's wasmtime
        // into the user's own cache directory; wasmtime checks its header and version and
        // rejects an incompatible artifact with an error, on which we recompile.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &path) } {
            return Ok(component);
        }
    }
    let component = Component::new(engine, wasm).map_err(SandboxError::Load)?;
    if let Ok(bytes) = component.serialize() {
        // The cache is an optimisation: failing to write it is not an error.
        let _ = write_atomic(dir, &path, &bytes);
    }
    Ok(component)
}

fn write_atomic(dir: &Path, path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}
