//! Integration tests of the Env contract (one binary, as wasmtime lays out its tests).

mod broken;
mod checker;
mod roundtrip;
mod trajectory;
mod vec_env;
mod wrappers;
