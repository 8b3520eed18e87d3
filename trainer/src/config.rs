//! Training configuration: algorithm, rollout shape, loss terms, optimiser and run settings.
//!
//! Every field has a default; a config file (`--config FILE`) is a JSON object that overrides
//! some of them. Unknown keys are an error, so a typo never silently trains the wrong thing.

use serde::{Deserialize, Serialize};

use crate::{Result, TrainError};

/// The policy-gradient algorithm (its advantage estimator and its usual loss settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algo {
    /// PPO: GAE over the value head, clipped value loss.
    Ppo,
    /// GRPO: group-relative advantages (reward minus group mean, over group std).
    Grpo,
    /// RLOO: leave-one-out group baseline.
    Rloo,
    /// DAPO: GRPO advantages, clip-higher, dynamic sampling of groups with non-zero reward
    /// variance, token-level loss.
    Dapo,
    /// REINFORCE++: discounted token returns whitened over the batch.
    ReinforcePp,
}

impl Algo {
    /// Whether the algorithm samples several rollouts per task and compares within the group.
    pub fn is_group(self) -> bool {
        matches!(self, Algo::Grpo | Algo::Rloo | Algo::Dapo)
    }

    /// The name used on the command line and in `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ppo => "ppo",
            Algo::Grpo => "grpo",
            Algo::Rloo => "rloo",
            Algo::Dapo => "dapo",
            Algo::ReinforcePp => "reinforce_pp",
        }
    }
}

impl std::str::FromStr for Algo {
    type Err = TrainError;

    fn from_str(s: &str) -> Result<Self> {
        [
            Algo::Ppo,
            Algo::Grpo,
            Algo::Rloo,
            Algo::Dapo,
            Algo::ReinforcePp,
        ]
        .into_iter()
        .find(|a| a.name() == s || (s == "reinforce++" && *a == Algo::ReinforcePp))
        .ok_or_else(|| {
            TrainError::Config(format!(
                "unknown algorithm `{s}`; expected grpo, ppo, rloo, dapo or reinforce_pp"
            ))
        })
    }
}

/// How the estimator of a KL divergence to the reference policy is computed per token
/// (Schulman's k1/k2/k3, as in verl's `kl_penalty`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlEstimator {
    /// `logp - ref_logp`.
    K1,
    /// `0.5 (logp - ref_logp)^2`.
    K2,
    /// `exp(ref_logp - logp) - (ref_logp - logp) - 1`, clamped to ±10 (low variance).
    K3,
}

/// Where the KL to the reference policy enters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlMode {
    /// A loss term `coef × agg(kl)` (GRPO style).
    Loss,
    /// A per-token reward penalty `-coef × kl(old, ref)` (PPO style).
    Reward,
}

/// KL regularisation towards the frozen reference (the initial policy).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlConfig {
    /// Weight; 0 turns the reference model off (no extra forward pass).
    pub coef: f64,
    /// Estimator.
    pub estimator: KlEstimator,
    /// Loss term or reward penalty.
    pub mode: KlMode,
}

impl Default for KlConfig {
    fn default() -> Self {
        Self {
            coef: 0.0,
            estimator: KlEstimator::K3,
            mode: KlMode::Loss,
        }
    }
}

/// How per-token losses reduce to one number (verl's `loss_agg_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossAgg {
    /// Mean over every trainable token of the batch.
    TokenMean,
    /// Sum over each sequence's tokens, mean over sequences.
    SeqMeanTokenSum,
    /// Mean over each sequence's tokens, mean over sequences.
    SeqMeanTokenMean,
}

/// How an episode's rewards are credited to its turns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Credit {
    /// Every turn gets the episode's total reward.
    Final,
    /// Turn `k` gets `sum_{j>=k} gamma^(j-k) r_j`.
    Discounted {
        /// Discount per turn.
        gamma: f64,
    },
    /// Turn `k` gets its own reward `r_k` only.
    Turn,
}

/// What happens to an episode whose env failed (an error, a trap, a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OnEnvError {
    /// Left out of the batch (and of its group's statistics); counted in the metrics.
    Exclude,
    /// Kept, with this reward for the failing turn.
    Penalize {
        /// The reward given.
        reward: f64,
    },
}

