//! The host bindings generated from `envs/wit/env.wit` (every `bindgen!` call lives here).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "env-guest",
});

pub use exports::sandgym::env::env::{EnvError as WitError, Status};
pub use sandgym::env::host::Level;
