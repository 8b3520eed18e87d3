//! Compiled guests cached on disk, keyed by the hash of the guest bytes and the engine's
//! compilation settings.
//!
//! A cached artifact is native code that runs outside the sandbox's checks once loaded, so
//! the cache only trusts what this user wrote:
//! - the directory must be owned by the process's user and not writable by group or others
//!   (it is created with mode 0700, and made so if this user's directory was looser);
//!   another user's directory is not read from or written to at all;
//! - every artifact carries an HMAC-SHA256 of its bytes under a secret key kept in the
//!   directory (`.key`, 32 random bytes, mode 0600), checked before wasmtime sees the bytes.
//!   An artifact planted or changed by anyone who cannot read the key, or a corrupted one, is
//!   recompiled and rewritten.
//!
//! This stops other users and processes that can write the cache but not read the key; it
//! cannot stop code running as the same user, which could change the binary itself.

use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::{Result, SandboxError};

/// Bytes of the secret key and of each artifact's tag.
const KEY_BYTES: usize = 32;
/// The key's file name in the cache directory.
const KEY_FILE: &str = ".key";

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
/// An entry whose tag does not verify (changed, planted, truncated) or that wasmtime refuses
/// (another version) is recompiled; an untrusted directory is not used at all.
pub(crate) fn load(engine: &Engine, wasm: &[u8], dir: Option<&Path>) -> Result<Component> {
    let compile = || Component::new(engine, wasm).map_err(SandboxError::Load);
    let Some(dir) = dir else {
        return compile();
    };
    let Some(secret) = open_dir(dir) else {
        return compile();
    };
    let path = dir.join(format!("{}.cwasm", key(engine, wasm)));
    if let Some(bytes) = read_tagged(&secret, &path) {
        // SAFETY: the bytes carry a valid tag under this cache's secret key, so this user's
        // sandgym wrote them with `Component::serialize`; wasmtime also checks the header and
        // version and refuses an incompatible artifact, on which we recompile.
        if let Ok(component) = unsafe { Component::deserialize(engine, &bytes) } {
            return Ok(component);
        }
    }
    let component = compile()?;
    if let Ok(bytes) = component.serialize() {
        // The cache is an optimisation: failing to write it is not an error.
        let _ = write_tagged(&secret, dir, &path, &bytes);
    }
    Ok(component)
}

/// Creates `dir` (mode 0700) if needed and returns its secret key, or `None` when the
/// directory is not trusted (another owner, group- or world-writable) or unusable.
fn open_dir(dir: &Path) -> Option<[u8; KEY_BYTES]> {
    create_private_dir(dir).ok()?;
    tighten(dir);
    if !private(dir) {
        return None;
    }
    let key_path = dir.join(KEY_FILE);
    match fs::read(&key_path) {
        Ok(bytes) if bytes.len() == KEY_BYTES && private(&key_path) => bytes.try_into().ok(),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut secret = [0u8; KEY_BYTES];
            getrandom::fill(&mut secret).ok()?;
            let tmp = dir.join(format!("{KEY_FILE}.{}.tmp", std::process::id()));
            write_private(&tmp, &secret).ok()?;
            // Another process may have made the key meanwhile: keep the one on disk.
            if fs::hard_link(&tmp, &key_path).is_err() {
                let _ = fs::remove_file(&tmp);
                let bytes = fs::read(&key_path).ok()?;
                return bytes.try_into().ok();
            }
            let _ = fs::remove_file(&tmp);
            Some(secret)
        }
        Err(_) => None,
    }
}

/// The artifact in `path` without its tag, if the tag verifies under `secret`.
fn read_tagged(secret: &[u8; KEY_BYTES], path: &Path) -> Option<Vec<u8>> {
    if !private(path) {
        return None;
    }
    let mut bytes = fs::read(path).ok()?;
    let body = bytes.len().checked_sub(KEY_BYTES)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(&bytes[..body]);
    mac.verify_slice(&bytes[body..]).ok()?;
    bytes.truncate(body);
    Some(bytes)
}

fn write_tagged(
    secret: &[u8; KEY_BYTES],
    dir: &Path,
    path: &PathBuf,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(std::io::Error::other)?;
    mac.update(bytes);
    let mut tagged = bytes.to_vec();
    tagged.extend_from_slice(&mac.finalize().into_bytes());
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    write_private(&tmp, &tagged)?;
    fs::rename(&tmp, path)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::write(path, bytes)
}

/// Makes a directory of this user's that others may write (a loose umask) private (0700).
#[cfg(unix)]
fn tighten(dir: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if let Ok(m) = fs::symlink_metadata(dir)
        && m.is_dir()
        && m.uid() == me
        && m.mode() & 0o022 != 0
    {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
}

#[cfg(not(unix))]
fn tighten(_dir: &Path) {}

/// Whether `path` is owned by this process's user and not writable by group or others.
#[cfg(unix)]
fn private(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    fs::symlink_metadata(path).is_ok_and(|m| m.uid() == me && m.mode() & 0o022 == 0)
}

#[cfg(not(unix))]
fn private(_path: &Path) -> bool {
    true
}
