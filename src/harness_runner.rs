//! Harness runs through the recording proxy, whatever answers behind it: the policy server
//! (the proxy approach's rollouts, and evaluation inside the harness) or the demonstrator
//! served as a teacher (the proxy approach's SFT data, [`crate::teacher`]).
//!
//! Each run starts an episode of the env in the sandbox, gives its opening to the unmodified
//! harness whose base URL is the proxy's URL for the run, and posts the run's reward to the
//! proxy when the harness returns.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use sandgym_harnesses::{ChatClient, Harness, HarnessConfig, Outcome};
use sandgym_proxy::{Proxy, ProxyConfig};
use serde::Serialize;

use crate::env_api::ResetOptions;
use crate::service::EnvTools;
use crate::{Backend, make_env};

/// Which harness plays an env.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HarnessKind {
    /// [`Harness::sql`] for `sql-agent`.
    Sql,
    /// [`Harness::support`] for `customer-service`.
    Support,
}

impl std::str::FromStr for HarnessKind {
    type Err = String;

    /// A harness by the name an env package gives it
    /// ([`EnvPackage::harness`](crate::env_api::EnvPackage::harness)).
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "sql" => Ok(Self::Sql),
            "support" => Ok(Self::Support),
            _ => Err(format!("no harness named `{name}` (sql, support)")),
        }
    }
}

impl HarnessKind {
    /// The harness of a bundled env id (see [`crate::registry`]).
    ///
    /// ```
    /// use sandgym::harness_runner::HarnessKind;
    /// assert_eq!(HarnessKind::for_env("sql-agent-v0"), Some(HarnessKind::Sql));
    /// assert_eq!(HarnessKind::for_env("guess-number-v0"), None);
    /// ```
    pub fn for_env(env: &str) -> Option<Self> {
        crate::registry::bundled(env)?.harness?.parse().ok()
    }

    /// Runs the harness on `tools` from `opening`.
    pub fn run(
        self,
        config: HarnessConfig,
        client: &ChatClient,
        tools: &mut EnvTools,
        opening: &str,
    ) -> sandgym_harnesses::Result<Outcome> {
        match self {
            Self::Sql => Harness::sql(config).run(client, tools, opening),
            Self::Support => Harness::support(config).run(client, tools, opening),
        }
    }
}

/// One harness run as the runner saw it.
#[derive(Clone, Debug)]
pub struct HarnessRun {
    /// Its rollout id at the proxy.
    pub rollout: String,
    /// Its group (task) within the iteration.
    pub group: usize,
    /// The env seed.
    pub seed: u64,
    /// What the harness reported (model calls, compressions, sub-agent calls), or its error.
    pub outcome: Result<Outcome, String>,
    /// The reward posted.
    pub reward: f64,
    /// Whether the task was solved.
    pub success: bool,
    /// Env steps behind the harness's tool calls.
    pub env_steps: usize,
}

/// Totals of the harness side over an iteration or a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct HarnessTotals {
    /// Harness runs.
    pub runs: usize,
    /// Runs that failed (HTTP or tool-service error).
    pub failed: usize,
    /// Model calls the harnesses made.
    pub model_calls: usize,
    /// Of which by sub-agents.
    pub sub_agent_calls: usize,
    /// History compressions.
    pub compressions: usize,
    /// Prompt tokens the server reported to the harnesses.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens the server reported to the harnesses.
    pub completion_tokens: u64,
    /// Env steps behind tool calls.
    pub env_steps: usize,
}

impl HarnessTotals {
    /// The totals of `runs`.
    pub fn of(runs: &[HarnessRun]) -> Self {
        let mut t = Self::default();
        runs.iter().for_each(|r| t.add(r));
        t
    }

