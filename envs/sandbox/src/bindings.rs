//! The host bindings generated from `envs/wit` (every `bindgen!` call lives here): the env
//! guest's world, and in [`reward`] the reward plugin's.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "env-guest",
});

pub use exports::sandgym::env::env::{EnvError as WitError, ErrorKind as WitErrorKind, Status};
pub use sandgym::env::host::Level;

/// The reward plugin's world (`envs/wit/reward.wit`).
pub mod reward {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "reward-plugin",
    });

    pub use exports::sandgym::env::reward::StepScore;
}
