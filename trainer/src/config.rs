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

/// Everything a training run needs besides the env and the initial policy, in sections: what
/// the episodes look like ([`rollout`](Self::rollout)), what the loss is
/// ([`objective`](Self::objective)), how it is minimised ([`optimiser`](Self::optimiser)),
/// how long and how often ([`schedule`](Self::schedule)), the evaluation during training
/// ([`eval`](Self::eval)) and the supervised warm-start ([`sft`](Self::sft)).
///
/// A config file overrides any part of any section and keeps the rest
/// ([`merge_json`](Self::merge_json)):
///
/// ```
/// use sandgym_trainer::{Algo, TrainConfig};
/// let base = TrainConfig::for_algo(Algo::Grpo);
/// let c = base.merge_json(&serde_json::json!({"optimiser": {"lr": 1e-5}})).unwrap();
/// assert_eq!(c.optimiser.lr, 1e-5);
/// assert_eq!(c.optimiser.minibatch, base.optimiser.minibatch);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// The algorithm.
    pub algo: Algo,
    /// The episodes each iteration plays.
    pub rollout: RolloutConfig,
    /// The loss: clipping, KL, entropy, value terms, advantages and credit.
    pub objective: ObjectiveConfig,
    /// How the loss is minimised: Adam, minibatches, passes.
    pub optimiser: OptimiserConfig,
    /// Iterations, seed and checkpoints.
    pub schedule: ScheduleConfig,
    /// The fixed-seed evaluation during training.
    pub eval: EvalConfig,
    /// Supervised warm-start before RL (run by the command line when no `--init` is given).
    pub sft: crate::SftConfig,
}

/// The episodes of one iteration: how many, how long, how sampled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutConfig {
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
    /// Failed env episodes.
    pub on_env_error: OnEnvError,
    /// DAPO dynamic sampling: keep only groups whose rewards differ, rolling out more groups
    /// (up to this many batches per iteration) to fill the iteration.
    pub max_gen_batches: u32,
    /// The most tokens (each live episode's context plus the turn's `max_new_tokens`) one
    /// batched generation holds; a turn with more is generated in several batches, one
    /// after another. Bounds one generation's KV cache (65,536 tokens are ~3 GB for
    /// SmolLM2-135M); each live episode's encoded history is kept besides, until it ends.
    pub batch_tokens: usize,
    /// The most episodes an evaluation (the closing table, `eval`) plays at once; the test
    /// tasks are played in consecutive chunks of this many. Each live episode keeps its
    /// encoded history (up to `max_context` tokens of keys and values: 64 MB at 1,400
    /// tokens for SmolLM2-135M) from turn to turn, so this bounds an evaluation's memory
    /// where long multi-turn episodes would otherwise hold gigabytes at once.
    pub eval_at_once: usize,
    /// How each iteration's tasks are chosen: `uniform` (by seed), or `pass_rate` (an env
    /// with a fixed train task list: tasks in proportion to the chance that a group of them
    /// has both outcomes, from each task's record in the run; see
    /// [`PassRates`](crate::PassRates)). The proxy source draws uniformly.
    pub select: crate::TaskSelect,
}

/// The most episodes [`RolloutConfig::eval_at_once`] admits (each one an env instance and,
/// while it lasts, a KV cache).
pub const MAX_EVAL_AT_ONCE: usize = 1024;

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
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
            on_env_error: OnEnvError::Exclude,
            max_gen_batches: 3,
            batch_tokens: 1 << 16,
            eval_at_once: 64,
            select: crate::TaskSelect::Uniform,
        }
    }
}

/// The policy-gradient loss and its advantages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectiveConfig {
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
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        Self {
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
        }
    }
}

/// How each iteration's loss is minimised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimiserConfig {
    /// Adam learning rate.
    pub lr: f64,
    /// Gradient clipping by global norm (0 disables).
    pub grad_clip: f64,
    /// Passes over each iteration's rollouts.
    pub epochs: u32,
    /// Episodes per optimiser step.
    pub minibatch: usize,
    /// How the learner runs its forward and backward passes (micro-batches, a prompt
    /// encoded without gradient); RL and SFT steps alike.
    pub passes: crate::Passes,
}

