//! The shared engine, its epoch ticker, and loaded guests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::reward::RewardPluginPre;
use crate::bindings::{EnvGuest, EnvGuestPre};
use crate::clock::VirtualClock;
use crate::host::HostState;
use crate::{CpuLimit, Result, RewardGuest, SandboxConfig, SandboxError, WasmEnv, cache};

/// The most pooled instances a sandbox may be configured with (the pool's slot counts are
/// multiples of it).
const MAX_INSTANCES: u32 = 1 << 20;

/// The process-wide sandbox ([`Sandbox::shared`]).
static SHARED: OnceLock<std::result::Result<Sandbox, String>> = OnceLock::new();

/// How often the epoch advances when CPU is limited by deadline.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// A wasmtime engine configured for sandgym guests, shared by every guest it loads.
///
/// Cloning is cheap (an `Arc`). Guests are compiled once (and cached on disk), linked once
/// (`InstancePre`), and instantiated per [`WasmEnv`].
///
/// ```
/// use sandgym_sandbox::{Sandbox, SandboxConfig};
/// let sandbox = Sandbox::new(SandboxConfig::default())?;
/// let guest = sandbox.load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)?;
/// let env = guest.instantiate(&Default::default())?;
/// use sandgym_env_api::Env;
/// assert_eq!(env.spec().id.to_string(), "guess-number-v0");
/// # Ok::<(), sandgym_sandbox::SandboxError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    config: SandboxConfig,
    loaded: Mutex<HashMap<String, Guest>>,
    rewards: Mutex<HashMap<String, RewardGuest>>,
    ticker_stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Sandbox {
    /// A sandbox with its own engine.
    pub fn new(config: SandboxConfig) -> Result<Self> {
        let limits = &config.limits;
        if std::mem::discriminant(&limits.cpu) != std::mem::discriminant(&limits.init_budget()) {
            return Err(SandboxError::InvalidConfig {
                reason: format!(
                    "`init_cpu` ({:?}) and `cpu` ({:?}) must both be deadlines or both fuel",
                    limits.init_budget(),
                    limits.cpu
                ),
            });
        }
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .max_wasm_stack(config.limits.stack_bytes)
            .parallel_compilation(true);
        match config.limits.cpu {
            CpuLimit::Deadline(_) => {
                wasm.epoch_interruption(true);
            }
            CpuLimit::Fuel(_) => {
                wasm.consume_fuel(true);
            }
        }
        if config.max_instances > MAX_INSTANCES {
            return Err(SandboxError::InvalidConfig {
                reason: format!(
                    "max_instances {} is over {MAX_INSTANCES}",
                    config.max_instances
                ),
            });
        }
        if config.pooling {
            let n = config.max_instances.max(1);
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(n)
                .total_core_instances(n * 8)
                .total_memories(n * 2)
                .total_tables(n * 8)
                .max_memories_per_component(8)
                .max_tables_per_component(16)
                .max_core_instances_per_component(16)
                .max_memory_size(config.limits.memory_bytes)
                .table_elements(config.limits.table_elements);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm).map_err(SandboxError::Load)?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        if matches!(config.limits.cpu, CpuLimit::Deadline(_)) {
            let engine = engine.clone();
            let stop = ticker_stop.clone();
            std::thread::Builder::new()
                .name("sandgym-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|source| SandboxError::Io {
                    path: "epoch ticker thread".into(),
                    source,
                })?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                config,
                loaded: Mutex::new(HashMap::new()),
                rewards: Mutex::new(HashMap::new()),
                ticker_stop,
            }),
        })
    }

    /// The process-wide sandbox: the default configuration, unless
    /// [`configure_shared`](Self::configure_shared) gave it another first.
    pub fn shared() -> Result<Self> {
        SHARED
            .get_or_init(|| Sandbox::new(SandboxConfig::default()).map_err(|e| e.to_string()))
            .clone()
            .map_err(|e| SandboxError::Load(wasmtime::Error::msg(e)))
    }

    /// Makes the process-wide sandbox with `config` (e.g. more pooled instances for a server
    /// holding many sessions). Only before its first use: afterwards it is an error, since
    /// guests already loaded live in the engine that exists.
    pub fn configure_shared(config: SandboxConfig) -> Result<Self> {
        let mut made = false;
        let shared = SHARED.get_or_init(|| {
            made = true;
            Sandbox::new(config).map_err(|e| e.to_string())
        });
        if !made {
            return Err(SandboxError::InvalidConfig {
                reason: "the shared sandbox is already in use; configure it before any env is made"
                    .into(),
            });
        }
        shared
            .clone()
            .map_err(|e| SandboxError::Load(wasmtime::Error::msg(e)))
    }

    /// The configuration.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Compiles (or fetches from the cache) and links a guest component. Loading the same
    /// bytes again returns the already linked guest.
    pub fn load(&self, wasm: &[u8]) -> Result<Guest> {
        check_component_header(wasm)?;
        let key = cache::key(&self.inner.engine, wasm);
        if let Some(guest) = self.lock().get(&key) {
            return Ok(guest.clone());
        }
        let (component, mut linker) = self.compile(wasm)?;
        EnvGuest::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(SandboxError::Load)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(SandboxError::Load)?;
        let pre = EnvGuestPre::new(pre).map_err(|e| not_a(e, "an env", BUILD_A_GUEST))?;
        let guest = Guest {
            inner: Arc::new(GuestInner {
                sandbox: self.clone(),
                pre,
                key: key.clone(),
                specs: Mutex::new(HashMap::new()),
            }),
        };
        self.lock().insert(key, guest.clone());
        Ok(guest)
    }

    /// Reads a guest component from a file and loads it.
    pub fn load_file(&self, path: &std::path::Path) -> Result<Guest> {
        self.load(&read(path)?)
    }

    /// Compiles (or fetches from the cache) and links a reward plugin component (built with
    /// `sandgym_reward_guest::export_reward!`). Loading the same bytes again returns the
    /// already linked plugin.
    pub fn load_reward(&self, wasm: &[u8]) -> Result<RewardGuest> {
        check_component_header(wasm)?;
        let key = cache::key(&self.inner.engine, wasm);
        let rewards = || self.inner.rewards.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(guest) = rewards().get(&key) {
            return Ok(guest.clone());
        }
        let (component, linker) = self.compile(wasm)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(SandboxError::Load)?;
        let pre =
            RewardPluginPre::new(pre).map_err(|e| not_a(e, "a reward plugin", BUILD_A_REWARD))?;
        let guest = RewardGuest::new(self.clone(), pre);
        rewards().insert(key, guest.clone());
        Ok(guest)
    }

    /// Reads a reward plugin component from a file and loads it.
    pub fn load_reward_file(&self, path: &std::path::Path) -> Result<RewardGuest> {
        self.load_reward(&read(path)?)
    }

    /// The compiled component and a linker with what every guest gets (WASI with nothing
    /// granted, the virtual clock).
    fn compile(&self, wasm: &[u8]) -> Result<(Component, Linker<HostState>)> {
        let cache_dir = self.inner.config.cache_dir.as_ref().map(|d| d.join("wasm"));
        let component = cache::load(&self.inner.engine, wasm, cache_dir.as_deref())?;
        let mut linker = Linker::<HostState>::new(&self.inner.engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(SandboxError::Load)?;
        VirtualClock::add_to_linker(&mut linker).map_err(SandboxError::Load)?;
        Ok((component, linker))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Guest>> {
        self.inner.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| SandboxError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A component that links but does not export what it is loaded as (an env loaded as a
/// reward plugin, or the other way round): said in one line, with what to build.
fn not_a(error: wasmtime::Error, what: &str, build: &str) -> SandboxError {
    SandboxError::NotAComponent {
        reason: format!(
            "the component is not {what} ({}): {build}",
            error
                .root_cause()
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
        ),
    }
}

/// What to build instead of a file that is not a guest component.
const BUILD_A_GUEST: &str = "build the env with `sandgym_guest::export_env!` as a `cdylib` for \
    wasm32-wasip2 (README: \"Ship your env as WASM\")";

/// What to build instead of a component that is not a reward plugin.
const BUILD_A_REWARD: &str = "build the plugin with `sandgym_reward_guest::export_reward!` as a \
    `cdylib` for wasm32-wasip2 (README: \"Compose a reward\")";

/// Tells apart, in one line, bytes that are not WebAssembly and a core module from a
/// component (whose header is `\0asm`, then version 0x0d and layer 1), before wasmtime's
/// parser reports either at length.
fn check_component_header(wasm: &[u8]) -> Result<()> {
    let reason = match wasm.get(..8) {
        Some([0, b'a', b's', b'm', 0x0d, 0x00, 0x01, 0x00]) => return Ok(()),
        Some([0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00]) => {
            format!("a core WebAssembly module, not a component: {BUILD_A_GUEST}")
        }
        _ if wasm.starts_with(b"\0asm") => {
            format!("a WebAssembly file of an unknown version, not a component: {BUILD_A_GUEST}")
        }
        _ => format!("not a WebAssembly file (it does not start with \\0asm): {BUILD_A_GUEST}"),
    };
    Err(SandboxError::NotAComponent { reason })
}

/// A compiled, linked guest, ready to instantiate (cheap to clone).
#[derive(Clone)]
pub struct Guest {
    pub(crate) inner: Arc<GuestInner>,
}

pub(crate) struct GuestInner {
    pub(crate) sandbox: Sandbox,
    pub(crate) pre: EnvGuestPre<HostState>,
    key: String,
    /// Specs by configuration text: a guest's spec is a function of its configuration, so
    /// later instances skip asking for it.
    pub(crate) specs: Mutex<HashMap<String, sandgym_env_api::EnvSpec>>,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("key", &self.inner.key)
            .finish_non_exhaustive()
    }
}

impl Guest {
    /// A new env instance with the given configuration (passed to the guest's constructor).
    pub fn instantiate(&self, config: &Map<String, Value>) -> Result<WasmEnv> {
        WasmEnv::new(self.clone(), config.clone())
    }

    /// The sandbox this guest belongs to.
    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }
}
