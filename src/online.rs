//! Learning while serving: a [`Learner`] trains on the rollouts the recording proxy records
//! from live traffic, as their rewards arrive, and publishes each update as a new policy
//! version for a following server ([`sandgym_proxy::Follower`]) to try and serve.
//!
//! ```text
//! harness ─▶ proxy ─▶ serve-policy --follow DIR ◀─ DIR/v{n} ◀─ learn (this) ◀─ traces.db
//!              └──── calls, rewards ─▶ traces.db ───────────────────────────────┘
//! ```
//!
//! Each update takes the oldest `batch` rewarded rollouts no update has taken, turns their
//! traces into episodes (token-exact, as `train --source proxy` does), takes one step of the
//! run's algorithm and publishes the result. The recorded log-probs are those of the version
//! that served each call, so the ratio the clipped objectives take is the importance weight of
//! the current policy against the serving one: traffic served by an older version is corrected
//! for, not treated as on-policy. The current policy's log-probs are taken at the run's
//! sampling temperature (`rollout.temperature`): traffic sampled at another temperature is
//! weighed against that distribution (its ratios clipped like any other), so serve at the
//! run's temperature to learn from it as intended. Group algorithms (GRPO, RLOO, DAPO) group
//! rollouts by their first prompt (the same task asked again); REINFORCE++ and PPO need no
//! groups.
//!
//! When the serving side rolls back (or refuses) a version, the learner's own weights have
//! gone the wrong way: before its next update it starts again from the version that serves
//! (the last one promoted, or `v0`, the starting point it publishes when it first starts), with
//! a fresh optimiser, once per such decision (`learn_rebased.json` in the run records the last
//! one acted on).
//!
//! Nothing is trained on twice and a crash loses nothing: before an update the learner writes
//! which rollouts it takes (`learn_pending.json` in the run); after it, the run's checkpoint is
//! saved, the version published with those rollouts in its manifest, and the rollouts marked
//! trained in the trace store (their rewards can no longer change). A restart finishes an
//! update whose checkpoint was saved, drops one whose checkpoint was not (its rollouts are
//! taken again), and marks every published manifest's rollouts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use sandgym_proxy::published::{self, Manifest};
use sandgym_proxy::{Action, TraceReader, TraceStats, TraceStore, TraceWriter};
use sandgym_trainer::{IterMetrics, RolloutStats, RunDir, Trainer};
use serde::{Deserialize, Serialize};

use crate::policy::{ActionLimits, Cpu, load};

/// How a [`Learner`] runs.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnConfig {
    /// The recording proxy's trace store.
    pub traces: PathBuf,
    /// Where versions are published.
    pub publish: PathBuf,
    /// Rewarded rollouts per update.
    pub batch: usize,
    /// The size limits of actions the serving process decodes under (`serve-policy` uses
    /// the defaults): the learner replays the same grammar over each recorded answer, so
    /// they must match or the answers are counted unusable.
    pub limits: ActionLimits,
}

/// The rollouts of an update under way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Pending {
    /// The iteration the update makes.
    iter: u32,
    rollouts: Vec<String>,
    reward_mean: f64,
}

/// One published update.
#[derive(Clone, Debug, Serialize)]
pub struct LearnStep {
    /// The version published.
    pub version: String,
    /// The rollouts it trained on.
    pub rollouts: usize,
    /// Their mean reward.
    pub reward_mean: f64,
    /// The trainer's metrics of the update.
    pub metrics: IterMetrics,
    /// What the traces held (calls used exactly, unusable, drift).
    pub traces: TraceStats,
    /// Seconds from taking the rollouts to the version being published.
    pub seconds: f64,
    /// The serving version the update started again from, after a rollback.
    pub rebased_from: Option<String>,
}

/// A trainer fed from the trace store; see the module documentation.
pub struct Learner<B: AutodiffBackend<InnerBackend = Cpu>> {
    trainer: Trainer<B>,
    reader: TraceReader,
    writer: TraceWriter,
    config: LearnConfig,
}

