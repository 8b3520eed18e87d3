//! Integration tests of the policy server, the recording proxy and the traces.

mod common;
mod hostile_clients;
mod openai_client;
mod recorder;
mod server;
mod traces;
