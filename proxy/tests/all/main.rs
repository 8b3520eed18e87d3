//! Integration tests of the policy server, the recording proxy and the traces.

mod common;
mod openai_client;
mod recorder;
mod server;
mod traces;
