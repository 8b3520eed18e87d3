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

pub mod chat;
mod error;
pub mod http;
mod recorder;
mod server;
mod store;
mod trace;

pub use error::{ProxyError, Result};
pub use recorder::{Proxy, ProxyConfig};
pub use server::{PolicyServer, Served, ServerConfig};
pub use store::{CallRecord, RewardRecord, TraceStore, TraceWriter};
pub use trace::{Drift, TraceReader, TraceStats};
