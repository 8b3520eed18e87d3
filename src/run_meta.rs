//! What the command line records about a training run beside its settings: the `run` section
//! of a run directory's `config.json`, typed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::policy::DeviceKind;
use crate::{Backend, EnvTarget};

/// Where a run's training episodes come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EpisodeSource {
    /// The env's own rollout engine.
    #[default]
    Env,
    /// The harness behind the recording proxy.
    Proxy,
}

impl std::str::FromStr for EpisodeSource {
    type Err = String;

    /// `env` or `proxy`, as in `config.json`.
    ///
    /// ```
    /// use sandgym::EpisodeSource;
    /// assert_eq!("proxy".parse::<EpisodeSource>(), Ok(EpisodeSource::Proxy));
    /// assert!("harness".parse::<EpisodeSource>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "env" => Ok(Self::Env),
            "proxy" => Ok(Self::Proxy),
            _ => Err(format!("`{s}` is not an episode source (env, proxy)")),
        }
    }
}

/// A run's description: what it trains on and from what. Saved as `run` in `config.json`;
/// `resume`, `eval --checkpoint` and the closing evaluation read it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMeta {
    /// The env's id (bundled), its component file, or a served env's URL.
    pub env: crate::EnvSource,
    /// The configuration the env is made with.
    #[serde(default)]
    pub env_config: Map<String, Value>,
    /// Natively or in the sandbox.
    pub backend: Backend,
    /// The policy checkpoint the run started from, if any (no SFT then).
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// The model it started from: `tiny` or a pretrained model's name or directory.
    pub model: crate::ModelSource,
    /// The device the policy trained on.
    #[serde(default)]
    pub device: DeviceKind,
    /// Where its episodes came from.
    #[serde(default)]
    pub source: EpisodeSource,
    /// The reward composed around the env's own (`--reward`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<crate::env_api::RewardSpec>,
    /// The servers the env was played on (`--env-hosts`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_hosts: Vec<String>,
    /// How a proxy-source run trains a harness run whose context broke (`None`: as segments,
    /// which every run made before the choice existed did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_samples: Option<crate::proxy::Samples>,
}

impl RunMeta {
    /// A run on `target` from `model`, in the sandbox, on the CPU, from the env's episodes.
    pub fn new(target: &EnvTarget, model: crate::ModelSource) -> Self {
        Self {
            env: target.env.clone(),
            env_config: target.config.clone(),
            backend: Backend::Wasm,
            init: None,
            model,
            device: DeviceKind::Cpu,
            source: EpisodeSource::Env,
            reward: target.reward.clone(),
            env_hosts: target.hosts.clone(),
            proxy_samples: None,
        }
    }

    /// The run directory's `config.json`: this description and the training settings.
    pub fn read(out: &Path) -> crate::trainer::Result<crate::trainer::RunConfig<Self>> {
        crate::trainer::read_run_config(out)
    }

    /// The env it trains on, with its configuration and its reward.
    pub fn target(&self) -> EnvTarget {
        let mut target = EnvTarget::with_config(self.env.clone(), self.env_config.clone());
        target.reward = self.reward.clone();
        target.hosts = self.env_hosts.clone();
        target
    }

    /// Whether it started from a pretrained model (not the tiny one, not a checkpoint).
    pub fn pretrained(&self) -> bool {
        self.init.is_none() && self.model.is_pretrained()
    }

    /// As JSON, for [`NewRun::meta`](crate::trainer::NewRun::meta).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("run metadata serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_does_not_know() {
        let mut meta = RunMeta::new(
            &EnvTarget::new("sql-agent-v0"),
            crate::ModelSource::Pretrained("smollm2-135m-instruct".into()),
        );
        meta.backend = Backend::Native;
        meta.source = EpisodeSource::Proxy;
        let value = meta.to_value();
        assert_eq!(value["backend"], "native");
        assert_eq!(value["source"], "proxy");
        assert_eq!(serde_json::from_value::<RunMeta>(value).unwrap(), meta);
        assert!(meta.pretrained());
        let typo =
            serde_json::json!({"env": "x", "backend": "wasm", "model": "tiny", "sorce": "env"});
        let err = serde_json::from_value::<RunMeta>(typo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sorce"), "{err}");
        let bad = serde_json::json!({"env": "x", "backend": "gpu", "model": "tiny"});
        assert!(serde_json::from_value::<RunMeta>(bad).is_err());
    }
}
