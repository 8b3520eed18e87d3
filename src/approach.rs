//! The API-boundary approach, run for real: the bundled agents' harnesses talk to the policy
//! server through the recording proxy; their traces become the trainer's episodes.
//!
//! [`ProxyApproach::iteration`] plays one training iteration's tasks and seeds (the same ones
//! the env approach plays, [`iteration_jobs`]) as harness runs, posts each run's reward to the
//! proxy, reads the traces back and learns from them with the same [`Trainer`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use sandgym_harnesses::{ChatClient, Harness, HarnessConfig, Outcome};
use sandgym_proxy::{
    PolicyServer, Proxy, ProxyConfig, ServerConfig, TraceReader, TraceStats, TraceStore,
};
use sandgym_trainer::{
    IterMetrics, RolloutStats, SampleJournal, TrainConfig, Trainer, iteration_jobs,
    rollout_settings,
};
use serde::Serialize;

use crate::env_api::{ResetOptions, Split};
use crate::policy::{ActionLimits, Cpu, PolicyModel, Tokenizer};
use crate::service::EnvTools;
use crate::{Backend, make_env};

/// The code the environment refactor wrote to integrate a bundled env: the non-blank,
/// non-comment lines of its `env.rs` (the `Env` implementation) and of the per-episode
/// narrowing written for it, each up to its unit tests (the tasks, engine and baseline are the
/// harness's own logic, moved). `None` for an env without a harness.
pub fn integration_lines(env: &str) -> Option<usize> {
    let sources = crate::registry::bundled(env)?.source;
    (!sources.is_empty()).then(|| {
        sources
            .iter()
            .flat_map(|s| s.lines().take_while(|l| l.trim() != "#[cfg(test)]"))
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count()
    })
}

/// The `q`-quantile of sorted values (nearest rank; 0 for none).
///
/// ```
/// assert_eq!(sandgym::approach::percentile(&[1, 2, 3, 4, 100], 0.5), 3);
/// assert_eq!(sandgym::approach::percentile(&[], 0.99), 0);
/// ```
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

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
    /// use sandgym::approach::HarnessKind;
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

/// One harness run as the approach saw it.
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
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    /// Completion tokens the server reported to the harnesses.
    pub completion_tokens: u64,
    /// Env steps behind tool calls.
    pub env_steps: usize,
}

impl HarnessTotals {
    fn add(&mut self, run: &HarnessRun) {
        self.runs += 1;
        self.env_steps += run.env_steps;
        match &run.outcome {
            Ok(o) => {
                self.model_calls += o.model_calls;
                self.sub_agent_calls += o.sub_agent_calls;
                self.compressions += o.compressions;
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
        self.completion_tokens += other.completion_tokens;
        self.env_steps += other.env_steps;
    }
}

/// One iteration of the proxy approach.
#[derive(Clone, Debug, Serialize)]
pub struct ProxyIteration {
    /// The trainer's metrics of the iteration.
    pub metrics: IterMetrics,
    /// The harness side.
    pub harness: HarnessTotals,
    /// What the traces held.
    pub traces: TraceStats,
    /// Seconds the harness runs took.
    pub rollout_s: f64,
}

/// The policy server, the recording proxy and the harness of one env, ready to play
/// iterations for a [`Trainer`].
#[derive(Debug)]
pub struct ProxyApproach {
    env: String,
    kind: HarnessKind,
    server: PolicyServer,
    proxy: Proxy,
    db: PathBuf,
    reader: TraceReader,
    harness: HarnessConfig,
    concurrency: usize,
    options: ResetOptions,
}

/// Settings of the proxy approach.
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// Harness runs at a time.
    pub concurrency: usize,
    /// The harness's loop settings (the base URL is set per run).
    pub harness: HarnessConfig,
    /// Size limits of generated actions (as in the env approach).
    pub limits: ActionLimits,
    /// Most prompt tokens the server accepts.
    pub max_context: usize,
}

impl ProxySettings {
    /// Settings matching a training configuration: the same action limits, temperature and
    /// token budget per call; the harness's history budget follows the model's context
    /// (about two characters per token of the bundled tokenizer), so it compresses before the
    /// server would refuse the prompt.
    pub fn for_config(config: &TrainConfig, concurrency: usize) -> Self {
        let mut harness = HarnessConfig::new("http://unset/v1");
        harness.temperature = config.rollout.temperature;
        harness.max_tokens = config.rollout.max_new_tokens as u32;
        harness.max_turns = (config.rollout.max_turns as usize).max(4);
        harness.history_chars = config.rollout.max_context * 2;
        Self {
            concurrency,
            harness,
            limits: rollout_settings(config).limits,
            max_context: config.rollout.max_context * 2,
        }
    }
}

impl ProxyApproach {
    /// Starts the server on `model` and the proxy recording into `db`.
    pub fn start(
        env: &str,
        model: PolicyModel<Cpu>,
        tokenizer: Tokenizer,
        db: &Path,
        settings: ProxySettings,
    ) -> anyhow::Result<Self> {
        let kind = HarnessKind::for_env(env)
            .with_context(|| format!("{env} has no harness (sql-agent and customer-service do)"))?;
        let server = PolicyServer::start(
            model,
            tokenizer.clone(),
            ServerConfig {
                limits: settings.limits,
                max_context: settings.max_context,
                max_batch: settings.concurrency.max(1),
                // What the server sampled, to check what reaches training against.
                journal: true,
                ..ServerConfig::default()
            },
        )?;
        let proxy = Proxy::start(&ProxyConfig::new(server.url()), db)?;
        Ok(Self {
            env: env.to_owned(),
            kind,
            server,
            proxy,
            db: db.to_owned(),
            reader: TraceReader::new(tokenizer, settings.limits),
            harness: settings.harness,
            concurrency: settings.concurrency.max(1),
            options: ResetOptions::split(Split::Train),
        })
    }