/// Everything a training run needs besides the env and the initial policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// The algorithm.
    pub algo: Algo,
    /// Training iterations (rollout + update).
    pub iters: u32,
    /// Distinct tasks per iteration.
    pub tasks_per_iter: usize,
    /// Rollouts per task (the group size of group methods; PPO and REINFORCE++ use 1 unless
    /// set explicitly).
    pub group_size: usize,
    /// The most policy turns per episode (the episode is truncated after it).
    pub max_turns: u32,
    /// The most tokens per policy turn.
    pub max_new_tokens: usize,
    /// The most tokens in one episode's context (prompt, actions, observations).
    pub max_context: usize,
    /// Observations longer than this many characters are cut (with a marker) before the
    /// policy sees them.
    pub max_observation_chars: usize,
    /// The most characters of each action's `thought` (0 forces an empty thought).
    pub thought_chars: u32,
    /// The most characters of a final response.
    pub response_chars: u32,
    /// Sampling temperature of rollouts (the loss uses the same).
    pub temperature: f32,
    /// Worker threads stepping envs.
    pub env_threads: usize,
    /// Passes over each iteration's rollouts.
    pub epochs: u32,
    /// Episodes per optimiser step.
    pub minibatch: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Gradient clipping by global norm (0 disables).
    pub grad_clip: f64,
    /// Lower PPO clip range (`1 - clip_low`).
    pub clip_low: f64,
    /// Upper PPO clip range (`1 + clip_high`; DAPO's clip-higher sets it above `clip_low`).
    pub clip_high: f64,
    /// Dual-clip constant `c` (> 1) bounding the loss of negative advantages; 0 disables.
    pub dual_clip: f64,
    /// Loss aggregation.
    pub loss_agg: LossAgg,
    /// KL to the reference policy.
    pub kl: KlConfig,
    /// Entropy bonus weight.
    pub entropy_coef: f64,
    /// Value loss weight (PPO).
    pub vf_coef: f64,
    /// Value clip range (PPO).
    pub vf_clip: f64,
    /// GAE discount (PPO) and REINFORCE++ return discount, per token.
    pub gamma: f64,
    /// GAE lambda (PPO).
    pub lam: f64,
    /// Divide group advantages by the group's std (GRPO); off gives Dr. GRPO's mean-only form.
    pub norm_by_std: bool,
    /// Multi-turn credit assignment.
    pub credit: Credit,
    /// Failed env episodes.
    pub on_env_error: OnEnvError,
    /// DAPO dynamic sampling: keep only groups whose rewards differ, rolling out more groups
    /// (up to this many batches per iteration) to fill the iteration.
    pub max_gen_batches: u32,
    /// Seed of task choice and sampling.
    pub seed: u64,
    /// Save a checkpoint every this many iterations (and at the end).
    pub save_every: u32,
    /// Evaluate the policy every this many iterations (0: never), before the first and after
    /// the last: greedy decoding on the fixed seeds `0..eval_episodes` of `eval_split`,
    /// logged to `eval.jsonl` and drawn on the success plot. Training never sees the result.
    pub eval_every: u32,
    /// Episodes of each evaluation.
    pub eval_episodes: usize,
    /// The task split evaluations draw from.
    pub eval_split: sandgym_env_api::Split,
    /// Supervised warm-start before RL (run by the command line when no `--init` is given).
    pub sft: crate::SftConfig,
    /// How the learner runs its forward and backward passes (micro-batches, a prompt
    /// encoded without gradient); RL and SFT steps alike.
    pub passes: crate::Passes,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self::for_algo(Algo::Grpo)
    }
}

impl TrainConfig {
    /// The defaults of one algorithm (verl's usual settings scaled to a CPU).
    pub fn for_algo(algo: Algo) -> Self {
        let mut c = Self {
            algo,
            iters: 30,
            tasks_per_iter: 8,
            group_size: 8,
            max_turns: 4,
            max_new_tokens: 96,
            max_context: 640,
            max_observation_chars: 400,
            thought_chars: 0,
            response_chars: 240,
            temperature: 1.0,
            env_threads: 2,
            epochs: 1,
            minibatch: 16,
            lr: 3e-4,
            grad_clip: 1.0,
            clip_low: 0.2,
            clip_high: 0.2,
            dual_clip: 3.0,
            loss_agg: LossAgg::TokenMean,
            kl: KlConfig::default(),
            entropy_coef: 0.0,
            vf_coef: 0.5,
            vf_clip: 0.5,
            gamma: 1.0,
            lam: 0.95,
            norm_by_std: true,
            credit: Credit::Final,
            on_env_error: OnEnvError::Exclude,
            max_gen_batches: 3,
            seed: 0,
            save_every: 5,
            eval_every: 0,
            eval_episodes: 64,
            eval_split: sandgym_env_api::Split::Test,
            sft: crate::SftConfig::default(),
            passes: crate::Passes::default(),
        };
        match algo {
            Algo::Ppo => {
                c.group_size = 1;
                c.tasks_per_iter = 64;
                c.epochs = 2;
            }
            Algo::ReinforcePp => {
                c.group_size = 1;
                c.tasks_per_iter = 64;
            }
            Algo::Dapo => {
                c.clip_high = 0.28;
                c.loss_agg = LossAgg::TokenMean;
            }
            Algo::Rloo => c.loss_agg = LossAgg::SeqMeanTokenMean,
            Algo::Grpo => {}
        }
        c
    }

