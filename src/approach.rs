//! The API-boundary approach, run for real: the bundled agents' harnesses talk to the policy
//! server through the recording proxy; their traces become the trainer's episodes.
//!
//! [`ProxyApproach::iteration`] plays one training iteration's tasks and seeds (the same ones
//! the env approach plays, [`iteration_jobs`]) as harness runs, posts each run's reward to the
//! proxy, reads the traces back and learns from them with the same [`Trainer`].

use std::path::Path;
use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use sandgym_harnesses::HarnessConfig;
use sandgym_proxy::{
    PolicyServer, Proxy, Samples, ServerConfig, TraceReader, TraceStats, TraceStore, stitch,
};
use sandgym_trainer::{
    IterMetrics, RolloutStats, SampleJournal, TrainConfig, Trainer, iteration_jobs,
    rollout_settings,
};
use serde::Serialize;

use crate::env_api::{ResetOptions, Split};
use crate::harness_runner::{HarnessRun, HarnessRunner, HarnessTotals, trace_ids};
use crate::policy::{ActionLimits, Cpu, PolicyModel, Tokenizer};

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

/// One iteration of the proxy approach.
#[derive(Clone, Debug, Serialize)]
pub struct ProxyIteration {
    /// The trainer's metrics of the iteration.
    pub metrics: IterMetrics,
    /// The harness side.
    pub harness: HarnessTotals,
    /// What the traces held.
    pub traces: TraceStats,
    /// Turns trained behind a context they were not sampled in (stitched samples only).
    pub moved_turns: usize,
    /// Tokens of the longest sample trained (what one pass of the update holds).
    pub longest_sample: usize,
    /// Seconds the harness runs took.
    pub rollout_s: f64,
}

/// The policy server, the recording proxy and the harness of one env, ready to play
/// iterations for a [`Trainer`].
#[derive(Debug)]
pub struct ProxyApproach {
    server: PolicyServer,
    runner: HarnessRunner,
    reader: TraceReader,
    samples: Samples,
    /// Longest stitched sample, in tokens: the server's prompt limit (or the model's context,
    /// if shorter), so a stitched trajectory is never longer than the longest context one
    /// call could have had and a pass of the update holds no more than a per-segment one
    /// does. (Capped at the model's context alone, a compressing harness's runs stitched
    /// into sequences several times longer than any episode, and the update's memory grew
    /// with their square: 21.7 GB for customer-service-v0 at a 1,000-character budget.)
    stitch_tokens: usize,
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
    /// How a run whose context broke into segments is trained.
    pub samples: Samples,
    /// Bytes of finished generations' keys and values the policy server keeps
    /// ([`ServerConfig::prefix_cache_bytes`]).
    pub prefix_cache_bytes: usize,
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
            samples: Samples::default(),
            prefix_cache_bytes: ServerConfig::default().prefix_cache_bytes,
        }
    }

    /// The policy server's settings: these limits and context, a batch as large as the runs
    /// at a time, and (with `journal`) a journal of what it sampled, to check what reaches
    /// training against.
    pub fn server(&self, journal: bool) -> ServerConfig {
        ServerConfig {
            limits: self.limits,
            max_context: self.max_context,
            max_batch: self.concurrency.max(1),
            journal,
            prefix_cache_bytes: self.prefix_cache_bytes,
            ..ServerConfig::default()
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
        let server = PolicyServer::start(model, tokenizer.clone(), settings.server(true))?;
        let runner = HarnessRunner::start(
            env,
            &server.url(),
            db,
            settings.harness,
            settings.concurrency,
            ResetOptions::split(Split::Train),
        )?;
        Ok(Self {
            server,
            runner,
            reader: TraceReader::new(tokenizer, settings.limits),
            samples: settings.samples,
            stitch_tokens: settings.max_context,
        })
    }

    /// The policy server.
    pub fn server(&self) -> &PolicyServer {
        &self.server
    }

    /// The recording proxy.
    pub fn proxy(&self) -> &Proxy {
        self.runner.proxy()
    }

    /// The trace database.
    pub fn db(&self) -> &Path {
        self.runner.db()
    }

    /// Plays `jobs` (`(group, seed)`) as harness runs through the proxy, tagged
    /// `{prefix}-{index}`, and posts each run's reward.
    pub fn play(&self, prefix: &str, jobs: &[(usize, u64)]) -> Vec<HarnessRun> {
        self.runner.play(prefix, jobs)
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
        let harness = HarnessTotals::of(&runs);
        let ids = trace_ids(&runs);
        let store = TraceStore::open(self.runner.db())?;
        let (mut per_run, traces) = self.reader.read(&store, &ids)?;
        let mut moved_turns = 0;
        if self.samples == Samples::Stitched {
            let max_tokens = self
                .stitch_tokens
                .min(trainer.policy_config().context_length);
            per_run = per_run
                .into_iter()
                .map(|segments| {
                    let s = stitch(segments, max_tokens);
                    moved_turns += s.moved_turns;
                    s.episodes
                })
                .collect();
        }
        let played: Vec<_> = per_run
            .iter()
            .filter_map(|eps| eps.last().cloned())
            .collect();
        let episodes: Vec<_> = per_run.into_iter().flatten().collect();
        let longest_sample = episodes.iter().map(|e| e.tokens.len()).max().unwrap_or(0);
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
            grammar_time: std::time::Duration::ZERO,
            journal,
        };
        let metrics = trainer.learn_from(episodes, played, &stats, rollout_s)?;
        self.server.set_model(trainer.inference_model());
        Ok(ProxyIteration {
            metrics,
            harness,
            traces,
            moved_turns,
            longest_sample,
            rollout_s,
        })
    }
}
