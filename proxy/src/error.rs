//! Errors of the servers and the trace store.

use std::path::PathBuf;

/// A proxy-side error.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A server could not bind its address.
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The trace database failed.
    #[error("trace store {path}: {reason}")]
    Store {
        /// The database file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A recorded trace cannot be read back as a trajectory.
    #[error("trace of rollout {rollout}, call {seq}: {reason}")]
    Trace {
        /// The rollout.
        rollout: String,
        /// The call's sequence number.
        seq: i64,
        /// Why.
        reason: String,
    },
    /// A reward was posted for a rollout with no recorded call.
    #[error("rollout {0:?} is unknown: no model call was recorded under it")]
    UnknownRollout(String),
    /// A reward was posted for a rollout a learner has already trained on.
    #[error(
        "rollout {rollout:?} was already trained on (policy version {version}); its reward can no longer change"
    )]
    AlreadyTrained {
        /// The rollout.
        rollout: String,
        /// The version trained on it.
        version: String,
    },
    /// A publish directory or one of its versions is unusable.
    #[error("published versions at {path}: {reason}")]
    Published {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The policy failed.
    #[error(transparent)]
    Policy(#[from] sandgym_policy::PolicyError),
}

/// Result with [`ProxyError`].
pub type Result<T, E = ProxyError> = std::result::Result<T, E>;
