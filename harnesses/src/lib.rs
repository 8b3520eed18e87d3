//! The two bundled agents written the way agent teams write them: a loop over an
//! OpenAI-compatible chat-completions API with `tools` and `tool_calls`, a message history
//! that is compressed when it outgrows its budget, and a sub-agent with its own system prompt.
//!
//! The harnesses know nothing about reinforcement learning. They take the API's base URL from
//! their [`HarnessConfig`] and call their tools through a [`Tools`] service, which describes
//! its own functions (as an MCP server would) and runs them. sandgym's comparison plugs in a
//! service backed by the envs' business logic and points the base URL at the recording proxy;
//! in production the same code would point at any OpenAI-compatible server.
//!
//! ```no_run
//! use sandgym_harnesses::openai::ToolDef;
//! use sandgym_harnesses::{ChatClient, Harness, HarnessConfig, Result, Tools};
//!
//! /// A database service with no tools, that prints the answer it is given.
//! struct Printer(bool);
//!
//! impl Tools for Printer {
//!     fn definitions(&self) -> Vec<ToolDef> { Vec::new() }
//!     fn call(&mut self, name: &str, _arguments: &str) -> Result<String> {
//!         Ok(format!("error: no tool {name}"))
//!     }
//!     fn finish(&mut self, answer: &str) -> Result<()> {
//!         println!("{answer}");
//!         self.0 = true;
//!         Ok(())
//!     }
//!     fn finished(&self) -> bool { self.0 }
//! }
//!
//! let config = HarnessConfig::new("http://127.0.0.1:8000/v1");
//! let client = ChatClient::new(&config);
//! let outcome = Harness::sql(config).run(&client, &mut Printer(false), "How many customers are there?")?;
//! println!("{} model calls", outcome.model_calls);
//! # Ok::<(), sandgym_harnesses::HarnessError>(())
//! ```
#![deny(missing_docs)]

mod agents;
mod client;
mod config;
mod conversation;
mod error;
mod tools;

pub use agents::Harness;
pub use client::ChatClient;
pub use config::HarnessConfig;
pub use conversation::Conversation;
pub use error::{HarnessError, Result};
pub use tools::{Outcome, Tools};

/// The chat-completions wire types (the `sandgym-chat-api` crate).
pub use sandgym_chat_api as openai;
