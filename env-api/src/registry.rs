//! Versioned env ids mapped to constructors: `make("sql-agent-v0")`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::{Map, Value};

use crate::{Env, EnvError, EnvId, Result};

/// A boxed env that can move between threads, as [`make`] returns it.
pub type BoxEnv = Box<dyn Env + Send>;

/// Builds an env from a configuration object (empty for the defaults).
pub type EnvFactory = Arc<dyn Fn(&Map<String, Value>) -> Result<BoxEnv> + Send + Sync>;

/// Rewrites a configuration for the second and later envs of a batch made from it (see
/// [`Registration::replica_config`]).
pub type ReplicaConfig = Arc<dyn Fn(&Map<String, Value>) -> Map<String, Value> + Send + Sync>;

/// One registered env.
#[derive(Clone)]
pub struct Registration {
    /// The versioned id.
    pub id: EnvId,
    /// One line on what the env is.
    pub description: String,
    factory: EnvFactory,
    replica: Option<ReplicaConfig>,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.id)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// Builds an instance.
    pub fn make(&self, config: &Map<String, Value>) -> Result<BoxEnv> {
        (self.factory)(config)
    }

    /// The configuration to make the second and later envs of a batch with, when the first
    /// was made (and so checked) with `config`: the env's own rewrite if it registered one
    /// ([`Registry::set_replica_config`]; e.g. the SQL env leaves its gold queries' check to
    /// each reset), else `config` itself. The rewrite must not change what an episode is,
    /// only what a replica need not do again.
    pub fn replica_config(&self, config: &Map<String, Value>) -> Map<String, Value> {
        match &self.replica {
            Some(rewrite) => rewrite(config),
            None => config.clone(),
        }
    }
}

/// A set of env constructors keyed by versioned id.
///
/// Most programs use the process-wide registry through [`register`] and [`make`]; env crates
/// offer a `register()` function that adds their envs to it.
///
/// ```
/// use sandgym_env_api::{Registry, toy::GuessNumber};
/// let mut registry = Registry::new();
/// registry.register("guess-number-v0", "Guess a number.", |_| Ok(Box::new(GuessNumber::new())))?;
/// let env = registry.make("guess-number", &Default::default())?; // no version: the latest
/// assert_eq!(env.spec().id.to_string(), "guess-number-v0");
/// assert!(registry.make("guess-number-v7", &Default::default()).is_err());
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    entries: BTreeMap<EnvId, Registration>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or re-registers) a constructor under `id` (`name-vN`).
    pub fn register<F>(&mut self, id: &str, description: &str, factory: F) -> Result<()>
    where
        F: Fn(&Map<String, Value>) -> Result<BoxEnv> + Send + Sync + 'static,
    {
        let id: EnvId = id.parse()?;
        self.entries.insert(
            id.clone(),
            Registration {
                id,
                description: description.to_owned(),
                factory: Arc::new(factory),
                replica: None,
            },
        );
        Ok(())
    }

    /// Sets how `id`'s configuration is rewritten for the second and later envs of a batch
    /// (see [`Registration::replica_config`]); `id` must be registered.
    pub fn set_replica_config<F>(&mut self, id: &str, rewrite: F) -> Result<()>
    where
        F: Fn(&Map<String, Value>) -> Map<String, Value> + Send + Sync + 'static,
    {
        let id: EnvId = id.parse()?;
        let available = self.entries.keys().map(ToString::to_string).collect();
        let entry = self.entries.get_mut(&id).ok_or(EnvError::UnknownEnv {
            id: id.to_string(),
            available,
        })?;
        entry.replica = Some(Arc::new(rewrite));
        Ok(())
    }

    /// The registration for `id`; a bare name (`sql-agent`) selects its latest version.
    pub fn get(&self, id: &str) -> Result<&Registration> {
        let found = match id.parse::<EnvId>() {
            Ok(exact) => self.entries.get(&exact),
            Err(_) => self.entries.values().rev().find(|r| r.id.name == id),
        };
        found.ok_or_else(|| EnvError::UnknownEnv {
            id: id.to_owned(),
            available: self.entries.keys().map(ToString::to_string).collect(),
        })
    }

    /// Builds the env registered under `id` with the given configuration.
    pub fn make(&self, id: &str, config: &Map<String, Value>) -> Result<BoxEnv> {
        self.get(id)?.make(config)
    }

    /// All registrations, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &Registration> {
        self.entries.values()
    }
}

fn global() -> &'static RwLock<Registry> {
    static GLOBAL: OnceLock<RwLock<Registry>> = OnceLock::new();
    GLOBAL.get_or_init(Default::default)
}

/// Registers a constructor in the process-wide registry (see [`Registry::register`]).
pub fn register<F>(id: &str, description: &str, factory: F) -> Result<()>
where
    F: Fn(&Map<String, Value>) -> Result<BoxEnv> + Send + Sync + 'static,
{
    global()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .register(id, description, factory)
}

/// Sets a replica configuration rewrite in the process-wide registry (see
/// [`Registry::set_replica_config`]).
pub fn set_replica_config<F>(id: &str, rewrite: F) -> Result<()>
where
    F: Fn(&Map<String, Value>) -> Map<String, Value> + Send + Sync + 'static,
{
    global()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .set_replica_config(id, rewrite)
}

/// Builds an env from the process-wide registry with its default configuration.
pub fn make(id: &str) -> Result<BoxEnv> {
    make_with(id, &Map::new())
}

/// Builds an env from the process-wide registry with a configuration object.
pub fn make_with(id: &str, config: &Map<String, Value>) -> Result<BoxEnv> {
    lookup(id)?.make(config)
}

/// The registration of `id` in the process-wide registry (a bare name selects the latest
/// version).
pub fn lookup(id: &str) -> Result<Registration> {
    global()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(id)
        .cloned()
}

/// A copy of every registration in the process-wide registry, ordered by id.
pub fn registered() -> Vec<Registration> {
    global()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect()
}
