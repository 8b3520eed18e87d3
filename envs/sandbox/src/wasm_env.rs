//! `WasmEnv`: an [`Env`] whose implementation runs as a sandboxed guest.

use std::time::Instant;

use serde_json::{Map, Value};
use wasmtime::component::ResourceTableError;
use wasmtime::{Store, Trap, UpdateDeadline};

use sandgym_env_api::{Action, Done, Env, EnvError, EnvSpec, Observation, ResetOptions, WireError};

use crate::bindings::{EnvGuest, Status, WitError, WitErrorKind};
use crate::host::HostState;
use crate::{CpuLimit, Guest, Limits, Result, SandboxError};

/// Room in one call's copy out of the guest for what surrounds its largest string (the result
/// record, a status, a reward).
const TRANSFER_SLACK: usize = 64 << 10;

struct Instance {
    store: Store<HostState>,
    bindings: EnvGuest,
}

/// An env running inside a wasmtime guest. It implements [`Env`], so nothing above it knows
/// whether an env is native or sandboxed.
///
/// Every call into the guest runs under the sandbox's limits. A guest fault (timeout, memory,
/// stack, panic, oversized or invalid output, trap) returns an [`EnvError::Backend`] holding the
/// [`SandboxError`], ends the episode, and discards the instance; the next `reset`
/// instantiates a fresh one. Errors the env itself reports (an unknown tool, bad parameters)
/// come back as the same typed [`EnvError`] a native build returns.
///
/// `observe`, `reward` and `done` are answered from the last result on the host side, so a
/// step costs one call into the guest.
pub struct WasmEnv {
    guest: Guest,
    config: Map<String, Value>,
    instance: Option<Instance>,
    poisoned: Option<String>,
    spec: EnvSpec,
    last: Observation,
    reward: f64,
    done: Done,
    reset_once: bool,
    instances_created: u64,
}

impl std::fmt::Debug for WasmEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEnv")
            .field("id", &self.spec.id)
            .field("done", &self.done)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

/// The error a guest reported: its detail as the guest library sends it (`WireError` JSON,
/// the same typed error and message as a native run). A detail that is not one — a guest
/// written against the WIT contract directly, or a broken one — keeps the class the WIT
/// `kind` gives (so an invalid action stays the agent's mistake) and says what the guest sent,
/// an empty detail included.
fn wit_to_env_error(e: WitError) -> EnvError {
    if let Ok(wire) = serde_json::from_str::<WireError>(&e.detail) {
        let error = EnvError::from(wire);
        if !error.to_string().trim().is_empty() {
            return error;
        }
    }
    let kind = match e.kind {
        WitErrorKind::InvalidAction => sandgym_env_api::ErrorKind::InvalidAction,
        WitErrorKind::Usage => sandgym_env_api::ErrorKind::Usage,
        WitErrorKind::Episode => sandgym_env_api::ErrorKind::Episode,
        WitErrorKind::Other => sandgym_env_api::ErrorKind::Other,
    };
    let detail = e.detail.trim();
    let message = if detail.is_empty() {
        "the env reported an error without a message".to_owned()
    } else {
        let shown: String = detail.chars().take(500).collect();
        let more = if shown.len() < detail.len() {
            " …"
        } else {
            ""
        };
        format!("the env reported: {shown}{more}")
    };
    EnvError::Remote { kind, message }
}

fn status(s: Status) -> Done {
    match s {
        Status::Running => Done::Running,
        Status::Terminated => Done::Terminated,
        Status::Truncated => Done::Truncated,
    }
}

