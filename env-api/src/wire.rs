//! `EnvError` as JSON, for envs that run across a boundary (WASM guests, remote hosts).

use serde::{Deserialize, Serialize};

use crate::{Done, EnvError, ErrorKind};

/// The serialisable form of an [`EnvError`]: the variants an env reports keep their type and
/// fields; anything else travels as its kind and message ([`EnvError::Remote`]).
///
/// ```
/// use sandgym_env_api::{EnvError, WireError};
/// let e = EnvError::UnknownTool { name: "rm".into(), available: vec!["ls".into()] };
/// let json = WireError::from(&e).to_json();
/// let back = EnvError::from(WireError::from_json(&json));
/// assert!(matches!(back, EnvError::UnknownTool { .. }));
/// assert_eq!(back.to_string(), e.to_string());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
#[allow(missing_docs)] // the fields mirror EnvError's
pub enum WireError {
    MalformedAction {
        reason: String,
    },
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    InvalidParameters {
        tool: String,
        problems: Vec<String>,
    },
    ActionRejected {
        reason: String,
    },
    NotReset,
    EpisodeOver {
        done: Done,
    },
    InvalidOptions {
        reason: String,
    },
    InvalidConfig {
        reason: String,
    },
    SnapshotUnsupported,
    Snapshot {
        reason: String,
    },
    Panicked {
        message: String,
    },
    Remote {
        kind: ErrorKind,
        message: String,
    },
}

impl WireError {
    /// The JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a WireError always serialises")
    }

    /// Parses JSON text; text that is not a `WireError` becomes a [`WireError::Remote`] of kind
    /// [`ErrorKind::Other`] carrying the text, so nothing is lost.
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_else(|_| WireError::Remote {
            kind: ErrorKind::Other,
            message: text.to_owned(),
        })
    }
}

impl From<&EnvError> for WireError {
    fn from(e: &EnvError) -> Self {
        match e {
            EnvError::MalformedAction { reason } => Self::MalformedAction {
                reason: reason.clone(),
            },
            EnvError::UnknownTool { name, available } => Self::UnknownTool {
                name: name.clone(),
                available: available.clone(),
            },
            EnvError::InvalidParameters { tool, problems } => Self::InvalidParameters {
                tool: tool.clone(),
                problems: problems.clone(),
            },
            EnvError::ActionRejected { reason } => Self::ActionRejected {
                reason: reason.clone(),
            },
            EnvError::NotReset => Self::NotReset,
            EnvError::EpisodeOver { done } => Self::EpisodeOver { done: *done },
            EnvError::InvalidOptions { reason } => Self::InvalidOptions {
                reason: reason.clone(),
            },
            EnvError::InvalidConfig { reason } => Self::InvalidConfig {
                reason: reason.clone(),
            },
            EnvError::SnapshotUnsupported => Self::SnapshotUnsupported,
            EnvError::Snapshot { reason } => Self::Snapshot {
                reason: reason.clone(),
            },
            EnvError::Panicked { message } => Self::Panicked {
                message: message.clone(),
            },
            other => Self::Remote {
                kind: other.kind(),
                message: other.to_string(),
            },
        }
    }
}

impl From<WireError> for EnvError {
    fn from(w: WireError) -> Self {
        match w {
            WireError::MalformedAction { reason } => Self::MalformedAction { reason },
            WireError::UnknownTool { name, available } => Self::UnknownTool { name, available },
            WireError::InvalidParameters { tool, problems } => {
                Self::InvalidParameters { tool, problems }
            }
            WireError::ActionRejected { reason } => Self::ActionRejected { reason },
            WireError::NotReset => Self::NotReset,
            WireError::EpisodeOver { done } => Self::EpisodeOver { done },
            WireError::InvalidOptions { reason } => Self::InvalidOptions { reason },
            WireError::InvalidConfig { reason } => Self::InvalidConfig { reason },
            WireError::SnapshotUnsupported => Self::SnapshotUnsupported,
            WireError::Snapshot { reason } => Self::Snapshot { reason },
            WireError::Panicked { message } => Self::Panicked { message },
            WireError::Remote { kind, message } => Self::Remote { kind, message },
        }
    }
}
