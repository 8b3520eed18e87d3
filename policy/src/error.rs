//! The policy crate's error type.

/// The result type of this crate.
pub type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// What can go wrong in the policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Training, loading or using the tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The tool specs could not be turned into a decoding constraint.
    #[error("cannot build the tool-call constraint: {0}")]
    Constraint(String),
    /// A token was offered that the constraint does not allow (a bug in the caller's sampler).
    #[error("token {token} is not allowed by the constraint: {reason}")]
    Disallowed {
        /// The token id.
        token: u32,
        /// The matcher's explanation.
        reason: String,
    },
    /// A checkpoint is missing, truncated or does not match its config.
    #[error("bad checkpoint {path}: {reason}")]
    Checkpoint {
        /// The file or directory.
        path: std::path::PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// A pretrained model could not be imported (a missing tensor, a shape that does not fit
    /// its config, an unsupported architecture or tensor type, a malformed file).
    #[error("cannot import the model: {0}")]
    Import(String),
    /// A model could not be fetched into the cache.
    #[error("cannot fetch model {name}: {reason}")]
    Fetch {
        /// The model's name.
        name: String,
        /// What went wrong and what to do about it.
        reason: String,
    },
    /// The requested device cannot be used in this build or on this machine.
    #[error("device: {0}")]
    Device(String),
    /// Reading or writing a file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