impl Default for OptimiserConfig {
    fn default() -> Self {
        Self {
            lr: 3e-4,
            grad_clip: 1.0,
            epochs: 1,
            minibatch: 16,
            passes: crate::Passes::default(),
        }
    }
}

/// How long a run is, its seed and its checkpoints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Training iterations (rollout + update).
    pub iters: u32,
    /// Seed of task choice and sampling.
    pub seed: u64,
    /// Save a checkpoint every this many iterations (and at the end).
    pub save_every: u32,
    /// Keep the episodes of every this many iterations in the run's `episodes/` (0: none);
    /// each evaluation's episodes are kept whenever this is not 0.
    pub episodes_every: u32,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            iters: 30,
            seed: 0,
            save_every: 5,
            episodes_every: 1,
        }
    }
}

/// The evaluation during training: greedy decoding on the fixed seeds `0..episodes` of
/// `split`, before the first iteration, every `every` iterations and after the last, logged
/// to `eval.jsonl` and drawn on the success plot. Training never sees the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Evaluate every this many iterations (0: never).
    pub every: u32,
    /// Episodes of each evaluation.
    pub episodes: usize,
    /// The task split evaluations draw from.
    pub split: sandgym_env_api::Split,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            every: 0,
            episodes: 64,
            split: sandgym_env_api::Split::Test,
        }
    }
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
            rollout: RolloutConfig::default(),
            objective: ObjectiveConfig::default(),
            optimiser: OptimiserConfig::default(),
            schedule: ScheduleConfig::default(),
            eval: EvalConfig::default(),
            sft: crate::SftConfig::default(),
        };
        match algo {
            Algo::Ppo => {
                c.rollout.group_size = 1;
                c.rollout.tasks_per_iter = 64;
                c.optimiser.epochs = 2;
            }
            Algo::ReinforcePp => {
                c.rollout.group_size = 1;
                c.rollout.tasks_per_iter = 64;
            }
            Algo::Dapo => {
                c.objective.clip_high = 0.28;
                c.objective.loss_agg = LossAgg::TokenMean;
            }
            Algo::Rloo => c.objective.loss_agg = LossAgg::SeqMeanTokenMean,
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
        self.rollout.tasks_per_iter * self.rollout.group_size
    }

    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TrainError::Config(m));
        let (r, o, opt) = (&self.rollout, &self.objective, &self.optimiser);
        if self.eval.every > 0 && self.eval.episodes == 0 {
            return bad("eval.episodes must be positive when eval.every is".into());
        }
        if r.tasks_per_iter == 0 || r.group_size == 0 || opt.minibatch == 0 {
            return bad("rollout.tasks_per_iter, rollout.group_size and optimiser.minibatch must be positive".into());
        }
        if self.algo.is_group() && r.group_size < 2 {
            return bad(format!(
                "{} compares rollouts within a group: rollout.group_size must be at least 2",
                self.algo.name()
            ));
        }
        if r.batch_tokens == 0 {
            return bad("rollout.batch_tokens must be positive".into());
        }
        if !(1..=MAX_EVAL_AT_ONCE).contains(&r.eval_at_once) {
            return bad(format!(
                "rollout.eval_at_once must be 1 to {MAX_EVAL_AT_ONCE}, got {}",
                r.eval_at_once
            ));
        }
        if r.max_turns == 0 || r.max_new_tokens == 0 || r.max_context < 16 {
            return bad("rollout.max_turns, rollout.max_new_tokens must be positive and rollout.max_context >= 16".into());
        }
        if !(r.temperature > 0.0 && r.temperature.is_finite()) {
            return bad(format!(
                "rollout.temperature must be positive, got {}",
                r.temperature
            ));
        }
        if !(opt.lr > 0.0 && opt.lr.is_finite()) {
            return bad(format!("optimiser.lr must be positive, got {}", opt.lr));
        }
        if o.clip_low < 0.0 || o.clip_low >= 1.0 || o.clip_high < 0.0 {
            return bad(
                "objective.clip_low must lie in [0, 1) and objective.clip_high be >= 0".into(),
            );
        }
        if o.dual_clip != 0.0 && o.dual_clip <= 1.0 {
            return bad(format!(
                "objective.dual_clip must be 0 (off) or above 1, got {}",
                o.dual_clip
            ));
        }
        if !(0.0..=1.0).contains(&o.gamma) || !(0.0..=1.0).contains(&o.lam) {
            return bad("objective.gamma and objective.lam must lie in [0, 1]".into());
        }
        if let Credit::Discounted { gamma } = o.credit
            && !(0.0..=1.0).contains(&gamma)
        {
            return bad(format!(
                "objective.credit gamma must lie in [0, 1], got {gamma}"
            ));
        }
        if opt.epochs == 0 {
            return bad("optimiser.epochs must be positive".into());
        }
        if r.env_threads == 0 {
            return bad("rollout.env_threads must be positive".into());
        }
        // Bounds on sizes that would otherwise only fail as an allocation far into a run.
        const MAX_EPISODES_PER_ITER: usize = 1 << 20;
        if r.tasks_per_iter.saturating_mul(r.group_size) > MAX_EPISODES_PER_ITER {
            return bad(format!(
                "rollout.tasks_per_iter x rollout.group_size gives more than {MAX_EPISODES_PER_ITER} episodes per iteration"
            ));
        }
        if r.max_new_tokens > r.max_context {
            return bad(format!(
                "rollout.max_new_tokens ({}) must not exceed rollout.max_context ({})",
                r.max_new_tokens, r.max_context
            ));
        }
        if !(opt.grad_clip >= 0.0 && opt.grad_clip.is_finite()) {
            return bad(format!(
                "optimiser.grad_clip must be 0 (off) or positive, got {}",
                opt.grad_clip
            ));
        }
        for (name, v) in [
            ("objective.entropy_coef", o.entropy_coef),
            ("objective.vf_coef", o.vf_coef),
            ("objective.vf_clip", o.vf_clip),
            ("objective.kl.coef", o.kl.coef),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return bad(format!("{name} must be a finite number >= 0, got {v}"));
            }
        }
        let sft = &self.sft;
        if !(sft.lr > 0.0 && sft.lr.is_finite()) {
            return bad(format!("sft.lr must be positive, got {}", sft.lr));
        }
        if sft.minibatch == 0 || sft.epochs == 0 {
            return bad("sft.minibatch and sft.epochs must be positive".into());
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
        c.objective.kl = KlConfig {
            coef: 0.05,
            estimator: KlEstimator::K3,
            mode: KlMode::Loss,
        };
        c.schedule.iters = 16;
        c.rollout.max_turns = 3;
        c.optimiser.minibatch = 32;
        c.eval.every = 2;
        c
    }

    /// Merges `patch` over [`base`] and checks that only `changed` moved: every other
    /// section equals the base's.
    fn only_changes(patch: serde_json::Value, check: impl Fn(&TrainConfig)) -> TrainConfig {
        let merged = base().merge_json(&patch).unwrap();
        check(&merged);
        let patched = patch.as_object().unwrap();
        let (b, m) = (
            serde_json::to_value(base()).unwrap(),
            serde_json::to_value(&merged).unwrap(),
        );
        for (section, value) in b.as_object().unwrap() {
            if !patched.contains_key(section) {
                assert_eq!(&m[section], value, "{patch}: section {section} moved");
            }
        }
        merged
    }

    #[test]
    fn a_partial_rollout_section_keeps_the_rest_of_it() {
        only_changes(json!({"rollout": {"group_size": 4}}), |c| {
            assert_eq!(c.rollout.group_size, 4);
            assert_eq!(c.rollout.max_turns, 3);
            assert_eq!(c.rollout.tasks_per_iter, base().rollout.tasks_per_iter);
        });
    }

    #[test]
    fn a_partial_objective_section_keeps_the_rest_of_it() {
        only_changes(json!({"objective": {"kl": {"coef": 0.1}}}), |c| {
            assert_eq!(c.objective.kl.coef, 0.1);
            assert_eq!(c.objective.kl.estimator, KlEstimator::K3);
            assert_eq!(c.objective.kl.mode, KlMode::Loss);
            assert_eq!(c.objective.clip_low, base().objective.clip_low);
        });
    }

    #[test]
    fn a_partial_optimiser_section_keeps_the_rest_of_it() {
        only_changes(json!({"optimiser": {"lr": 5e-4}}), |c| {
            assert_eq!(c.optimiser.lr, 5e-4);
            assert_eq!(c.optimiser.minibatch, 32);
        });
        only_changes(json!({"optimiser": {"passes": {"micro_batch": 4}}}), |c| {
            assert_eq!(c.optimiser.passes.micro_batch, 4);
            assert!(!c.optimiser.passes.detach_prompt);
            assert_eq!(c.optimiser.lr, base().optimiser.lr);
        });
    }

    #[test]
    fn a_partial_schedule_section_keeps_the_rest_of_it() {
        only_changes(json!({"schedule": {"iters": 2}}), |c| {
            assert_eq!(c.schedule.iters, 2);
            assert_eq!(c.schedule.save_every, base().schedule.save_every);
        });
    }

    #[test]
    fn a_partial_eval_section_keeps_the_rest_of_it() {
        only_changes(json!({"eval": {"episodes": 8}}), |c| {
            assert_eq!(c.eval.episodes, 8);
            assert_eq!(c.eval.every, 2);
            assert_eq!(c.eval.split, sandgym_env_api::Split::Test);
        });
    }

    #[test]
    fn a_partial_sft_section_keeps_the_rest_of_it() {
        only_changes(json!({"sft": {"epochs": 4}}), |c| {
            assert_eq!(c.sft.epochs, 4);
            assert_eq!(c.sft.episodes, 640, "the sft section was replaced");
        });
    }

    #[test]
    fn unknown_keys_wrong_types_and_absurd_values_are_errors_that_name_them() {
        for (patch, needle) in [
            (json!({"sft": {"epoch": 4}}), "`sft.epoch`: unknown field"),
            (json!({"learning_rate": 1}), "learning_rate"),
            (json!({"lr": 1e-3}), "`lr`: unknown field"),
            (
                json!({"objective": {"kl": {"coef": "big"}}}),
                "`objective.kl.coef`",
            ),
            (json!({"sft": 3}), "`sft`"),
            (json!([1]), "one JSON object"),
            (json!({"optimiser": {"lr": -1.0}}), "optimiser.lr"),
            (json!({"rollout": {"group_size": 1}}), "rollout.group_size"),
            (
                json!({"rollout": {"max_context": 2}}),
                "rollout.max_context",
            ),
            (
                json!({"rollout": {"temperature": 0.0}}),
                "rollout.temperature",
            ),
            (
                json!({"rollout": {"env_threads": 0}}),
                "rollout.env_threads",
            ),
            (
                json!({"rollout": {"batch_tokens": 0}}),
                "rollout.batch_tokens",
            ),
            (
                json!({"rollout": {"eval_at_once": 0}}),
                "rollout.eval_at_once",
            ),
            (
                json!({"rollout": {"eval_at_once": 100_000}}),
                "rollout.eval_at_once",
            ),
            (
                json!({"rollout": {"tasks_per_iter": 4_000_000_000u64}}),
                "episodes per iteration",
            ),
            (
                json!({"rollout": {"max_new_tokens": 10_000_000}}),
                "rollout.max_new_tokens",
            ),
            (
                json!({"eval": {"every": 1, "episodes": 0}}),
                "eval.episodes",
            ),
            (json!({"optimiser": {"epochs": 0}}), "optimiser.epochs"),
            (
                json!({"optimiser": {"grad_clip": -1.0}}),
                "optimiser.grad_clip",
            ),
            (json!({"sft": {"lr": 0.0}}), "sft.lr"),
            (json!({"sft": {"minibatch": 0}}), "sft.minibatch"),
        ] {
            let err = base().merge_json(&patch).unwrap_err().to_string();
            assert!(err.contains(needle), "{patch}: {err}");
        }
    }
}