    /// The policy server.
    pub fn server(&self) -> &PolicyServer {
        &self.server
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
                        let run = self.play_one(&format!("{prefix}-{i}"), group, seed);
                        runs.lock().expect("runs lock").push((i, run));
                    }
                });
            }
        });
        let mut runs = runs.into_inner().expect("runs lock");
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
        let started = make_env(&self.env, Backend::Wasm, &Default::default())
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
        let body = serde_json::json!({"reward": run.reward, "info": {"success": run.success}});
        let url = format!("http://{}/rollouts/{rollout}/reward", self.proxy.addr());
        let posted = ureq::post(&url)
            .header("content-type", "application/json")
            .send(body.to_string());
        if let Err(e) = posted {
            run.outcome = Err(format!("posting the reward failed: {e}"));
        }
        run
    }

    /// One training iteration of `trainer` played by the harnesses.
    pub fn iteration<B: AutodiffBackend<InnerBackend = Cpu>>(
        &mut self,
        trainer: &mut Trainer<B>,
    ) -> anyhow::Result<ProxyIteration> {
        let iter = trainer.iteration() + 1;
        let jobs = iteration_jobs(trainer.config(), iter, 0);
        let clock = Instant::now();
        let tokens_before = self.server.generated_tokens();
        let runs = self.play(&format!("it{iter}"), &jobs);
        let rollout_s = clock.elapsed().as_secs_f64();
        let mut harness = HarnessTotals::default();
        runs.iter().for_each(|r| harness.add(r));
        let ids: Vec<(String, usize, u64)> = runs
            .iter()
            .map(|r| (r.rollout.clone(), r.group, r.seed))
            .collect();
        let store = TraceStore::open(&self.db)?;
        let (per_run, traces) = self.reader.read(&store, &ids)?;
        let played: Vec<_> = per_run
            .iter()
            .filter_map(|eps| eps.last().cloned())
            .collect();
        let episodes: Vec<_> = per_run.into_iter().flatten().collect();
        // Model calls and env steps interleave inside the harness runs: both rates are per
        // second of the whole playing time.
        let mut journal = SampleJournal::default();
        for served in self.server.take_journal() {
            journal.record(&served.completion);
        }
        let stats = RolloutStats {
            generated_tokens: (self.server.generated_tokens() - tokens_before) as usize,
            generate_time: clock.elapsed(),
            env_steps: harness.env_steps,
            env_time: clock.elapsed(),
            journal,
        };
        let metrics = trainer.learn_from(episodes, played, &stats, rollout_s)?;
        self.server.set_model(trainer.inference_model());
        Ok(ProxyIteration {
            metrics,
            harness,
            traces,
            rollout_s,
        })
    }
}
