//! The bundled envs, each registered once with everything the CLI knows about it: its native
//! build, its guest component, its scripted baseline, its training preset, the harness it was
//! refactored from and its source (the integration cost). Adding an env to the CLI is one
//! entry here; a user's env needs none (pass its `.wasm` path, see [`crate::EnvTarget`]).

use crate::agents::{Agent, BinarySearch, Demonstration};
use crate::approach::HarnessKind;
use crate::env_api::EnvId;
use crate::trainer::{Algo, TrainConfig};
use crate::training;

/// Everything the CLI knows about one bundled env.
#[derive(Clone, Copy, Debug)]
pub struct Bundled {
    /// Its name: the id without the version (`sql-agent`).
    pub name: &'static str,
    /// The guest crate in `envs/guests` that builds it as a WebAssembly component.
    pub guest: &'static str,
    /// Registers its native build in env-api's process-wide registry.
    pub register: fn(),
    /// Its scripted baseline (the hand-written harness logic), if it has one.
    pub baseline: Option<fn() -> Box<dyn Agent>>,
    /// An agent that plays each task's known solution (for the env made with this
    /// configuration), if the env has them: demonstrations for the SFT warm-start.
    pub demonstrator: Option<Demonstrator>,
    /// Shapes the trainer's defaults for an algorithm to its episodes (for the tiny model).
    pub preset: fn(&mut TrainConfig, Algo),
    /// Shapes them further for a pretrained model, after
    /// [`pretrained_defaults`](training::pretrained_defaults), if the env needs more.
    pub pretrained_preset: Option<fn(&mut TrainConfig, Algo)>,
    /// The env configuration (JSON) that `train` uses with a pretrained model when it is given
    /// none and no `--init`: what the main job trains on, where it differs from the env's
    /// defaults.
    pub train_config: Option<&'static str>,
    /// The harness it was refactored from, for the proxy approach.
    pub harness: Option<HarnessKind>,
    /// Its `Env` implementation's source files (`env.rs`, and the per-episode narrowing that
    /// was written for the env), for the integration cost `compare` reports; empty for an env
    /// without a harness.
    pub source: &'static [&'static str],
}

/// The SQL agent's main-job env configuration ([`Bundled::train_config`]).
pub const SQL_MAIN_JOB_CONFIG: &str = r#"{"curriculum": {"databases": 20, "per_table": 4}}"#;

/// Makes the demonstrator of an env configuration, playing solutions or recoveries.
pub type Demonstrator = fn(
    &serde_json::Map<String, serde_json::Value>,
    Demonstration,
) -> anyhow::Result<Box<dyn Agent>>;

/// The bundled envs.
pub const BUNDLED: &[Bundled] = &[
    Bundled {
        name: "customer-service",
        guest: "customer-service",
        register: sandgym_env_support::SupportEnv::register,
        baseline: Some(|| Box::new(sandgym_env_support::SupportBaseline::default())),
        // The tasks do not depend on the configuration (it sets the reward only).
        demonstrator: Some(|_, kind| match kind {
            Demonstration::Solution => Ok(Box::new(sandgym_env_support::SupportGold::bundled())),
            Demonstration::Recovery => anyhow::bail!(
                "customer-service-v0's demonstrator models no recovery: set sft.recoveries to 0"
            ),
        }),
        preset: training::customer_service_preset,
        pretrained_preset: Some(training::customer_service_pretrained_preset),
        train_config: None,
        harness: Some(HarnessKind::Support),
        source: &[
            include_str!("../envs/customer-service/src/env.rs"),
            include_str!("../envs/customer-service/src/narrowing.rs"),
        ],
    },
    Bundled {
        name: "guess-number",
        guest: "guess-number",
        register: sandgym_env_api::toy::GuessNumber::register,
        baseline: Some(|| Box::new(BinarySearch::default())),
        demonstrator: None,
        preset: training::guess_number_preset,
        pretrained_preset: None,
        train_config: None,
        harness: None,
        source: &[],
    },
    Bundled {
        name: "sql-agent",
        guest: "sql-agent",
        register: sandgym_env_sql::SqlAgentEnv::register,
        baseline: Some(|| Box::new(sandgym_env_sql::SqlBaseline::default())),
        demonstrator: Some(|config, kind| {
            let gold = sandgym_env_sql::SqlGold::from_config(config)?;
            Ok(Box::new(match kind {
                Demonstration::Solution => gold,
                Demonstration::Recovery => gold.recovering(),
            }))
        }),
        preset: training::sql_agent_preset,
        pretrained_preset: Some(training::sql_agent_pretrained_preset),
        // The bundled tasks and a 20-database curriculum (4 questions per table, ~350
        // tasks): measured, it lifts 63 hand-written questions over an unseen database from
        // 0.286 to 0.413 and keeps the bundled test split above 0.80.
        train_config: Some(SQL_MAIN_JOB_CONFIG),
        harness: Some(HarnessKind::Sql),
        source: &[
            include_str!("../envs/sql-agent/src/env.rs"),
            include_str!("../envs/sql-agent/src/pattern.rs"),
        ],
    },
];

/// The bundled env with this id (`sql-agent-v0`) or name (`sql-agent`).
///
/// ```
/// let sql = sandgym::registry::bundled("sql-agent-v0").unwrap();
/// assert_eq!(sql.name, "sql-agent");
/// assert!(sandgym::registry::bundled("sql-agnet-v0").is_none());
/// ```
pub fn bundled(id: &str) -> Option<&'static Bundled> {
    let name = id.parse::<EnvId>().map_or(id.to_owned(), |id| id.name);
    BUNDLED.iter().find(|b| b.name == name)
}

/// The env configuration `train` uses for `env` when it is given none: the env's main-job
/// configuration ([`Bundled::train_config`]) for a fresh run (no `--init`) of a pretrained
/// `model`, else none.
///
/// ```
/// use sandgym::registry::main_job_config;
/// assert!(main_job_config("sql-agent-v0", "smollm2-135m-instruct", false).is_some());
/// assert!(main_job_config("sql-agent-v0", "tiny", false).is_none());
/// assert!(main_job_config("sql-agent-v0", "smollm2-135m-instruct", true).is_none());
/// assert!(main_job_config("guess-number-v0", "smollm2-135m-instruct", false).is_none());
/// ```
pub fn main_job_config(env: &str, model: &str, init: bool) -> Option<&'static str> {
    if init || !crate::training::is_pretrained_model(model) {
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
        let config: serde_json::Value = serde_json::from_str(SQL_MAIN_JOB_CONFIG).unwrap();
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
        }
    }
}
