//! The one error type of the Env contract.

use std::fmt;

/// The result type used throughout the Env contract.
pub type Result<T, E = EnvError> = std::result::Result<T, E>;

/// Everything that can go wrong when driving an [`Env`](crate::Env).
///
/// Errors fall into the classes of [`ErrorKind`]: an invalid action is the agent's mistake and
/// leaves the env exactly as it was (the runner shows its `Display` text to the agent as its
/// next observation); a usage error is the caller's mistake (stepping a finished episode); an
/// episode error ends the episode (a sandboxed guest trapped, a tool backend failed for good).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// The action text is not a valid Agent Template turn.
    #[error(
        "malformed action: {reason}. Expected {{\"thought\": \"...\", \"action\": {{\"tool_name\": \"...\", \"parameters\": {{...}}}}}} or {{\"thought\": \"...\", \"response\": \"...\"}}"
    )]
    MalformedAction {
        /// What was wrong with it.
        reason: String,
    },
    /// The action names a tool the env does not offer.
    #[error("unknown tool `{name}`; available tools: {}", list(available))]
    UnknownTool {
        /// The name the agent used.
        name: String,
        /// The tools the env offers.
        available: Vec<String>,
    },
    /// The parameters of a tool call do not match the tool's schema.
    #[error("invalid parameters for tool `{tool}`: {}", problems.join("; "))]
    InvalidParameters {
        /// The tool that was called.
        tool: String,
        /// One line per violation, each naming the offending path.
        problems: Vec<String>,
    },
    /// The action is well-formed but not allowed in the current state (the env explains why).
    #[error("action rejected: {reason}")]
    ActionRejected {
        /// Why the env refused it.
        reason: String,
    },
    /// `step` was called before the first `reset`.
    #[error("step called before reset; call reset(seed, options) first")]
    NotReset,
    /// `step` was called after the episode ended.
    #[error("the episode is over ({done:?}); call reset before stepping again")]
    EpisodeOver {
        /// How the episode ended.
        done: crate::Done,
    },
    /// The reset options do not name a valid task or configuration.
    #[error("invalid reset options: {reason}")]
    InvalidOptions {
        /// What was wrong.
        reason: String,
    },
    /// The env configuration given to a factory is invalid.
    #[error("invalid env configuration: {reason}")]
    InvalidConfig {
        /// What was wrong.
        reason: String,
    },
    /// No env is registered under this id.
    #[error("no env registered as `{id}`; registered: {}", list(available))]
    UnknownEnv {
        /// The id that was asked for.
        id: String,
        /// The ids that are registered.
        available: Vec<String>,
    },
    /// An env id is not of the form `name-vN`.
    #[error("invalid env id `{id}`: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What was wrong.
        reason: String,
    },
    /// The env does not implement snapshots.
    #[error("this env does not support snapshot/restore")]
    SnapshotUnsupported,
    /// A snapshot could not be taken or restored.
    #[error("snapshot error: {reason}")]
    Snapshot {
        /// What went wrong.
        reason: String,
    },
    /// An episode's narrowing of the spec ([`Narrowing`](crate::Narrowing)) is not valid: a
    /// value that is not a schema, or a tool the spec does not have.
    #[error("invalid per-episode narrowing: {reason}")]
    InvalidNarrowing {
        /// What is wrong.
        reason: String,
    },
    /// The env panicked; the episode is lost and the env must be reset.
    #[error("the env panicked: {message}")]
    Panicked {
        /// The panic message.
        message: String,
    },
    /// A reward term (or the env itself, under a composed [`Reward`](crate::Reward)) gave a
    /// NaN or an infinity; the episode is lost (a reward that is not a number is never
    /// trained on).
    #[error("reward term `{term}` gave {value}, not a finite number")]
    InvalidReward {
        /// The term's name (`env` for the env's own reward).
        term: String,
        /// What it gave (`NaN`, `inf`, `-inf`).
        value: String,
    },
    /// A reward term could not score the step: a sandboxed reward plugin trapped, ran out of
    /// time or memory, returned an error, or a score outside the range it declared; the
    /// episode is lost.
    #[error("reward term `{term}` failed: {reason}")]
    RewardFailed {
        /// The term's name.
        term: String,
        /// What went wrong.
        reason: String,
    },
    /// The env's backend (a sandbox, a remote host) failed; the episode is lost.
    #[error("env backend failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// An error reported by an env running elsewhere (a sandboxed guest, a remote host) that has
    /// no typed equivalent here; its kind and message are kept.
    #[error("{message}")]
    Remote {
        /// The error's class.
        kind: ErrorKind,
        /// The message, as the remote env displayed it.
        message: String,
    },
    /// Reading or writing trajectories failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A JSON document (a trajectory line, a snapshot, a config) could not be parsed.
    #[error("invalid JSON{}: {source}", line.map(|l| format!(" on line {l}")).unwrap_or_default())]
    Json {
        /// The 1-based line, for JSONL input.
        line: Option<usize>,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}

/// The class of an [`EnvError`]: who made the mistake and what state the env is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The agent's action was invalid. The env is unchanged; show the message to the agent.
    InvalidAction,
    /// The caller misused the API (step before reset or after the end). The env is unchanged.
    Usage,
    /// The episode cannot go on (a panic, a sandbox trap, a failed backend). Reset to continue.
    Episode,
    /// Configuration, registry, snapshot or i/o problems outside an episode.
    Other,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::InvalidAction => "invalid action",
            ErrorKind::Usage => "usage error",
            ErrorKind::Episode => "episode error",
            ErrorKind::Other => "error",
        })
    }
}

impl EnvError {
    /// Classifies the error.
    ///
    /// ```
    /// use sandgym_env_api::{EnvError, ErrorKind};
    /// let e = EnvError::UnknownTool { name: "rm".into(), available: vec!["ls".into()] };
    /// assert_eq!(e.kind(), ErrorKind::InvalidAction);
    /// assert_eq!(e.to_string(), "unknown tool `rm`; available tools: ls");
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            EnvError::MalformedAction { .. }
            | EnvError::UnknownTool { .. }
            | EnvError::InvalidParameters { .. }
            | EnvError::ActionRejected { .. } => ErrorKind::InvalidAction,
            EnvError::NotReset | EnvError::EpisodeOver { .. } => ErrorKind::Usage,
            EnvError::Panicked { .. }
            | EnvError::Backend(_)
            | EnvError::InvalidReward { .. }
            | EnvError::RewardFailed { .. } => ErrorKind::Episode,
            EnvError::Remote { kind, .. } => *kind,
            _ => ErrorKind::Other,
        }
    }

    /// Whether the agent caused this error with an invalid action (see [`ErrorKind::InvalidAction`]).
    pub fn is_invalid_action(&self) -> bool {
        self.kind() == ErrorKind::InvalidAction
    }

    /// Wraps a backend error (for env implementations that run elsewhere, such as a sandbox).
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        EnvError::Backend(Box::new(error))
    }
}