    fn add(&mut self, run: &HarnessRun) {
        self.runs += 1;
        self.env_steps += run.env_steps;
        match &run.outcome {
            Ok(o) => {
                self.model_calls += o.model_calls;
                self.sub_agent_calls += o.sub_agent_calls;
                self.compressions += o.compressions;
                self.prompt_tokens += o.prompt_tokens;
                self.completion_tokens += o.completion_tokens;
            }
            Err(_) => self.failed += 1,
        }
    }

    /// Accumulates `other`.
    pub fn merge(&mut self, other: &HarnessTotals) {
        self.runs += other.runs;
        self.failed += other.failed;
        self.model_calls += other.model_calls;
        self.sub_agent_calls += other.sub_agent_calls;
        self.compressions += other.compressions;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.env_steps += other.env_steps;
    }
}

/// The harness of one env, playing through a recording proxy in front of `upstream`.
#[derive(Debug)]
pub struct HarnessRunner {
    env: String,
    kind: HarnessKind,
    proxy: Proxy,
    db: PathBuf,
    harness: HarnessConfig,
    concurrency: usize,
    options: ResetOptions,
}

impl HarnessRunner {
    /// A runner of `env`'s harness (its episodes reset with `options`) whose calls go through
    /// a proxy, recording into `db`, to the chat API at `upstream` (a base URL without
    /// `/v1`); `concurrency` runs at a time.
    pub fn start(
        env: &str,
        upstream: &str,
        db: &Path,
        harness: HarnessConfig,
        concurrency: usize,
        options: ResetOptions,
    ) -> anyhow::Result<Self> {
        let kind = HarnessKind::for_env(env)
            .with_context(|| format!("{env} has no harness (sql-agent and customer-service do)"))?;
        let proxy = Proxy::start(&ProxyConfig::new(upstream), db)?;
        Ok(Self {
            env: env.to_owned(),
            kind,
            proxy,
            db: db.to_owned(),
            harness,
            concurrency: concurrency.max(1),
            options,
        })
    }

    /// The recording proxy.
    pub fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// The trace database.
    pub fn db(&self) -> &Path {
        &self.db
    }

    /// Plays `jobs` (`(group, seed)`) as harness runs through the proxy, tagged
    /// `{prefix}-{index}`, and posts each run's reward.
    pub fn play(&self, prefix: &str, jobs: &[(usize, u64)]) -> Vec<HarnessRun> {
        let next = AtomicUsize::new(0);
        let runs = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..self.concurrency.min(jobs.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(group, seed)) = jobs.get(i) else {
                            break;
                        };
                        let run = self.play_one(&rollout_id(prefix, i), group, seed);
                        runs.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((i, run));
                    }
                });
            }
        });
        let mut runs = runs
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.sort_by_key(|(i, _)| *i);
        runs.into_iter().map(|(_, r)| r).collect()
    }

    fn play_one(&self, rollout: &str, group: usize, seed: u64) -> HarnessRun {
        let mut run = HarnessRun {
            rollout: rollout.to_owned(),
            group,
            seed,
            outcome: Err(String::new()),
            reward: 0.0,
            success: false,
            env_steps: 0,
        };
        // The harness's tools run model-written input (SQL, addresses) through the env: in
        // the sandbox, so a tool that loops or panics ends this run with an error (counted),
        // not the process.
        let started = make_env(self.env.as_str(), Backend::Wasm, &Default::default())
            .and_then(|env| EnvTools::start(env, seed, &self.options));
        let (mut tools, opening) = match started {
            Ok(s) => s,
            Err(e) => {
                run.outcome = Err(e.to_string());
                return run;
            }
        };
        let mut config = self.harness.clone();
        config.base_url = self.proxy.base_url(rollout);
        let client = ChatClient::new(&config);
        run.outcome = self
            .kind
            .run(config, &client, &mut tools, &opening)
            .map_err(|e| e.to_string());
        run.reward = tools.reward();
        run.success = tools.success();
        run.env_steps = tools.steps();
        // A failed run's reward names its error: the trainer then treats its episodes as it
        // treats env failures (left out by default), instead of as an ordinary failure.
        let mut info = serde_json::json!({"success": run.success});
        if let Err(e) = &run.outcome {
            info["error"] = e.clone().into();
        }
        let body = serde_json::json!({"reward": run.reward, "info": info});
        let url = format!("http://{}/rollouts/{rollout}/reward", self.proxy.addr());
        let posted = ureq::post(&url)
            .header("content-type", "application/json")
            .send(body.to_string());
        if let Err(e) = posted
            && run.outcome.is_ok()
        {
            // A run whose harness made no model call has nothing recorded to reward (404):
            // its error says so already.
            run.outcome = Err(format!("posting the reward failed: {e}"));
        }
        run
    }
}

