//! Any sandgym env behind [OpenEnv](https://github.com/meta-pytorch/OpenEnv)'s protocol, so
//! that trainers which speak it (TRL, verifiers, SkyRL, OpenEnv's own clients) can drive
//! sandgym's sandboxed envs unchanged.
//!
//! [`EnvServer`] serves one env kind (an [`EnvFactory`]) over HTTP and WebSocket, as OpenEnv's
//! `http_server.py` does:
//!
//! - `GET /ws`: one env instance per connection; JSON text frames `{"type": "reset", "data":
//!   {...}}`, `{"type": "step", "data": <action>}`, `{"type": "state"}`, `{"type": "close"}`
//!   and `{"type": "mcp", "data": <JSON-RPC>}`, answered by `{"type": "observation", "data":
//!   {"observation", "reward", "done"}}`, `{"type": "state", "data": {...}}`, `{"type": "mcp",
//!   "data": <JSON-RPC>}` or `{"type": "error", "data": {"message", "code"}}` ([`ErrorCode`]).
//! - `POST /reset`, `POST /step` (422 on a bad action), `GET /state`, `GET /health`,
//!   `GET /metadata`, `GET /schema` (JSON Schemas of action, observation and state from the
//!   env's [`EnvSpec`](sandgym_env_api::EnvSpec)), `POST /mcp` (`tools/list`, `tools/call`)
//!   and `GET /openapi.json`. As in OpenEnv, HTTP is stateless: each request gets a fresh env.
//!
//! Actions are Agent Template actions (`{"thought", "action": {"tool_name", "parameters"}}`
//! or `{"thought", "response"}`), a bare tool call (`{"tool_name", "parameters"}`) or
//! OpenEnv's MCP actions (`{"type": "call_tool", "tool_name", "arguments"}`, `{"type":
//! "list_tools"}`); observations carry the env's text and info and, after a step, the step's
//! Agent Template record ([`protocol`]).
//!
//! [`RemoteEnv`] is the other side: an [`Env`](sandgym_env_api::Env) whose episodes run on
//! such a server (`GET /spec`, a sandgym extension, gives it the env's full spec; for another
//! OpenEnv server the spec is built from `/metadata` and the MCP tool list).
//!
//! Limits ([`ServeConfig`]): most concurrent sessions (then `CAPACITY_REACHED`), an idle
//! timeout, the largest message; each env keeps its own limits (the sandbox's CPU and memory
//! per call). A frame, a body or an env that fails answers with a typed error; nothing a
//! client or a guest sends panics the server.
//!
//! The HTTP and WebSocket stack is axum's (on hyper and tokio-tungstenite); env calls run on
//! tokio's blocking pool, so a slow step holds only its own session.

#![deny(missing_docs)]

pub mod client;
mod error;
pub mod load;
pub mod protocol;
pub mod schema;
mod server;
mod session;

pub use client::{RemoteEnv, is_remote};
pub use error::ServeError;
pub use protocol::{ErrorCode, WireError};
pub use server::{EnvFactory, EnvServer, ServeConfig, default_env_threads};
