//! [`EnvSource`]: what `--env` names — a registered id, a guest component file or a served
//! env's URL — told apart once, where the command line meets the library.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::env_api::{self, BoxEnv, EnvError};
use crate::{Backend, openenv, sandbox};

/// Where an env comes from.
///
/// ```
/// use sandgym::EnvSource;
/// assert_eq!(EnvSource::from("sql-agent-v0"), EnvSource::Registered("sql-agent-v0".into()));
/// assert!(matches!(EnvSource::from("ws://127.0.0.1:8000"), EnvSource::Remote(_)));
/// assert!(matches!(EnvSource::from("mine.wasm"), EnvSource::Guest(_)));
/// assert_eq!(EnvSource::from("mine.wasm").to_string(), "mine.wasm");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EnvSource {
    /// An id in the process-wide registry (`sql-agent-v0`; the bundled envs are registered).
    Registered(String),
    /// A guest component file (a `.wasm` path, or any existing file), run in the sandbox.
    Guest(PathBuf),
    /// A served env (`ws://host:port`, `http://host:port`, OpenEnv's protocol).
    Remote(String),
}

impl Default for EnvSource {
    fn default() -> Self {
        Self::Registered(String::new())
    }
}

impl From<&str> for EnvSource {
    /// A URL is remote; a `.wasm` path or an existing file is a guest; anything else an id.
    fn from(s: &str) -> Self {
        if openenv::is_remote(s) {
            Self::Remote(s.to_owned())
        } else if s.ends_with(".wasm") || Path::new(s).is_file() {
            Self::Guest(PathBuf::from(s))
        } else {
            Self::Registered(s.to_owned())
        }
    }
}

impl From<String> for EnvSource {
    fn from(s: String) -> Self {
        Self::from(s.as_str())
    }
}

impl From<&String> for EnvSource {
    fn from(s: &String) -> Self {
        Self::from(s.as_str())
    }
}

impl fmt::Display for EnvSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Registered(id) | Self::Remote(id) => f.write_str(id),
            Self::Guest(path) => write!(f, "{}", path.display()),
        }
    }
}

/// As the string `--env` takes (`config.json` keeps its format).
impl Serialize for EnvSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EnvSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(String::deserialize(d)?.into())
    }
}

impl EnvSource {
    /// Whether it is a guest component file.
    pub fn is_guest(&self) -> bool {
        matches!(self, Self::Guest(_))
    }

    /// Whether it is a served env.
    pub fn is_remote(&self) -> bool {
        matches!(self, Self::Remote(_))
    }

    /// The registered id, if it is one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Registered(id) => Some(id),
            _ => None,
        }
    }

    /// Builds one env: a registered id natively or in the shared [`sandbox::Sandbox`], a guest
    /// file in the sandbox, made with `config`, or a session on a served env (configured where
    /// it is served).
    pub fn make(&self, backend: Backend, config: &Map<String, Value>) -> env_api::Result<BoxEnv> {
        let invalid = |reason: String| EnvError::InvalidConfig { reason };
        match self {
            Self::Remote(url) => {
                if !config.is_empty() {
                    return Err(invalid(format!(
                        "{url} is a remote env: configure it where it is served"
                    )));
                }
                let env = openenv::RemoteEnv::connect(url, crate::REMOTE_TIMEOUT)?;
                Ok(Box::new(env))
            }
            Self::Guest(path) => {
                if backend == Backend::Native {
                    return Err(invalid(format!(
                        "{} is a guest component: it runs only in the sandbox",
                        path.display()
                    )));
                }
                let guest = sandbox::Sandbox::shared()?.load_file(path)?;
                Ok(Box::new(guest.instantiate(config)?))
            }
            Self::Registered(id) => match backend {
                Backend::Native => env_api::make_with(id, config),
                Backend::Wasm => {
                    let registration = env_api::lookup(id)?;
                    let guest =
                        crate::bundled_guest(&registration.id.to_string()).ok_or_else(|| {
                            invalid(format!("{} has no WebAssembly build", registration.id))
                        })?;
                    let env = sandbox::Sandbox::shared()?
                        .load(guest.wasm)?
                        .instantiate(config)?;
                    Ok(Box::new(env))
                }
            },
        }
    }
}
