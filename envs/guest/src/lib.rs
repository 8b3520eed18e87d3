//! Export any [`Env`](sandgym_env_api::Env) as a WebAssembly component that the sandgym sandbox runs.
//!
//! An env crate stays an ordinary Rust crate that builds natively; a guest crate of a few lines
//! (a `cdylib` built for `wasm32-wasip2`) exports it:
//!
//! ```ignore
//! // guests/guess-number/src/lib.rs
//! sandgym_guest::export_env!(sandgym_env_api::toy::GuessNumber::from_config);
//! ```
//!
//! The argument is a function from the configuration object (`&serde_json::Map`) to
//! `Result<impl Env, EnvError>`. Everything crosses the boundary in the format of
//! `envs/wit/env.wit`: specs, observations and actions as JSON, errors as
//! [`WireError`](sandgym_env_api::WireError) so the host rebuilds the same typed error.
//!
//! Inside the guest there is no filesystem, network, environment or wall clock: all
//! randomness must come from the reset seed, as the Env contract requires anyway. Use [`log`]
//! to write to the host's log.
#![deny(missing_docs)]

/// The bindings generated from `envs/wit/env.wit`.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "env-guest",
        pub_export_macro: true,
        export_macro_name: "__export_env_guest",
        default_bindings_module: "::sandgym_guest::bindings",
    });
}

pub use bindings::exports::sandgym::env::env::{
    EnvError as WitError, ErrorKind, Guest, Status as WitDone, StepResult,
};
pub use bindings::sandgym::env::host::Level;

/// Writes a line to the host's log.
pub fn log(level: Level, message: &str) {
    bindings::sandgym::env::host::log(level, message);
}

/// Exports an env constructor as the guest's `env` interface. See the crate docs.
#[macro_export]
macro_rules! export_env {
    ($make:expr) => {
        // Only a WebAssembly build exports the interface: a native build of the same crate
        // (its `cargo test`, an `rlib` or `cdylib` for the host) has nothing to export, and
        // the component's export names are not valid native symbol names.
        #[cfg(target_family = "wasm")]
        struct __SandgymEnvGuest;

        #[cfg(target_family = "wasm")]
        impl $crate::Guest for __SandgymEnvGuest {
            fn init(config: String) -> ::core::result::Result<(), $crate::WitError> {
                $crate::__private::init(&config, |c| $crate::__private::boxed(($make)(c)))
            }
            fn spec() -> String {
                $crate::__private::spec()
            }
            fn reset(seed: u64, options: String) -> ::core::result::Result<String, $crate::WitError> {
                $crate::__private::reset(seed, &options)
            }
            fn observe() -> String {
                $crate::__private::observe()
            }
            fn step(action: String) -> ::core::result::Result<$crate::StepResult, $crate::WitError> {
                $crate::__private::step(&action)
            }
            fn reward() -> f64 {
                $crate::__private::reward()
            }
            fn done() -> $crate::WitDone {
                $crate::__private::done()
            }
            fn snapshot() -> ::core::result::Result<Vec<u8>, $crate::WitError> {
                $crate::__private::snapshot()
            }
            fn restore(state: Vec<u8>) -> ::core::result::Result<(), $crate::WitError> {
                $crate::__private::restore(&state)
            }
        }

        #[cfg(target_family = "wasm")]
        $crate::bindings::__export_env_guest!(__SandgymEnvGuest with_types_in $crate::bindings);
    };
}

#[doc(hidden)]
pub mod __private {
    //! The guest side of the interface; used by [`export_env!`](crate::export_env).

    use std::cell::RefCell;

    use sandgym_env_api::{
        Action, Done, Env, EnvError, ErrorKind as Kind, Observation, ResetOptions, WireError,
    };
    use serde_json::{Map, Value};

    use crate::{ErrorKind, StepResult, WitDone, WitError};

    thread_local! {
        static ENV: RefCell<Option<Box<dyn Env>>> = const { RefCell::new(None) };
    }

    /// Boxes a constructor's result.
    pub fn boxed<E: Env + 'static>(made: Result<E, EnvError>) -> Result<Box<dyn Env>, EnvError> {
        made.map(|e| Box::new(e) as Box<dyn Env>)
    }

    fn wit_error(e: &EnvError) -> WitError {
        WitError {
            kind: match e.kind() {
                Kind::InvalidAction => ErrorKind::InvalidAction,
                Kind::Usage => ErrorKind::Usage,
                Kind::Episode => ErrorKind::Episode,
                Kind::Other => ErrorKind::Other,
            },
            detail: WireError::from(e).to_json(),
        }
    }

    fn wit_done(done: Done) -> WitDone {
        match done {
            Done::Running => WitDone::Running,
            Done::Terminated => WitDone::Terminated,
            Done::Truncated => WitDone::Truncated,
        }
    }

    fn with_env<T>(f: impl FnOnce(&mut dyn Env) -> T) -> T {
        ENV.with(|cell| {
            let mut env = cell.borrow_mut();
            let env = env
                .as_deref_mut()
                .expect("sandgym guest used before init (a host bug)");
            f(env)
        })
    }

    fn obs_json(obs: &Observation) -> String {
        serde_json::to_string(obs).expect("an Observation always serialises")
    }

    fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, EnvError> {
        serde_json::from_str(text).map_err(|e| EnvError::InvalidOptions {
            reason: format!("{what} is not valid: {e}"),
        })
    }

    /// `init`.
    pub fn init(
        config: &str,
        make: impl FnOnce(&Map<String, Value>) -> Result<Box<dyn Env>, EnvError>,
    ) -> Result<(), WitError> {
        let config: Map<String, Value> = if config.trim().is_empty() {
            Map::new()
        } else {
            parse(config, "the env configuration").map_err(|e| wit_error(&e))?
        };
        let env = make(&config).map_err(|e| wit_error(&e))?;
        ENV.with(|cell| *cell.borrow_mut() = Some(env));
        Ok(())
    }

    /// `spec`.
    pub fn spec() -> String {
        with_env(|env| serde_json::to_string(env.spec()).expect("an EnvSpec always serialises"))
    }

    /// `reset`.
    pub fn reset(seed: u64, options: &str) -> Result<String, WitError> {
        let options: ResetOptions =
            parse(options, "the reset options").map_err(|e| wit_error(&e))?;
        with_env(|env| env.reset(seed, &options))
            .map(|o| obs_json(&o))
            .map_err(|e| wit_error(&e))
    }

    /// `observe`.
    pub fn observe() -> String {
        with_env(|env| obs_json(&env.observe()))
    }

    /// `step`.
    pub fn step(action: &str) -> Result<StepResult, WitError> {
        let action = Action::from_json(action).map_err(|e| wit_error(&e))?;
        with_env(|env| {
            let obs = env.step(&action).map_err(|e| wit_error(&e))?;
            Ok(StepResult {
                observation: obs_json(&obs),
                reward: env.reward(),
                status: wit_done(env.done()),
            })
        })
    }

    /// `reward`.
    pub fn reward() -> f64 {
        with_env(|env| env.reward())
    }

    /// `done`.
    pub fn done() -> WitDone {
        with_env(|env| wit_done(env.done()))
    }

    /// `snapshot`.
    pub fn snapshot() -> Result<Vec<u8>, WitError> {
        with_env(|env| env.snapshot()).map_err(|e| wit_error(&e))
    }

    /// `restore`.
    pub fn restore(state: &[u8]) -> Result<(), WitError> {
        with_env(|env| env.restore(state)).map_err(|e| wit_error(&e))
    }
}