impl<B: AutodiffBackend<InnerBackend = Cpu>> std::fmt::Debug for Learner<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("config", &self.config)
            .field("iteration", &self.trainer.iteration())
            .finish_non_exhaustive()
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

impl<B: AutodiffBackend<InnerBackend = Cpu>> Learner<B> {
    /// A learner continuing `trainer`'s run (no evaluation on envs: its data is the traffic),
    /// after finishing or dropping an update a crash interrupted.
    pub fn new(mut trainer: Trainer<B>, config: LearnConfig) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (1..=4096).contains(&config.batch),
            "a learner's batch is 1 to 4096 rollouts (got {})",
            config.batch
        );
        trainer.configure(|c| {
            c.eval.every = 0;
            c.schedule.iters = u32::MAX;
            c.schedule.save_every = u32::MAX;
        })?;
        let reader = TraceReader::new(trainer.tokenizer().clone(), config.limits);
        let writer = TraceWriter::open(&config.traces)?;
        let learner = Self {
            trainer,
            reader,
            writer,
            config,
        };
        learner.recover()?;
        // The starting point, to come back to after a rollback while it still serves.
        let start = published::version_dir(&learner.config.publish, 0);
        if !start.exists() {
            learner.publish(&Pending {
                iter: 0,
                rollouts: Vec::new(),
                reward_mean: 0.0,
            })?;
        }
        Ok(learner)
    }

    /// A learner continuing the run in `run` ([`crate::training::resume_run`]).
    pub fn for_run(run: &Path, config: LearnConfig) -> anyhow::Result<Self> {
        Self::new(
            crate::training::resume_run::<B>(run, Default::default())?,
            config,
        )
    }

    /// The trainer.
    pub fn trainer(&self) -> &Trainer<B> {
        &self.trainer
    }

    fn pending_path(&self) -> PathBuf {
        RunDir::new(self.trainer.out()).learn_pending()
    }

    /// Finishes or drops an interrupted update, then marks every published manifest's
    /// rollouts as trained.
    fn recover(&self) -> anyhow::Result<()> {
        let path = self.pending_path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            let pending: Pending = serde_json::from_str(&text)
                .with_context(|| format!("reading {}", path.display()))?;
            if pending.iter == self.trainer.iteration() {
                // The checkpoint of the update was saved: publish it if that was not done.
                let dir = published::version_dir(&self.config.publish, u64::from(pending.iter));
                if !dir.exists() {
                    self.publish(&pending)?;
                }
            }
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
        for (number, manifest) in published::list(&self.config.publish)? {
            if let Ok(m) = manifest {
                self.writer
                    .mark_trained(&m.rollouts, &format!("v{number}"))?;
            }
        }
        Ok(())
    }

    fn publish(&self, pending: &Pending) -> anyhow::Result<PathBuf> {
        let number = u64::from(pending.iter);
        let manifest = Manifest {
            version: format!("v{number}"),
            number,
            rollouts: pending.rollouts.clone(),
            reward_mean: pending.reward_mean,
            published_us: now_us(),
        };
        let dir = published::publish(
            &self.config.publish,
            &manifest,
            self.trainer.policy_config(),
            // The trained model itself: a LoRA model is published as its adapters (its
            // inference copy has them merged into the weights).
            self.trainer.model(),
            self.trainer.tokenizer(),
        )?;
        self.writer
            .mark_trained(&manifest.rollouts, &manifest.version)?;
        Ok(dir)
    }

    /// Starts again from the serving version when a version was rolled back or refused since
    /// the last time it did; returns the version it started again from.
    pub fn rebase_after_rollback(&mut self) -> anyhow::Result<Option<String>> {
        let decisions = sandgym_proxy::decisions(&self.config.publish)?;
        let path = RunDir::new(self.trainer.out()).learn_rebased();
        let done_until: i64 = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["after_us"].as_i64())
            .unwrap_or(i64::MIN);
        let Some(rejected) = decisions.iter().rev().find(|d| {
            d.at_us > done_until && matches!(d.action, Action::RolledBack | Action::Refused)
        }) else {
            return Ok(None);
        };
        let serving = &rejected.incumbent;
        let number: u64 = serving
            .strip_prefix('v')
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("the serving version {serving:?} is not one of v<n>"))?;
        let dir = published::version_policy(&self.config.publish, number);
        let (_, model, _) = load::checkpoint::<B>(&dir, &Default::default())
            .with_context(|| format!("loading the serving version {serving}"))?;
        self.trainer.reset_policy(model);
        std::fs::write(
            &path,
            serde_json::json!({"after_us": rejected.at_us, "version": rejected.version,
                               "started_again_from": serving})
            .to_string(),
        )
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(serving.clone()))
    }

    /// One update when `batch` rewarded rollouts are waiting; `None` otherwise.
    pub fn step(&mut self) -> anyhow::Result<Option<LearnStep>> {
        let store = TraceStore::open(&self.config.traces)?;
        let ids = store.untrained(self.config.batch)?;
        if ids.len() < self.config.batch {
            return Ok(None);
        }
        let clock = Instant::now();
        let rebased_from = self.rebase_after_rollback()?;
        // Group algorithms compare rollouts of one task: the same first prompt.
        let mut groups: HashMap<Vec<u32>, usize> = HashMap::new();
        let mut labelled = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let opening = store
                .calls(id)?
                .into_iter()
                .find_map(|c| c.prompt_ids)
                .unwrap_or_default();
            let next = groups.len();
            let group = *groups.entry(opening).or_insert(next);
            labelled.push((id.clone(), group, i as u64));
        }
        let (per_run, traces) = self.reader.read(&store, &labelled)?;
        let played: Vec<_> = per_run
            .iter()
            .filter_map(|eps| eps.last().cloned())
            .collect();
        let episodes: Vec<_> = per_run.into_iter().flatten().collect();
        let reward_mean = ids
            .iter()
            .map(|id| store.reward(id).map(|r| r.map_or(0.0, |r| r.reward)))
            .collect::<Result<Vec<f64>, _>>()?
            .iter()
            .sum::<f64>()
            / ids.len() as f64;
        let pending = Pending {
            iter: self.trainer.iteration() + 1,
            rollouts: ids,
            reward_mean,
        };
        let path = self.pending_path();
        std::fs::write(&path, serde_json::to_string(&pending)?)
            .with_context(|| format!("writing {}", path.display()))?;
        let stats = RolloutStats {
            generated_tokens: 0,
            generate_time: Duration::ZERO,
            env_steps: 0,
            env_time: Duration::ZERO,
            grammar_time: Duration::ZERO,
            journal: Default::default(),
        };
        let metrics = self.trainer.learn_from(episodes, played, &stats, 0.0)?;
        self.trainer.save()?;
        self.publish(&pending)?;
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        Ok(Some(LearnStep {
            version: format!("v{}", pending.iter),
            rollouts: pending.rollouts.len(),
            reward_mean,
            metrics,
            traces,
            seconds: clock.elapsed().as_secs_f64(),
            rebased_from,
        }))
    }

    /// Updates whenever a batch is waiting, polling every `poll`, until `stop` says so.
    pub fn follow(
        &mut self,
        poll: Duration,
        stop: impl Fn() -> bool,
        mut published: impl FnMut(&LearnStep),
    ) -> anyhow::Result<()> {
        while !stop() {
            match self.step()? {
                Some(step) => published(&step),
                None => std::thread::sleep(poll),
            }
        }
        Ok(())
    }
}

/// The publish directory a run's learner uses by default.
pub fn default_publish_dir(run: &Path) -> PathBuf {
    RunDir::new(run).versions()
}
