//! The bundled envs: one line each. Each env crate describes itself with one
//! [`EnvPackage`] (its native build, guest component, scripted baseline, demonstrator, training
//! presets, the harness it was refactored from and its source); this list is the only place the
//! `sandgym` tool looks them up. A user's env needs no entry (pass its `.wasm` path, see
//! [`crate::EnvTarget`]).

use crate::env_api::{Agent, Demonstration, EnvId, EnvPackage};

/// The bundled envs.
pub const BUNDLED: &[&EnvPackage] = &[
    &sandgym_env_support::PACKAGE,
    &sandgym_env_api::toy::PACKAGE,
    &sandgym_env_sql::PACKAGE,
];

/// The bundled env with this id (`sql-agent-v0`) or name (`sql-agent`).
///
/// ```
/// let sql = sandgym::registry::bundled("sql-agent-v0").unwrap();
/// assert_eq!(sql.name, "sql-agent");
/// assert!(sandgym::registry::bundled("sql-agnet-v0").is_none());
/// ```
pub fn bundled(id: &str) -> Option<&'static EnvPackage> {
    let name = id.parse::<EnvId>().map_or(id.to_owned(), |id| id.name);
    BUNDLED.iter().copied().find(|b| b.name == name)
}

/// The scripted baseline of a bundled env, by id or name.
///
/// ```
/// assert!(sandgym::registry::baseline("guess-number-v0").is_some());
/// assert!(sandgym::registry::baseline("my-env-v0").is_none());
/// ```
pub fn baseline(env: &str) -> Option<Box<dyn Agent>> {
    bundled(env)?.baseline.map(|make| make())
}

/// The demonstrator of a bundled env made with `config` (an agent that plays each task's
/// known solution, or its recovery from a mistake), if it has one; an error when it cannot
/// read the configuration or does not model `kind`.
pub fn demonstrator(
    env: &str,
    config: &serde_json::Map<String, serde_json::Value>,
    kind: Demonstration,
) -> crate::env_api::Result<Option<Box<dyn Agent>>> {
    match bundled(env).and_then(|b| b.demonstrator) {
        Some(make) => Ok(Some(make(config, kind)?)),
        None => Ok(None),
    }
}

/// The env configuration `train` uses for `env` when it is given none: the env's main-job
/// configuration ([`EnvPackage::train_config`]) for a fresh run (not `init`) of a
/// `pretrained` model, else none.
///
/// ```
/// use sandgym::registry::main_job_config;
/// assert!(main_job_config("sql-agent-v0", true, false).is_some());
/// assert!(main_job_config("sql-agent-v0", false, false).is_none());
/// assert!(main_job_config("sql-agent-v0", true, true).is_none());
/// assert!(main_job_config("guess-number-v0", true, false).is_none());
/// ```
pub fn main_job_config(env: &str, pretrained: bool, init: bool) -> Option<&'static str> {
    if init || !pretrained {
        return None;
    }
    bundled(env)?.train_config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQL agent's main-job configuration builds: the bundled tasks (their test split the
    /// fixed benchmark) and the curriculum's, all train tasks.
    #[test]
    fn the_sql_main_job_trains_on_the_bundled_tasks_and_a_curriculum() {
        let config: serde_json::Value =
            serde_json::from_str(sandgym_env_sql::MAIN_JOB_CONFIG).unwrap();
        let env = sandgym_env_sql::SqlAgentEnv::from_config(config.as_object().unwrap()).unwrap();
        let bundled = sandgym_env_sql::bundled_tasks();
        let tasks = &env.tasks().tasks;
        assert!(tasks.len() >= bundled.tasks.len() + 200, "{}", tasks.len());
        let test: Vec<_> = tasks
            .iter()
            .filter(|t| t.split == crate::env_api::Split::Test)
            .collect();
        assert_eq!(test.len(), bundled.split(crate::env_api::Split::Test).len());
        assert!(test.iter().all(|t| !t.database.starts_with("cur")));
    }

    #[test]
    fn every_entry_has_its_guest_and_registers_its_native_build() {
        crate::register_builtin_envs();
        for b in BUNDLED {
            assert!(
                sandgym_guest_artifacts::Guest::find(b.guest).is_some(),
                "{}: no guest {}",
                b.name,
                b.guest
            );
            let id = format!("{}-v0", b.name);
            assert!(
                crate::env_api::lookup(&id).is_ok(),
                "{id} is not registered"
            );
            if let Some(source) = b.source.first() {
                assert!(source.contains("impl Env for"), "{}", b.name);
            }
            if let Some(name) = b.harness {
                assert!(
                    name.parse::<crate::harness_runner::HarnessKind>().is_ok(),
                    "{}: no harness {name}",
                    b.name
                );
            }
        }
    }
}
