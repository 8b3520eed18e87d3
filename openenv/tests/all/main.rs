//! Integration tests of the env server and its client.

mod server;
