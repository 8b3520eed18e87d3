//! The API-boundary side of sandgym: the policy behind an OpenAI-compatible server, a
//! recording proxy in front of it, and the recorded traces turned into the same episodes the
//! trainer learns from.
//!
//! ```text
//! harness ──HTTP──▶ Proxy ──HTTP──▶ PolicyServer (burn policy, tools → constraint)
//!                     │
//!                     ▼ SQLite (WAL): requests, responses, token ids, log-probs, latency, rewards
//!                 TraceReader ──▶ Vec<Episode> ──▶ the trainer's algorithms
//! ```
#![deny(missing_docs)]

mod batcher;
pub mod chat;
pub mod deploy;
mod error;
mod express;
mod follow;
pub mod http;
pub mod judge;
pub mod published;
mod recorder;
mod server;
mod stitch;
mod store;
#[cfg(test)]
mod test_model;
mod trace;

pub use deploy::Trial;
pub use error::{ProxyError, Result};
pub use express::Express;
pub use follow::{
    Action, Decision, FollowConfig, FollowState, Follower, decisions, last_incumbent,
};
pub use recorder::{Proxy, ProxyConfig};
pub use server::{Controls, DeploymentStatus, PolicyServer, Served, ServerConfig, ShadowRecord};
pub use stitch::{Samples, Stitched, stitch};
pub use store::{CallRecord, RewardRecord, TraceStore, TraceWriter, VersionOutcome};
pub use trace::{Drift, TraceReader, TraceStats};