impl WasmEnv {
    pub(crate) fn new(guest: Guest, config: Map<String, Value>) -> Result<Self> {
        let mut env = Self {
            guest,
            config,
            instance: None,
            poisoned: None,
            spec: EnvSpec::new("unknown-v0".parse().expect("valid id")),
            last: Observation::default(),
            reward: 0.0,
            done: Done::Running,
            reset_once: false,
            instances_created: 0,
        };
        env.instance = Some(env.new_instance()?);
        let key = serde_json::to_string(&env.config).expect("a JSON map serialises");
        let cached = env
            .guest
            .inner
            .specs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        env.spec = match cached {
            Some(spec) => spec,
            None => {
                let text = env.call(|s, g| g.sandgym_env_env().call_spec(s))?;
                env.check_size(text.len())?;
                let spec: EnvSpec =
                    serde_json::from_str(&text).map_err(|e| SandboxError::InvalidOutput {
                        reason: format!("the spec is not a valid EnvSpec: {e}"),
                    })?;
                env.guest
                    .inner
                    .specs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, spec.clone());
                spec
            }
        };
        Ok(env)
    }

    /// The guest this env runs.
    pub fn guest(&self) -> &Guest {
        &self.guest
    }

    /// How many instances this env has created (1 plus one per recovery from a fault, or one
    /// per episode with `fresh_instance_per_episode`).
    pub fn instances_created(&self) -> u64 {
        self.instances_created
    }

    /// The lines the guest logged through the `host` interface since its instance started.
    pub fn logs(&self) -> Vec<String> {
        self.instance
            .as_ref()
            .map(|i| {
                i.store
                    .data()
                    .log
                    .iter()
                    .map(|(l, m)| format!("{l:?}: {m}"))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn limits(&self) -> &crate::Limits {
        &self.guest.inner.sandbox.config().limits
    }

    fn new_instance(&mut self) -> Result<Instance> {
        let limits = self.limits().clone();
        let mut store = new_store(self.guest.inner.sandbox.engine(), &limits);
        // Making the instance (instantiation and `init`) has its own, larger budget.
        let init_cpu = limits.init_budget();
        let init_limits = Limits {
            cpu: init_cpu,
            ..limits.clone()
        };
        arm(&mut store, init_cpu).map_err(SandboxError::Instantiate)?;
        let bindings =
            self.guest.inner.pre.instantiate(&mut store).map_err(|e| {
                match classify(e, &store, &init_limits) {
                    SandboxError::Trap { message } => {
                        SandboxError::Instantiate(wasmtime::Error::msg(message))
                    }
                    other => other,
                }
            })?;
        self.instances_created += 1;
        let mut instance = Instance { store, bindings };
        let config = serde_json::to_string(&self.config).expect("a JSON map serialises");
        arm(&mut instance.store, init_cpu).map_err(SandboxError::Instantiate)?;
        let init = instance
            .bindings
            .sandgym_env_env()
            .call_init(&mut instance.store, &config)
            .map_err(|e| classify(e, &instance.store, &init_limits))?;
        if let Err(refused) = init {
            let bytes = refused.detail.len();
            return Err(if bytes > limits.max_output_bytes {
                SandboxError::OutputTooLarge {
                    bytes,
                    limit: limits.max_output_bytes,
                }
            } else {
                SandboxError::Init(wit_to_env_error(refused))
            });
        }
        Ok(instance)
    }

    /// Runs one call into the guest under the limits; a fault poisons the instance.
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Store<HostState>, &EnvGuest) -> wasmtime::Result<T>,
    ) -> Result<T> {
        let limits = self.limits().clone();
        let Some(instance) = self.instance.as_mut() else {
            return Err(SandboxError::Poisoned {
                reason: self
                    .poisoned
                    .clone()
                    .unwrap_or_else(|| "no instance".into()),
            });
        };
        let bindings = &instance.bindings;
        call_under(&mut instance.store, &limits, |s| f(s, bindings)).inspect_err(|error| {
            self.fault(error);
        })
    }

    /// Ends the episode after a guest fault and discards the instance.
    fn fault(&mut self, error: &SandboxError) {
        self.poisoned = Some(error.to_string());
        self.instance = None;
        self.done = Done::Terminated;
    }

    fn check_size(&mut self, bytes: usize) -> Result<()> {
        let limit = self.limits().max_output_bytes;
        if bytes > limit {
            let error = SandboxError::OutputTooLarge { bytes, limit };
            self.fault(&error);
            return Err(error);
        }
        Ok(())
    }

    /// A reward from the guest, which must be a finite number.
    fn check_reward(&mut self, reward: f64) -> Result<f64> {
        if reward.is_finite() {
            return Ok(reward);
        }
        let error = SandboxError::InvalidOutput {
            reason: format!("the reward is {reward}, not a finite number"),
        };
        self.fault(&error);
        Err(error)
    }

    /// An error the env reported, whose detail is bounded like any other output.
    fn env_error(&mut self, error: WitError) -> EnvError {
        match self.check_size(error.detail.len()) {
            Ok(()) => wit_to_env_error(error),
            Err(too_large) => too_large.into(),
        }
    }

    fn parse_observation(&mut self, text: &str) -> Result<Observation> {
        self.check_size(text.len())?;
        serde_json::from_str(text).map_err(|e| {
            let error = SandboxError::InvalidOutput {
                reason: format!("the observation is not valid JSON: {e}"),
            };
            self.fault(&error);
            error
        })
    }

    /// Refreshes the host-side copies of observation, reward and done from the guest.
    fn sync(&mut self) -> Result<()> {
        let text = self.call(|s, g| g.sandgym_env_env().call_observe(s))?;
        self.last = self.parse_observation(&text)?;
        let reward = self.call(|s, g| g.sandgym_env_env().call_reward(s))?;
        self.reward = self.check_reward(reward)?;
        self.done = status(self.call(|s, g| g.sandgym_env_env().call_done(s))?);
        Ok(())
    }

    fn ensure_instance(&mut self, fresh: bool) -> Result<()> {
        if fresh || self.instance.is_none() {
            self.instance = None;
            let instance = self.new_instance()?;
            self.instance = Some(instance);
            self.poisoned = None;
        }
        Ok(())
    }
}

