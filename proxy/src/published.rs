//! The directory where a learner publishes policy versions and a serving process picks them
//! up.
//!
//! ```text
//! DIR/v1/policy/           the checkpoint (a LoRA model: its adapters only)
//! DIR/v1/manifest.json     what it was trained on (Manifest)
//! DIR/decisions.jsonl      the server's decisions: staged, promoted, rolled back, refused
//! ```
//!
//! A version appears whole or not at all: it is written into a hidden sibling and renamed
//! into place. Versions are `v{n}` with increasing `n`.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use sandgym_policy::{PolicyConfig, PolicyModel, Tokenizer, checkpoint};
use serde::{Deserialize, Serialize};

use crate::{ProxyError, Result};

/// The file of a version describing it.
pub const MANIFEST: &str = "manifest.json";
/// The server's decision log in the publish directory.
pub const DECISIONS: &str = "decisions.jsonl";

/// What a published version was trained on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Its version (`v{n}`).
    pub version: String,
    /// Its number `n`.
    pub number: u64,
    /// The rollouts of the update that made it (each trained on once).
    pub rollouts: Vec<String>,
    /// Their mean reward.
    pub reward_mean: f64,
    /// Unix time of publication, microseconds.
    pub published_us: i64,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ProxyError + '_ {
    move |e| ProxyError::Published {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// The directory of version `n` in `dir`.
pub fn version_dir(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("v{number}"))
}

/// The policy checkpoint of version `n` in `dir` (beside its manifest).
pub fn version_policy(dir: &Path, number: u64) -> PathBuf {
    policy_in(&version_dir(dir, number))
}

/// The policy checkpoint inside a version's directory.
fn policy_in(version: &Path) -> PathBuf {
    version.join("policy")
}

/// Publishes `model` as version `manifest.number` in `dir`, atomically: the version is
/// written into a hidden sibling, then renamed into place. An existing version of that number
/// is an error (versions are never rewritten).
pub fn publish<B: Backend>(
    dir: &Path,
    manifest: &Manifest,
    config: &PolicyConfig,
    model: &PolicyModel<B>,
    tokenizer: &Tokenizer,
) -> Result<PathBuf> {
    let target = version_dir(dir, manifest.number);
    if target.exists() {
        return Err(ProxyError::Published {
            path: target,
            reason: "this version is already published".into(),
        });
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!(".v{}.tmp", manifest.number));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    checkpoint::save(&policy_in(&tmp), config, model, tokenizer)?;
    let path = tmp.join(MANIFEST);
    std::fs::write(
        &path,
        serde_json::to_string_pretty(manifest).expect("a manifest serialises"),
    )
    .map_err(io(&path))?;
    std::fs::rename(&tmp, &target).map_err(io(&target))?;
    Ok(target)
}

/// The versions published in `dir` (whole ones only), by number; a version whose manifest
/// cannot be read is listed with the error instead.
pub fn list(dir: &Path) -> Result<Vec<(u64, Result<Manifest>)>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(io(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = name.strip_prefix('v').and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let path = entry.path().join(MANIFEST);
        let manifest = std::fs::read_to_string(&path)
            .map_err(io(&path))
            .and_then(|text| {
                serde_json::from_str::<Manifest>(&text).map_err(|e| ProxyError::Published {
                    path: path.clone(),
                    reason: e.to_string(),
                })
            });
        found.push((number, manifest));
    }
    found.sort_by_key(|(n, _)| *n);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandgym_policy::Cpu;

    #[test]
    fn versions_are_published_whole_listed_in_order_and_never_rewritten() {
        let dir = std::env::temp_dir().join(format!("sandgym-published-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (config, tokenizer) = crate::test_model::tiny();
        let model = config.init::<Cpu>(&Default::default());
        let manifest = |number| Manifest {
            version: format!("v{number}"),
            number,
            rollouts: vec!["r1".into()],
            reward_mean: 0.5,
            published_us: 0,
        };
        for n in [10, 2] {
            publish(&dir, &manifest(n), &config, &model, &tokenizer).unwrap();
        }
        let err = publish(&dir, &manifest(2), &config, &model, &tokenizer).unwrap_err();
        assert!(err.to_string().contains("already published"), "{err}");
        // A half-written version (the hidden sibling) and stray files are not listed.
        std::fs::create_dir_all(dir.join(".v11.tmp")).unwrap();
        std::fs::create_dir_all(dir.join("v12")).unwrap();
        let listed = list(&dir).unwrap();
        let numbers: Vec<u64> = listed.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [2, 10, 12]);
        assert_eq!(listed[1].1.as_ref().unwrap(), &manifest(10));
        assert!(listed[2].1.is_err());
        let (_, loaded, _) =
            sandgym_policy::load::checkpoint::<Cpu>(&version_policy(&dir, 2), &Default::default())
                .unwrap();
        drop(loaded);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
