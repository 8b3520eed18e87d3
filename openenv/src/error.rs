//! The errors of starting and running an env server.

/// Why an [`EnvServer`](crate::EnvServer) could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the server runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The env could not be made once to read its spec.
    #[error("cannot make the env: {0}")]
    Env(#[from] sandgym_env_api::EnvError),
    /// A setting is out of range.
    #[error("invalid server setting: {0}")]
    Config(String),
}