/// A store for one guest instance under `limits`: the resource limiter, the bound on each
/// call's copy out of the guest, the handle limit and the CPU deadline check.
pub(crate) fn new_store(engine: &wasmtime::Engine, limits: &Limits) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(limits));
    store.limiter(|s| &mut s.limiter);
    store.set_hostcall_fuel(limits.max_output_bytes.saturating_add(TRANSFER_SLACK));
    store.set_max_component_handles(limits.max_handles);
    if let CpuLimit::Deadline(_) = limits.cpu {
        // Every epoch tick compares the clock with the call's deadline: counting ticks
        // instead drifts late by however long the ticker oversleeps and the guest spends in
        // host calls (measured 25–70 % late).
        store.epoch_deadline_callback(|store| match store.data().deadline {
            Some((deadline, limit)) if Instant::now() >= deadline => {
                Err(wasmtime::Error::new(SandboxError::Timeout { limit }))
            }
            _ => Ok(UpdateDeadline::Continue(1)),
        });
    }
    store
}

/// One call into a guest's store under `limits` (the CPU budget armed first), its failure
/// classified as a typed sandbox error.
pub(crate) fn call_under<T>(
    store: &mut Store<HostState>,
    limits: &Limits,
    f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<T>,
) -> Result<T> {
    let result = arm(store, limits.cpu).and_then(|()| f(store));
    result.map_err(|e| classify(e, store, limits))
}

/// Sets the per-call CPU budget and starts the call's stderr afresh.
pub(crate) fn arm(store: &mut Store<HostState>, cpu: CpuLimit) -> wasmtime::Result<()> {
    store.data().stderr.clear();
    match cpu {
        CpuLimit::Deadline(limit) => {
            store.data_mut().deadline = Some((Instant::now() + limit, limit));
            store.set_epoch_deadline(1);
            Ok(())
        }
        CpuLimit::Fuel(fuel) => store.set_fuel(fuel),
    }
}

/// What wasmtime says when a call's copy out of the guest passes the store's hostcall fuel
/// (its error type is private, so the message is the only thing to recognise).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";
/// What wasmtime says when the guest holds more handles than the store allows.
const HANDLE_LIMIT_EXCEEDED: &str = "store handle limit exceeded";

/// Turns a wasmtime error from a guest call into a typed sandbox error, with a one-line
/// message (wasmtime's errors carry a multi-line wasm backtrace).
pub(crate) fn classify(
    error: wasmtime::Error,
    store: &Store<HostState>,
    limits: &Limits,
) -> SandboxError {
    let error = match error.downcast::<SandboxError>() {
        Ok(typed) => return typed,
        Err(error) => error,
    };
    let Some(trap) = error.downcast_ref::<Trap>() else {
        let full = matches!(
            error.downcast_ref::<ResourceTableError>(),
            Some(ResourceTableError::Full)
        );
        let says = |what: &str| error.chain().any(|e| e.to_string().contains(what));
        if full || says(HANDLE_LIMIT_EXCEEDED) {
            return SandboxError::HandleLimit {
                limit: limits.max_handles,
            };
        }
        if says(HOSTCALL_FUEL_EXHAUSTED) {
            return SandboxError::TransferTooLarge {
                limit: limits.max_output_bytes,
            };
        }
        let cause = error.root_cause().to_string();
        return SandboxError::Trap {
            message: cause.lines().next().unwrap_or_default().to_owned(),
        };
    };
    let cpu = limits.cpu;
    match *trap {
        Trap::OutOfFuel => SandboxError::OutOfFuel {
            fuel: match cpu {
                CpuLimit::Fuel(f) => f,
                CpuLimit::Deadline(_) => 0,
            },
        },
        Trap::Interrupt => SandboxError::Timeout {
            limit: match cpu {
                CpuLimit::Deadline(d) => d,
                CpuLimit::Fuel(_) => Default::default(),
            },
        },
        Trap::StackOverflow => SandboxError::StackOverflow,
        Trap::UnreachableCodeReached => match store.data().panic_message() {
            Some(message) => SandboxError::GuestPanic { message },
            None => SandboxError::Trap {
                message: trap.to_string(),
            },
        },
        Trap::MemoryOutOfBounds => SandboxError::Trap {
            message: format!(
                "{trap} (in Rust guests usually a shadow-stack overflow from deep recursion with large frames)"
            ),
        },
        other => SandboxError::Trap {
            message: other.to_string(),
        },
    }
}