    /// Applies a JSON object of overrides (a `--config` file) on top of these settings, deeply:
    /// `{"sft": {"epochs": 4}}` changes only the SFT epochs and keeps the rest of the `sft`
    /// section (as in RFC 7396's JSON merge patch, except that `null` sets a setting to null
    /// instead of removing it, since every setting exists). An unknown key anywhere is an
    /// error naming it.
    pub fn merge_json(&self, overrides: &serde_json::Value) -> Result<Self> {
        if !overrides.is_object() {
            return Err(TrainError::Config(
                "a config file must hold one JSON object".into(),
            ));
        }
        let mut value = serde_json::to_value(self).expect("config serialises");
        deep_merge(&mut value, overrides);
        let merged: Self = serde_path_to_error::deserialize(value)
            .map_err(|e| TrainError::Config(format!("`{}`: {}", e.path(), e.inner())))?;
        merged.validate()?;
        Ok(merged)
    }

    /// Episodes per iteration.
    pub fn episodes_per_iter(&self) -> usize {
        self.tasks_per_iter * self.group_size
    }

    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TrainError::Config(m));
        if self.eval_every > 0 && self.eval_episodes == 0 {
            return bad("eval_episodes must be positive when eval_every is".into());
        }
        if self.tasks_per_iter == 0 || self.group_size == 0 || self.minibatch == 0 {
            return bad("tasks_per_iter, group_size and minibatch must be positive".into());
        }
        if self.algo.is_group() && self.group_size < 2 {
            return bad(format!(
                "{} compares rollouts within a group: group_size must be at least 2",
                self.algo.name()
            ));
        }
        if self.max_turns == 0 || self.max_new_tokens == 0 || self.max_context < 16 {
            return bad("max_turns, max_new_tokens must be positive and max_context >= 16".into());
        }
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature must be positive, got {}",
                self.temperature
            ));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return bad(format!("lr must be positive, got {}", self.lr));
        }
        if self.clip_low < 0.0 || self.clip_low >= 1.0 || self.clip_high < 0.0 {
            return bad("clip_low must lie in [0, 1) and clip_high be >= 0".into());
        }
        if self.dual_clip != 0.0 && self.dual_clip <= 1.0 {
            return bad(format!(
                "dual_clip must be 0 (off) or above 1, got {}",
                self.dual_clip
            ));
        }
        if !(0.0..=1.0).contains(&self.gamma) || !(0.0..=1.0).contains(&self.lam) {
            return bad("gamma and lam must lie in [0, 1]".into());
        }
        if let Credit::Discounted { gamma } = self.credit
            && !(0.0..=1.0).contains(&gamma)
        {
            return bad(format!("credit gamma must lie in [0, 1], got {gamma}"));
        }
        if self.epochs == 0 {
            return bad("epochs must be positive".into());
        }
        Ok(())
    }
}

/// Merges `patch` into `base`: objects key by key, recursively; anything else replaces.
/// Hand-written: ten lines, where a merge-patch crate would delete on `null`.
fn deep_merge(base: &mut serde_json::Value, patch: &serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(base), serde_json::Value::Object(patch)) => {
            for (key, value) in patch {
                match base.get_mut(key) {
                    Some(slot) => deep_merge(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot, value) => *slot = value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> TrainConfig {
        let mut c = TrainConfig::for_algo(Algo::Grpo);
        c.sft.episodes = 640;
        c.sft.epochs = 8;
        c.kl = KlConfig {
            coef: 0.05,
            estimator: KlEstimator::K3,
            mode: KlMode::Loss,
        };
        c.iters = 16;
        c
    }

    #[test]
    fn a_partial_section_keeps_the_rest_of_it() {
        let merged = base().merge_json(&json!({"sft": {"epochs": 4}})).unwrap();
        assert_eq!(merged.sft.epochs, 4);
        assert_eq!(merged.sft.episodes, 640, "the sft section was replaced");
        let merged = base().merge_json(&json!({"kl": {"coef": 0.1}})).unwrap();
        assert_eq!(merged.kl.coef, 0.1);
        assert_eq!(merged.kl.estimator, KlEstimator::K3);
        assert_eq!(merged.kl.mode, KlMode::Loss);
        let merged = base().merge_json(&json!({"iters": 2, "lr": 5e-4})).unwrap();
        assert_eq!((merged.iters, merged.lr), (2, 5e-4));
        assert_eq!(merged.sft, base().sft);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_errors_that_name_them() {
        for (patch, needle) in [
            (json!({"sft": {"epoch": 4}}), "`sft.epoch`: unknown field"),
            (json!({"learning_rate": 1}), "learning_rate"),
            (json!({"kl": {"coef": "big"}}), "`kl.coef`"),
            (json!({"sft": 3}), "`sft`"),
            (json!([1]), "one JSON object"),
        ] {
            let err = base().merge_json(&patch).unwrap_err().to_string();
            assert!(err.contains(needle), "{patch}: {err}");
        }
    }
}
