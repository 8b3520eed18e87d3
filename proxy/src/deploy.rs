//! The policy versions behind one server: the incumbent that answers, an optional candidate on
//! trial (in shadow or as a canary), and which of them answers a request.
//!
//! A request is routed by its rollout (the `x-rollout-id` header the recording proxy
//! forwards), so every call of one rollout meets the same version and the rollout's reward
//! scores that version; a request without one is routed by its number. Each version is an
//! `Arc`: a batch holds the model it started with, so a swap never waits for, drops or mixes
//! an in-flight request.

use std::sync::{Arc, Mutex, MutexGuard};

use sandgym_policy::{Cpu, PolicyModel, PrefixCache};
use serde::{Deserialize, Serialize};

/// One policy version: its name (named in every answer as `policy_version`), its weights and
/// the keys and values its finished generations left (which only its own weights can reuse).
pub struct Versioned {
    /// The version's name.
    pub version: String,
    /// Its weights.
    pub model: PolicyModel<Cpu>,
    prefix: Mutex<PrefixCache<Cpu>>,
}

impl Versioned {
    /// Version `version` of `model`, keeping up to `prefix_bytes` of finished generations'
    /// keys and values for the requests that continue them (0 keeps none).
    pub fn new(version: impl Into<String>, model: PolicyModel<Cpu>, prefix_bytes: usize) -> Self {
        Self {
            version: version.into(),
            model,
            prefix: Mutex::new(PrefixCache::new(prefix_bytes)),
        }
    }

    /// Its cache of finished generations' keys and values.
    pub fn prefix(&self) -> MutexGuard<'_, PrefixCache<Cpu>> {
        self.prefix
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Versioned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versioned")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// How a candidate version is tried.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Trial {
    /// A share (0 to 1) of the rollouts is answered by the candidate.
    Canary {
        /// The share of rollouts.
        share: f64,
    },
    /// The incumbent answers every request; the candidate answers each too, unseen, and its
    /// answers are compared with the served ones.
    Shadow,
}

/// Where a request goes.
#[derive(Debug)]
pub struct Route {
    /// The version whose answer is served.
    pub served: Arc<Versioned>,
    /// A candidate in shadow that answers the same request unseen.
    pub shadow: Option<Arc<Versioned>>,
}

/// The versions a server holds.
#[derive(Debug)]
pub struct Deployment {
    incumbent: Arc<Versioned>,
    candidate: Option<(Arc<Versioned>, Trial)>,
}

/// Where a key falls in `[0, 1)`: the key mixed (SplitMix64's finaliser), so consecutive
/// request numbers and similar rollout ids spread evenly.
fn unit(key: u64) -> f64 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A stable key of a rollout id (FNV-1a), the same in every process.
pub fn rollout_key(rollout: &str) -> u64 {
    rollout.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Deployment {
    /// `incumbent` alone.
    pub fn new(incumbent: Versioned) -> Self {
        Self {
            incumbent: Arc::new(incumbent),
            candidate: None,
        }
    }

    /// The incumbent.
    pub fn incumbent(&self) -> &Arc<Versioned> {
        &self.incumbent
    }

    /// The candidate on trial, if any.
    pub fn candidate(&self) -> Option<&(Arc<Versioned>, Trial)> {
        self.candidate.as_ref()
    }

    /// Where the request with `key` goes (see [`rollout_key`]).
    pub fn route(&self, key: u64) -> Route {
        match &self.candidate {
            Some((candidate, Trial::Canary { share })) if unit(key) < *share => Route {
                served: candidate.clone(),
                shadow: None,
            },
            Some((candidate, Trial::Shadow)) => Route {
                served: self.incumbent.clone(),
                shadow: Some(candidate.clone()),
            },
            _ => Route {
                served: self.incumbent.clone(),
                shadow: None,
            },
        }
    }

    /// Puts `candidate` on trial (replacing any candidate there).
    pub fn stage(&mut self, candidate: Versioned, trial: Trial) {
        self.candidate = Some((Arc::new(candidate), trial));
    }

    /// Makes the candidate the incumbent; returns its version (`None` without a candidate).
    pub fn promote(&mut self) -> Option<String> {
        let (candidate, _) = self.candidate.take()?;
        let version = candidate.version.clone();
        self.incumbent = candidate;
        Some(version)
    }

    /// Drops the candidate; returns its version (`None` without a candidate).
    pub fn rollback(&mut self) -> Option<String> {
        self.candidate.take().map(|(c, _)| c.version.clone())
    }

    /// Replaces the incumbent outright (no trial), keeping any candidate.
    pub fn replace(&mut self, incumbent: Versioned) {
        self.incumbent = Arc::new(incumbent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> PolicyModel<Cpu> {
        sandgym_policy::PolicyConfig::new(8)
            .with_d_model(8)
            .with_n_layers(1)
            .with_n_heads(2)
            .with_n_kv_heads(1)
            .with_d_ff(8)
            .init::<Cpu>(&Default::default())
    }

    fn named(version: &str) -> Versioned {
        Versioned::new(version, model(), 0)
    }

    #[test]
    fn a_canary_takes_its_share_of_rollouts_and_keeps_each_rollout_on_one_version() {
        let mut d = Deployment::new(named("v1"));
        d.stage(named("v2"), Trial::Canary { share: 0.25 });
        let served = |d: &Deployment, r: &str| d.route(rollout_key(r)).served.version.clone();
        let to_candidate = (0..4000)
            .filter(|i| served(&d, &format!("r{i}")) == "v2")
            .count();
        assert!((850..1150).contains(&to_candidate), "{to_candidate}");
        for i in 0..50 {
            let r = format!("r{i}");
            assert_eq!(served(&d, &r), served(&d, &r));
        }
        assert_eq!(d.promote().as_deref(), Some("v2"));
        assert_eq!(served(&d, "r1"), "v2");
        assert!(d.candidate().is_none());
    }

    #[test]
    fn a_shadow_answers_unseen_and_a_rollback_drops_it() {
        let mut d = Deployment::new(named("v1"));
        d.stage(named("v2"), Trial::Shadow);
        let route = d.route(7);
        assert_eq!(route.served.version, "v1");
        assert_eq!(route.shadow.unwrap().version, "v2");
        assert_eq!(d.rollback().as_deref(), Some("v2"));
        assert!(d.route(7).shadow.is_none());
        assert_eq!(d.rollback(), None);
        assert_eq!(d.incumbent().version, "v1");
    }
}