/// The `(rollout, group, seed)` of each run, as [`TraceReader::read`] takes them.
///
/// [`TraceReader::read`]: sandgym_proxy::TraceReader::read
pub fn trace_ids(runs: &[HarnessRun]) -> Vec<(String, usize, u64)> {
    runs.iter()
        .map(|r| (r.rollout.clone(), r.group, r.seed))
        .collect()
}

/// The rollout id of job `index` of a [`HarnessRunner::play`] tagged `prefix`.
///
/// ```
/// assert_eq!(sandgym::harness_runner::rollout_id("it3", 7), "it3-7");
/// ```
pub fn rollout_id(prefix: &str, index: usize) -> String {
    format!("{prefix}-{index}")
}

#[cfg(test)]
mod tests {
    use sandgym_policy::ActionLimits;
    use sandgym_proxy::{TraceReader, TraceStore};

    use super::*;
    use crate::teacher::Teacher;

    fn runner(upstream: &str, db: &Path) -> HarnessRunner {
        HarnessRunner::start(
            "customer-service-v0",
            upstream,
            db,
            HarnessConfig::new("http://unset/v1"),
            1,
            ResetOptions::default(),
        )
        .unwrap()
    }

    /// A run that fails mid-run posts its error with its reward, and reading the traces marks
    /// it failed; a run whose reward never reaches the proxy is counted unrewarded. Neither
    /// gives an ordinary episode to train on.
    #[test]
    fn failed_and_unrewarded_runs_are_counted_not_trained_as_ordinary_episodes() {
        let dir = std::env::temp_dir().join(format!("sandgym-runner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tokenizer = crate::training::default_tokenizer().unwrap();
        let mut reader = TraceReader::new(tokenizer.clone(), ActionLimits::default());
        // A teacher that was assigned no rollout answers the harness's first call with a 404:
        // the call is recorded, the harness fails, the reward says why.
        let teacher = Teacher::start(tokenizer, ActionLimits::default()).unwrap();
        let db = dir.join("failed.db");
        let runs = runner(&teacher.url(), &db).play("t", &[(0, 3)]);
        let error = runs[0].outcome.clone().unwrap_err();
        let store = TraceStore::open(&db).unwrap();
        assert_eq!(store.calls("t-0").unwrap().len(), 1);
        let reward = store.reward("t-0").unwrap().expect("a posted reward");
        assert_eq!(reward.info["error"], error.as_str());
        let (episodes, stats) = reader.read(&store, &trace_ids(&runs)).unwrap();
        assert_eq!((stats.failed, stats.unrewarded), (1, 0), "{stats:?}");
        assert!(
            episodes[0].is_empty(),
            "its one call was refused: nothing to learn from"
        );
        assert_eq!(HarnessTotals::of(&runs).failed, 1);
        // A dead upstream: nothing answered, nothing recorded, no reward to post.
        let db = dir.join("dead.db");
        let runs = runner("http://127.0.0.1:9", &db).play("d", &[(0, 3)]);
        assert!(runs[0].outcome.is_err());
        let store = TraceStore::open(&db).unwrap();
        let (episodes, stats) = reader.read(&store, &trace_ids(&runs)).unwrap();
        assert_eq!((stats.failed, stats.unrewarded), (0, 1), "{stats:?}");
        assert!(episodes[0].is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
