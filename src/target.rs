//! What `--env` and `--env-config` name: a registered env or a user's guest component, and the
//! configuration object it is made with. Every command that makes envs (`run`, `eval`, `sft`,
//! `train`, `check`, `compare`) goes through [`EnvTarget`], so a user's own env (a `.wasm`
//! built from a crate of theirs) or the SQL env over their own database is run, evaluated and
//! trained the same way as a bundled one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::env_api::{self, BoxEnv, EnvError, EnvSpec};
use crate::{Backend, EnvSource, make_env};

/// An env and its configuration.
///
/// ```
/// use sandgym::{Backend, EnvTarget};
/// let target = EnvTarget::parse("guess-number-v0", Some(r#"{"max": 8}"#))?;
/// let env = target.make(Backend::Native)?;
/// assert_eq!(env.spec().tools[0].parameters.properties["number"].maximum, Some(8.0));
/// assert_eq!(target.name()?, "guess-number");
/// # Ok::<(), sandgym::env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EnvTarget {
    /// The env: a registered id, a guest component file or a served env.
    pub env: EnvSource,
    /// The configuration object the env is made with (empty: its defaults).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
    /// A reward composed around the env's own (`--reward`), if any: every env made from
    /// the target is wrapped in [`Reward`](env_api::Reward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<env_api::RewardSpec>,
    /// Servers of the env (`--env-hosts`, OpenEnv's protocol): the envs made from the target
    /// are sessions on them in turn, so a batch spreads over them. Empty: `env` alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(skip)]
    spec: OnceLock<EnvSpec>,
    /// Which host the next env is made on.
    #[serde(skip)]
    next_host: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl EnvTarget {
    /// A registered env or a guest file with its default configuration.
    pub fn new(env: impl Into<EnvSource>) -> Self {
        Self {
            env: env.into(),
            ..Self::default()
        }
    }

    /// A target with an explicit configuration object.
    pub fn with_config(env: impl Into<EnvSource>, config: Map<String, Value>) -> Self {
        Self {
            env: env.into(),
            config,
            ..Self::default()
        }
    }

    /// The same target with its reward composed as `reward` says (checked now: an invalid
    /// design is an error before any env is made).
    pub fn with_reward(mut self, reward: Option<env_api::RewardSpec>) -> env_api::Result<Self> {
        if let Some(spec) = &reward {
            spec.check()?;
        }
        self.reward = reward;
        self.spec = OnceLock::new();
        Ok(self)
    }

    /// The same target served by `hosts` (URLs of OpenEnv servers, e.g. `sandgym
    /// serve-env` on other machines): envs are made on them in turn. `env` is then the id
    /// they serve (each is checked to serve it when its first session opens) or one of the
    /// URLs, which joins the rotation first.
    pub fn with_hosts(mut self, hosts: Vec<String>) -> env_api::Result<Self> {
        if hosts.is_empty() {
            return Ok(self);
        }
        let invalid = |reason: String| EnvError::InvalidConfig { reason };
        if let Some(bad) = hosts.iter().find(|h| !crate::openenv::is_remote(h)) {
            return Err(invalid(format!(
                "--env-hosts: {bad} is not a served env's URL (ws://HOST:PORT or http://HOST:PORT)"
            )));
        }
        if !self.config.is_empty() {
            return Err(invalid(
                "--env-hosts: served envs are configured where they are served, not with --env-config"
                    .into(),
            ));
        }
        if self.is_file() {
            return Err(invalid(format!(
                "--env-hosts: {} is a guest file; give the id the hosts serve",
                self.env
            )));
        }
        let mut all = Vec::new();
        if let EnvSource::Remote(url) = &self.env {
            all.push(url.clone());
        }
        all.extend(hosts);
        self.hosts = all;
        self.spec = OnceLock::new();
        Ok(self)
    }

    /// The target `--env ENV --env-config CONFIG` name. `CONFIG` is a JSON object written
    /// inline (`{"max": 8}`) or the path of a file holding one. A string value of the form
    /// `"@PATH"` anywhere in it is replaced by the contents of that file (relative to the
    /// config file's folder; `"@@…"` stands for a literal leading `@`), so
    /// `{"tasks_jsonl": "@tasks.jsonl", "databases": {"music": "@music.sql"}}` gives the SQL
    /// env a task file and a database dump.
    pub fn parse(env: &str, config: Option<&str>) -> env_api::Result<Self> {
        let Some(config) = config else {
            return Ok(Self::new(env));
        };
        let invalid = |reason: String| EnvError::InvalidConfig { reason };
        let (text, base) = if config.trim_start().starts_with(['{', '[']) {
            (config.to_owned(), PathBuf::from("."))
        } else {
            let path = Path::new(config);
            let text = std::fs::read_to_string(path)
                .map_err(|e| invalid(format!("cannot read --env-config {config}: {e}")))?;
            let base = path.parent().unwrap_or(Path::new(".")).to_owned();
            (text, base)
        };
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| invalid(format!("--env-config is not JSON: {e}")))?;
        let Value::Object(map) = expand_files(value, &base)? else {
            return Err(invalid("--env-config must be a JSON object".into()));
        };
        Ok(Self::with_config(env, map))
    }

    /// Whether the target is a guest file rather than a registered id.
    pub fn is_file(&self) -> bool {
        self.env.is_guest()
    }

    /// One env, natively or sandboxed (a guest file runs only sandboxed), with the target's
    /// reward if it has one.
    pub fn make(&self, backend: Backend) -> env_api::Result<BoxEnv> {
        let env = match self.hosts.as_slice() {
            [] => make_env(self.env.clone(), backend, &self.config)?,
            hosts => {
                use std::sync::atomic::Ordering;
                let host = &hosts[self.next_host.fetch_add(1, Ordering::Relaxed) % hosts.len()];
                let env = make_env(host, backend, &self.config)?;
                let served = env.spec().id.to_string();
                if !self.env.is_remote() && self.env.id() != Some(served.as_str()) {
                    return Err(EnvError::InvalidConfig {
                        reason: format!("--env-hosts: {host} serves {served}, not {}", self.env),
                    });
                }
                env
            }
        };
        match &self.reward {
            None => Ok(env),
            Some(spec) => Ok(Box::new(env_api::Reward::with_loader(
                env,
                spec,
                &crate::reward_plugins::Plugins,
            )?)),
        }
    }

    /// One env the fastest way it runs: natively, or sandboxed for a guest file.
    pub fn make_fastest(&self) -> env_api::Result<BoxEnv> {
        self.make(if self.is_file() {
            Backend::Wasm
        } else {
            Backend::Native
        })
    }

    /// `n` fresh envs, made on as many threads as there are cores: each one is configured
    /// on its own (a guest instance loads its database into its own memory), and on a
    /// real-size database that is a few tenths of a second per env — 20 s for an evaluation's
    /// 63 sandboxed envs one after another. A registered env that rewrites its configuration
    /// for replicas ([`env_api::Registration::replica_config`]) has its first env made with
    /// the configuration as given (which checks it) and the others, at the same time, with
    /// the rewrite. The first failure is returned (the first env's before any replica's).
    pub fn batch(&self, backend: Backend, n: usize) -> env_api::Result<Vec<BoxEnv>> {
        let replicas = match (&self.env, self.hosts.is_empty()) {
            (EnvSource::Registered(id), true) if n > 1 => {
                crate::register_builtin_envs();
                let config = env_api::lookup(id)?.replica_config(&self.config);
                Self {
                    config,
                    ..self.clone()
                }
            }
            _ => self.clone(),
        };
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, n.max(1));
        let per = n.div_ceil(workers);
        let replicas = &replicas;
        let made: Vec<env_api::Result<Vec<BoxEnv>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let count = per.min(n.saturating_sub(w * per));
                    scope.spawn(move || {
                        (0..count)
                            .map(|i| {
                                let target = if w == 0 && i == 0 { self } else { replicas };
                                target.make(backend)
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut envs = Vec::with_capacity(n);
        for part in made {
            envs.extend(part?);
        }
        Ok(envs)
    }

    /// The env's spec (made once, the fastest way, then remembered).
    pub fn spec(&self) -> env_api::Result<&EnvSpec> {
        if let Some(spec) = self.spec.get() {
            return Ok(spec);
        }
        let spec = self.make_fastest()?.spec().clone();
        Ok(self.spec.get_or_init(|| spec))
    }

    /// The env's id as its spec gives it (`sql-agent-v0`).
    pub fn id(&self) -> env_api::Result<String> {
        Ok(self.spec()?.id.to_string())
    }

    /// The env's name without its version (`sql-agent`): what presets, baselines and
    /// harnesses are found by.
    pub fn name(&self) -> env_api::Result<String> {
        Ok(self.spec()?.id.name.clone())
    }

    /// A short label for run directories: the id, a guest file's stem, or a remote env's id
    /// as its server gives it.
    pub fn label(&self) -> String {
        if self.env.is_remote() || !self.hosts.is_empty() {
            return self.id().unwrap_or_else(|_| "remote".into());
        }
        match &self.env {
            EnvSource::Guest(path) => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "env".into()),
            other => other.to_string(),
        }
    }
}

/// The reward design `--reward SPEC` names: a JSON list of terms or an object with terms and a
/// clip range ([`RewardSpec`](env_api::RewardSpec)), inline or in a file; or a reward plugin
/// alone (`PATH.wasm`, or a bundled plugin's name such as `rubric`), which then is the whole
/// reward. Plugin terms get the SHA-256 of their component recorded (see
/// [`reward_plugins::pin`](crate::reward_plugins::pin)); relative plugin paths in a spec file
/// are relative to that file.
pub fn parse_reward(spec: Option<&str>) -> env_api::Result<Option<env_api::RewardSpec>> {
    let Some(spec) = spec else { return Ok(None) };
    let invalid = |reason: String| EnvError::InvalidConfig { reason };
    let plugin_alone = spec.ends_with(".wasm")
        || sandgym_guest_artifacts::REWARDS
            .iter()
            .any(|g| g.name == spec && !Path::new(spec).exists());
    let (text, base) = if plugin_alone {
        let term = serde_json::json!([{"term": "plugin", "path": spec}]);
        (term.to_string(), PathBuf::from("."))
    } else if spec.trim_start().starts_with(['{', '[']) {
        (spec.to_owned(), PathBuf::from("."))
    } else {
        let text = std::fs::read_to_string(spec)
            .map_err(|e| invalid(format!("cannot read --reward {spec}: {e}")))?;
        let base = Path::new(spec)
            .parent()
            .unwrap_or(Path::new("."))
            .to_owned();
        (text, base)
    };
    let mut parsed: env_api::RewardSpec =
        serde_json::from_str(&text).map_err(|e| invalid(format!("--reward: {e}")))?;
    crate::reward_plugins::pin(&mut parsed, &base)?;
    Ok(Some(parsed))
}

/// Replaces every `"@PATH"` string in `value` by the contents of the file (relative to `base`).
fn expand_files(value: Value, base: &Path) -> env_api::Result<Value> {
    Ok(match value {
        Value::String(s) if s.starts_with("@@") => Value::String(s[1..].to_owned()),
        Value::String(s) if s.starts_with('@') => {
            let path = base.join(&s[1..]);
            Value::String(
                std::fs::read_to_string(&path).map_err(|e| EnvError::InvalidConfig {
                    reason: format!("--env-config names {}: {e}", path.display()),
                })?,
            )
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| expand_files(v, base))
                .collect::<env_api::Result<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| Ok((k, expand_files(v, base)?)))
                .collect::<env_api::Result<_>>()?,
        ),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_and_at_paths_expand() {
        let dir = std::env::temp_dir().join(format!("sandgym-target-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("data/tasks.jsonl"), "line\n").unwrap();
        let file = dir.join("env.json");
        std::fs::write(
            &file,
            r#"{"tasks": "@data/tasks.jsonl", "nested": [{"x": "@@literal"}], "n": 3}"#,
        )
        .unwrap();
        let target = EnvTarget::parse("x.wasm", Some(file.to_str().unwrap())).unwrap();
        assert_eq!(target.config["tasks"], "line\n");
        assert_eq!(target.config["nested"][0]["x"], "@literal");
        assert_eq!(target.config["n"], 3);
        assert!(target.is_file());
        assert_eq!(target.label(), "x");

        for (bad, needle) in [
            ("[1]", "must be a JSON object"),
            ("{nope", "not JSON"),
            (r#"{"a": "@missing.sql"}"#, "missing.sql"),
            ("no-such-file.json", "cannot read"),
        ] {
            let err = EnvTarget::parse("x.wasm", Some(bad)).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_batch_is_made_on_several_threads_with_every_env_its_own() {
        let target = EnvTarget::parse("sql-agent-v0", None).unwrap();
        for n in [1, 2, 5] {
            let mut envs = target.batch(Backend::Native, n).unwrap();
            assert_eq!(envs.len(), n);
            // Each env plays its own episode: resetting one leaves the others where they were.
            let options = env_api::ResetOptions::split(env_api::Split::Test);
            let first = envs[0].reset(0, &options).unwrap().content;
            for env in envs.iter_mut().skip(1) {
                assert_ne!(env.reset(1, &options).unwrap().content, first);
            }
            assert_eq!(envs[0].observe().content, first);
        }
        // A configuration no env accepts fails the whole batch, with the env's own reason.
        let bad = EnvTarget::parse("sql-agent-v0", Some(r#"{"tasks_jsonl": "{nope"}"#)).unwrap();
        let err = match bad.batch(Backend::Native, 4) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a bad configuration made envs"),
        };
        assert!(err.contains("task file line 1"), "{err}");
    }

    #[test]
    fn a_batch_makes_its_first_env_as_configured_and_the_rest_as_replicas() {
        use std::sync::Mutex;
        static MADE: Mutex<Vec<Map<String, Value>>> = Mutex::new(Vec::new());
        let id = "replica-probe-v0";
        env_api::register(
            id,
            "Records the configurations it is made with.",
            |config| {
                MADE.lock().unwrap().push(config.clone());
                Ok(Box::new(env_api::toy::GuessNumber::new()))
            },
        )
        .unwrap();
        env_api::set_replica_config(id, |config| {
            let mut replica = config.clone();
            replica.insert("replica".into(), Value::Bool(true));
            replica
        })
        .unwrap();
        let target = EnvTarget::parse(id, Some(r#"{"n": 1}"#)).unwrap();
        let envs = target.batch(Backend::Native, 5).unwrap();
        assert_eq!(envs.len(), 5);
        // The envs are made on several threads at once, so in no set order.
        let made = std::mem::take(&mut *MADE.lock().unwrap());
        assert_eq!(made.len(), 5);
        let (first, replicas): (Vec<_>, Vec<_>) =
            made.into_iter().partition(|c| *c == target.config);
        assert_eq!(first.len(), 1, "one env checks the configuration");
        for replica in &replicas {
            assert_eq!(replica["replica"], true);
            assert_eq!(replica["n"], 1);
        }
        // One env is the configuration itself.
        target.batch(Backend::Native, 1).unwrap();
        assert_eq!(*MADE.lock().unwrap(), vec![target.config.clone()]);
        // Setting a rewrite for an id nobody registered is an error naming it.
        let err = env_api::set_replica_config("nobody-v0", Map::clone).unwrap_err();
        assert!(err.to_string().contains("nobody-v0"), "{err}");
    }

    #[test]
    fn a_sql_batch_over_a_task_file_checks_its_gold_queries_once_and_fails_on_a_bad_one() {
        let good = r#"{"tasks_jsonl": "{\"id\": \"ok\", \"database\": \"shop\", \"question\": \"How many products?\", \"gold_sql\": \"SELECT COUNT(*) FROM products\"}"}"#;
        let target = EnvTarget::parse("sql-agent-v0", Some(good)).unwrap();
        assert_eq!(target.batch(Backend::Native, 3).unwrap().len(), 3);
        let bad = good.replace("COUNT(*) FROM products", "nope FROM products");
        let target = EnvTarget::parse("sql-agent-v0", Some(&bad)).unwrap();
        let err = match target.batch(Backend::Native, 3) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a failing gold query made a batch"),
        };
        assert!(err.contains("task `ok`: the gold query fails"), "{err}");
    }
}
