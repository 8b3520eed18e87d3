//! The sandgym trainer: rollouts over many (sandboxed) envs, the PPO/GRPO family of policy
//! gradients, supervised warm-start, metrics, plots and resumable checkpoints.
//!
//! The pieces, in the order data flows through them:
//! - [`RolloutEngine`] plays episodes: envs step in parallel on worker threads while the
//!   policy generates every live episode's next action in one constrained, KV-cached batch.
//!   An [`Episode`] keeps exactly the tokens the policy saw and sampled, with their log-probs
//!   and constraint masks (token-in, token-out).
//! - [`batch`] turns episodes into [`Sample`]s: token-level rewards by the [`Credit`] mode,
//!   then advantages by the algorithm ([`advantage`]: GRPO, RLOO, GAE, REINFORCE++).
//! - [`Learner`] takes gradient steps of the clipped objective ([`objective`]: dual clip, KL
//!   k1/k2/k3, value loss, loss aggregation modes) or of SFT.
//! - [`Trainer`] runs iterations into a run directory with `metrics.jsonl`, PNG plots and
//!   atomic checkpoints it can resume from exactly.
//!
//! Formulas follow verl's reference implementation; `tests/all/reference.rs` checks them
//! against published vectors.
#![deny(missing_docs)]

pub mod advantage;
pub mod batch;
mod config;
mod curriculum;
mod episode_log;
mod error;
mod eval;
mod journal;
mod learner;
pub mod metrics;
mod norms;
pub mod objective;
mod paired;
pub mod plot;
pub mod prompt_runs;
mod rollout;
mod run;
mod run_dir;
pub mod sft;

pub use batch::Sample;
pub use config::{
    Algo, Credit, EvalConfig, KlConfig, KlEstimator, KlMode, LossAgg, ObjectiveConfig, OnEnvError,
    OptimiserConfig, RolloutConfig, ScheduleConfig, TrainConfig,
};
pub use curriculum::{PassRates, TaskSelect};
pub use episode_log::{EpisodeKind, EpisodeLog, TokenSpan, episode_log_path, write_episode_log};
pub use error::{Result, TrainError};
pub use eval::{EvalReport, EvalTiming, eval_envs, eval_plan, evaluate, wilson_interval};
pub use journal::{Captured, SampleJournal};
pub use learner::{Learner, Passes, PolicyOptimizer, StepStats, adam};
pub use metrics::{EvalPoint, IterMetrics};
pub use paired::{Outcome, PairError, Paired, mcnemar_exact};
pub use rollout::{
    Episode, RolloutEngine, RolloutSettings, RolloutStats, Turn, compile_episode_grammars,
    episode_grammar, render_trajectory,
};
pub use run::{
    NewRun, RunConfig, Trainer, iteration_jobs, read_run_config, rollout_settings, write_plots,
};
pub use run_dir::RunDir;
pub use sft::SftConfig;
