//! The reward plugins `--reward` names: a component file (`rubric.wasm`) or a plugin bundled
//! with sandgym (`rubric`), made into sandboxed reward terms for
//! [`Reward::with_loader`](crate::env_api::Reward::with_loader). A plugin whose term records a
//! SHA-256 is refused if its bytes no longer match, so a resumed run keeps its reward.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::env_api::{EnvError, PluginLoader, PluginTerm, Result, RewardFn};
use crate::sandbox::Sandbox;
use sandgym_guest_artifacts::Guest;

/// The loader of reward plugins: every plugin term becomes a
/// [`WasmReward`](crate::sandbox::WasmReward) in the process-wide sandbox.
///
/// ```
/// use sandgym::env_api::{Action, Env, Reward, RewardSpec, ResetOptions, toy::GuessNumber};
/// use sandgym::reward_plugins::Plugins;
/// use serde_json::json;
/// let spec: RewardSpec = serde_json::from_value(json!([
///     {"term": "env"},
///     {"term": "plugin", "path": "rubric", "config": {"criteria": [], "rules": [], "tool_cost": 0.1}}
/// ]))?;
/// let mut env = Reward::with_loader(GuessNumber::new(), &spec, &Plugins)?;
/// env.reset(0, &ResetOptions::default())?;
/// let obs = env.step(&Action::tool("guess", json!({"number": 50})))?;
/// assert_eq!(obs.info["reward_parts"]["rubric"]["tool_cost"], -0.1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Plugins;

impl PluginLoader for Plugins {
    fn load(&self, plugin: &PluginTerm) -> Result<Box<dyn RewardFn>> {
        let invalid = |reason: String| EnvError::InvalidConfig {
            reason: format!("reward plugin {}: {reason}", plugin.path),
        };
        let bytes = plugin_bytes(&plugin.path)?;
        if let Some(want) = &plugin.sha256 {
            let have = sha256(&bytes);
            if !have.eq_ignore_ascii_case(want) {
                return Err(invalid(format!(
                    "its SHA-256 is {have}, not the {want} recorded with the reward (the file changed)"
                )));
            }
        }
        let sandbox = Sandbox::shared().map_err(|e| invalid(e.to_string()))?;
        let guest = sandbox
            .load_reward(&bytes)
            .map_err(|e| invalid(e.to_string()))?;
        let term = guest
            .instantiate(&plugin.config)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Box::new(term))
    }
}

/// The bytes of the plugin `path` names: a file, or else a bundled plugin's name.
pub fn plugin_bytes(path: &str) -> Result<Vec<u8>> {
    if let Some(bundled) = bundled(path) {
        return Ok(bundled.wasm.to_vec());
    }
    std::fs::read(path).map_err(|e| EnvError::InvalidConfig {
        reason: format!(
            "reward plugin {path}: cannot read it ({e}); give a component file or one of the \
             bundled plugins: {}",
            sandgym_guest_artifacts::REWARDS
                .iter()
                .map(|g| g.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The bundled plugin called `name`, when no file of that name exists.
fn bundled(name: &str) -> Option<Guest> {
    if Path::new(name).exists() {
        return None;
    }
    sandgym_guest_artifacts::REWARDS
        .iter()
        .copied()
        .find(|g| g.name == name)
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Gives every plugin term of `spec` (a `final` one's too) the SHA-256 of its component
/// (checking any already recorded), and makes a relative file path relative to `base` when
/// the file is there.
pub fn pin(spec: &mut crate::env_api::RewardSpec, base: &Path) -> Result<()> {
    spec.terms
        .iter_mut()
        .try_for_each(|term| pin_term(term, base))
}

fn pin_term(term: &mut crate::env_api::Term, base: &Path) -> Result<()> {
    use crate::env_api::Term;
    let plugin = match term {
        Term::Plugin(plugin) => plugin,
        Term::Final { of } => return pin_term(of, base),
        _ => return Ok(()),
    };
    let relative = base.join(&plugin.path);
    if Path::new(&plugin.path).is_relative()
        && !Path::new(&plugin.path).exists()
        && relative.is_file()
    {
        plugin.path = relative.to_string_lossy().into_owned();
    }
    let have = sha256(&plugin_bytes(&plugin.path)?);
    match &plugin.sha256 {
        Some(want) if !want.eq_ignore_ascii_case(&have) => Err(EnvError::InvalidConfig {
            reason: format!(
                "reward plugin {}: its SHA-256 is {have}, not the recorded {want}",
                plugin.path
            ),
        }),
        _ => {
            plugin.sha256 = Some(have);
            Ok(())
        }
    }
}
