//! The trainer's error type.

use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

/// What can stop a training run. An env that fails mid-episode is *not* one of these: it ends
/// only its own episode (see [`OnEnvError`](crate::OnEnvError)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The configuration is invalid.
    #[error("invalid training config: {0}")]
    Config(String),
    /// The policy failed (tokenizer, constraint, checkpoint).
    #[error(transparent)]
    Policy(#[from] sandgym_policy::PolicyError),
    /// Creating or resetting the envs failed before any episode could run.
    #[error("env: {0}")]
    Env(#[from] sandgym_env_api::EnvError),
    /// A run directory or checkpoint is unusable.
    #[error("bad run directory {path}: {reason}")]
    Run {
        /// The directory or file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Every rollout of an iteration failed or was filtered out, so there is nothing to learn
    /// from.
    #[error("iteration {iter}: no usable episodes ({reason})")]
    EmptyBatch {
        /// The iteration.
        iter: u32,
        /// Why.
        reason: String,
    },
}

/// An I/O error on `path`.
pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io {
        path: path.to_owned(),
        source,
    }
}
