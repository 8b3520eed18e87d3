//! The sandbox's error type: every way a guest can fail, typed.

use std::time::Duration;

use sandgym_env_api::EnvError;

/// The result type of this crate.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

/// How a guest failed or could not be run.
///
/// Guest faults (a timeout, a memory or stack limit, a panic, oversized or invalid output, a
/// trap) end the episode: the instance is discarded and the next `reset` gets a fresh one.
/// Through the [`Env`](sandgym_env_api::Env) trait they arrive as [`EnvError::Backend`] of kind
/// `Episode`; [`SandboxError::from_env_error`] gets the typed error back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The bytes are not a WebAssembly component at all (another file, or a core module).
    #[error("{reason}")]
    NotAComponent {
        /// What the bytes are instead, and what to build.
        reason: String,
    },
    /// The bytes are not a valid component, or it does not implement the sandgym contract.
    #[error("cannot load the guest: {0}")]
    Load(#[source] wasmtime::Error),
    /// The guest exceeded its CPU time per call (epoch deadline).
    #[error("the guest exceeded its time limit of {limit:?} per call")]
    Timeout {
        /// The configured limit.
        limit: Duration,
    },
    /// The guest used up its fuel per call.
    #[error("the guest ran out of fuel ({fuel} units per call)")]
    OutOfFuel {
        /// The configured fuel.
        fuel: u64,
    },
    /// The guest tried to grow its memory past the limit.
    #[error("the guest exceeded its memory limit of {limit} bytes (asked for {requested})")]
    MemoryLimit {
        /// The limit in bytes.
        limit: usize,
        /// The size it asked for.
        requested: usize,
    },
    /// The guest tried to grow a table past the limit.
    #[error("the guest exceeded its table limit of {limit} elements (asked for {requested})")]
    TableLimit {
        /// The limit in elements.
        limit: usize,
        /// The size it asked for.
        requested: usize,
    },
    /// The guest exhausted its stack.
    #[error("the guest overflowed its stack")]
    StackOverflow,
    /// The guest panicked.
    #[error("the guest panicked: {message}")]
    GuestPanic {
        /// The panic message the guest wrote to its stderr, when it wrote one.
        message: String,
    },
    /// The guest returned more bytes than allowed.
    #[error("the guest returned {bytes} bytes, over the limit of {limit}")]
    OutputTooLarge {
        /// The size returned.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The guest tried to pass more bytes to the host in one call (a return value, an error
    /// detail, a log line, a write to stderr) than the output limit allows; the copy stopped
    /// at the limit.
    #[error("the guest tried to pass more than {limit} bytes to the host in one call")]
    TransferTooLarge {
        /// The limit on one call's data, in bytes.
        limit: usize,
    },
    /// The guest held more resource handles (WASI pollables, streams, its own resources) at
    /// once than allowed.
    #[error("the guest exceeded its limit of {limit} live handles")]
    HandleLimit {
        /// The limit.
        limit: usize,
    },
    /// The guest returned something that is not valid for the contract (bad JSON, a spec that
    /// does not parse, a non-finite reward).
    #[error("the guest returned invalid output: {reason}")]
    InvalidOutput {
        /// What was wrong.
        reason: String,
    },
    /// Any other trap (out-of-bounds access, division by zero, …).
    #[error("the guest trapped: {message}")]
    Trap {
        /// The trap's description.
        message: String,
    },
    /// The instance trapped earlier and can only be reset.
    #[error("the guest instance failed earlier ({reason}); reset to get a fresh instance")]
    Poisoned {
        /// The earlier failure.
        reason: String,
    },
    /// Instantiating the guest failed (pool exhausted, missing imports).
    #[error("cannot instantiate the guest: {0}")]
    Instantiate(#[source] wasmtime::Error),
    /// The guest's own `init` refused the configuration.
    #[error("the guest refused its configuration: {0}")]
    Init(#[source] EnvError),
    /// The sandbox's configuration is contradictory (e.g. a fuel budget for `init` under a
    /// deadline per call).
    #[error("invalid sandbox configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// Reading or writing the compiled-module cache or a guest file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file involved.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// The sandbox error inside an [`EnvError`] returned by a [`WasmEnv`](crate::WasmEnv), if any.
    pub fn from_env_error(error: &EnvError) -> Option<&SandboxError> {
        match error {
            EnvError::Backend(inner) => inner.downcast_ref::<SandboxError>(),
            _ => None,
        }
    }

    /// Whether this failure ends the episode (all guest faults do; `Init`, `Load` and `Io` are
    /// set-up failures).
    pub fn is_guest_fault(&self) -> bool {
        !matches!(
            self,
            SandboxError::Load(_)
                | SandboxError::NotAComponent { .. }
                | SandboxError::Init(_)
                | SandboxError::Io { .. }
                | SandboxError::Instantiate(_)
        )
    }
}

impl From<SandboxError> for EnvError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::Init(inner) => inner,
            other => EnvError::backend(other),
        }
    }
}