impl Env for WasmEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> sandgym_env_api::Result<Observation> {
        let fresh = self.guest.inner.sandbox.config().fresh_instance_per_episode && self.reset_once;
        self.ensure_instance(fresh)?;
        let options = serde_json::to_string(options).expect("ResetOptions serialise");
        let result = self.call(|s, g| g.sandgym_env_env().call_reset(s, seed, &options))?;
        let text = result.map_err(|e| self.env_error(e))?;
        self.last = self.parse_observation(&text)?;
        self.reward = 0.0;
        self.done = Done::Running;
        self.reset_once = true;
        Ok(self.last.clone())
    }

    fn observe(&self) -> Observation {
        self.last.clone()
    }

    fn step(&mut self, action: &Action) -> sandgym_env_api::Result<Observation> {
        if !self.reset_once {
            return Err(EnvError::NotReset);
        }
        if let Some(reason) = &self.poisoned {
            return Err(SandboxError::Poisoned {
                reason: reason.clone(),
            }
            .into());
        }
        if self.done.is_done() {
            return Err(EnvError::EpisodeOver { done: self.done });
        }
        let action = action.to_json();
        let result = self.call(|s, g| g.sandgym_env_env().call_step(s, &action))?;
        let step = result.map_err(|e| self.env_error(e))?;
        let observation = self.parse_observation(&step.observation)?;
        let reward = self.check_reward(step.reward)?;
        self.last = observation;
        self.reward = reward;
        self.done = status(step.status);
        Ok(self.last.clone())
    }

    fn reward(&self) -> f64 {
        self.reward
    }

    fn done(&self) -> Done {
        self.done
    }

    fn snapshot(&mut self) -> sandgym_env_api::Result<Vec<u8>> {
        let result = self.call(|s, g| g.sandgym_env_env().call_snapshot(s))?;
        let bytes = result.map_err(|e| self.env_error(e))?;
        self.check_size(bytes.len())?;
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> sandgym_env_api::Result<()> {
        self.ensure_instance(false)?;
        let state = snapshot.to_vec();
        let result = self.call(|s, g| g.sandgym_env_env().call_restore(s, &state))?;
        result.map_err(|e| self.env_error(e))?;
        self.reset_once = true;
        self.sync()?;
        Ok(())
    }
}

#[cfg(test)]
mod wit_error_tests {
    use super::*;

    #[test]
    fn a_guest_error_that_is_not_wire_json_keeps_its_wit_kind_and_says_what_came() {
        let e = wit_to_env_error(WitError {
            kind: WitErrorKind::InvalidAction,
            detail: "no such tool".into(),
        });
        assert!(e.is_invalid_action(), "{e:?}");
        assert!(e.to_string().contains("no such tool"), "{e}");
        let empty = wit_to_env_error(WitError {
            kind: WitErrorKind::Episode,
            detail: "  ".into(),
        });
        assert_eq!(empty.kind(), sandgym_env_api::ErrorKind::Episode);
        assert!(empty.to_string().contains("without a message"), "{empty}");
        let wire = WireError::from(&EnvError::InvalidOptions {
            reason: "bad split".into(),
        })
        .to_json();
        let typed = wit_to_env_error(WitError {
            kind: WitErrorKind::Other,
            detail: wire,
        });
        assert!(
            matches!(typed, EnvError::InvalidOptions { .. }),
            "{typed:?}"
        );
    }
}
