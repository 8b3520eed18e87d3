//! The serving side of learning while serving: a [`Follower`] watches a publish directory
//! ([`crate::published`]) and puts each new version before traffic.
//!
//! With a trace store (the recording proxy's database, where rewards arrive), a new version
//! is staged as a canary or shadow ([`Trial`]) and the [`Judge`] promotes or rolls it back on
//! the rewards of the rollouts each version answered since. Without one, a new version
//! replaces the incumbent at once. A version that does not load, or that does not fit the
//! incumbent (another base model, architecture or tokenizer), is refused and the incumbent
//! keeps serving. Every decision is appended to `decisions.jsonl` in the publish directory.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sandgym_policy::{Cpu, PolicyConfig, PolicyModel, Tokenizer, checkpoint, load};
use serde::{Deserialize, Serialize};

use crate::deploy::Trial;
use crate::judge::{Judge, Tally, Verdict};
use crate::published::{self, DECISIONS};
use crate::recorder::now_us;
use crate::server::Controls;
use crate::{ProxyError, Result, TraceStore};

/// How a [`Follower`] runs.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowConfig {
    /// The publish directory.
    pub dir: PathBuf,
    /// The trace store whose rewards judge a candidate; `None` serves new versions at once.
    pub traces: Option<PathBuf>,
    /// How a candidate is tried.
    pub trial: Trial,
    /// When a candidate is promoted or rolled back.
    pub judge: Judge,
    /// How often the directory and the store are read.
    pub poll: Duration,
}

impl FollowConfig {
    /// A canary of a quarter of the rollouts judged on `traces`, polled every 100 ms.
    pub fn new(dir: impl Into<PathBuf>, traces: Option<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            traces,
            trial: Trial::Canary { share: 0.25 },
            judge: Judge::default(),
            poll: Duration::from_millis(100),
        }
    }
}

/// What was done with a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Put on trial.
    Staged,
    /// Made the incumbent after its trial.
    Promoted,
    /// Dropped after its trial.
    RolledBack,
    /// Made the incumbent without a trial (no trace store to judge it on).
    Replaced,
    /// Not loaded: corrupt, or does not fit the incumbent.
    Refused,
    /// Never tried, or dropped from a shadow trial: a newer version came first.
    Superseded,
}

/// One decision, as logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Unix time, microseconds.
    pub at_us: i64,
    /// What was done.
    pub action: Action,
    /// The version it was done with.
    pub version: String,
    /// The incumbent after the decision.
    pub incumbent: String,
    /// Why, in words.
    pub reason: String,
    /// The incumbent's and the candidate's rewards during the trial, when judged.
    pub tallies: Option<(Tally, Tally)>,
}

/// The decisions logged in publish directory `dir` so far (none when there is no log).
pub fn decisions(dir: &Path) -> Result<Vec<Decision>> {
    let path = dir.join(DECISIONS);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ProxyError::Published {
                path,
                reason: e.to_string(),
            });
        }
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).map_err(|e| ProxyError::Published {
                path: path.clone(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The version a restarted server should serve: the last one promoted or served directly, by
/// number, when its directory is still there.
pub fn last_incumbent(dir: &Path) -> Result<Option<u64>> {
    Ok(decisions(dir)?
        .iter()
        .rev()
        .find(|d| matches!(d.action, Action::Promoted | Action::Replaced))
        .and_then(|d| version_number(&d.version))
        .filter(|&n| published::version_dir(dir, n).exists()))
}

fn version_number(version: &str) -> Option<u64> {
    version.strip_prefix('v')?.parse().ok()
}

/// The candidate on trial and what it has earned.
#[derive(Debug)]
struct OnTrial {
    version: String,
    /// Rewards that arrived before it was staged are not counted.
    since: i64,
    /// The judge's looks made so far.
    looked: usize,
}

/// The follower's state; [`FollowState::tick`] does one round, and a [`Follower`] runs it on a
/// thread.
#[derive(Debug)]
pub struct FollowState {
    config: FollowConfig,
    controls: Controls,
    /// The incumbent's architecture (LoRA settings cleared) and tokenizer.
    reference: (PolicyConfig, String),
    incumbent: String,
    /// The highest version number dealt with.
    seen: u64,
    store: Option<TraceStore>,
    /// The last reward read from the store.
    read_up_to: i64,
    trial: Option<OnTrial>,
    tallies: HashMap<String, Tally>,
    /// The base model of LoRA versions, once one has been loaded.
    base: Option<(sandgym_policy::pretrained::ModelInfo, PolicyModel<Cpu>)>,
}

fn architecture(config: &PolicyConfig) -> PolicyConfig {
    let mut c = config.clone();
    c.lora = None;
    c
}

impl FollowState {
    /// Follows `config.dir` for the server behind `controls`, which serves `incumbent` (its
    /// version name, architecture and tokenizer). Versions numbered up to the highest already
    /// decided (by a previous run) are not taken again; one left on trial is.
    pub fn new(
        config: FollowConfig,
        controls: Controls,
        incumbent: (&str, &PolicyConfig, &Tokenizer),
    ) -> Result<Self> {
        config
            .judge
            .validate()
            .map_err(|reason| ProxyError::Published {
                path: config.dir.clone(),
                reason,
            })?;
        if let Trial::Canary { share } = config.trial
            && !(share > 0.0 && share <= 1.0)
        {
            return Err(ProxyError::Published {
                path: config.dir.clone(),
                reason: format!("a canary's share must be within (0, 1] (got {share})"),
            });
        }
        // A version staged but not judged when the last run stopped is tried again.
        let seen = decisions(&config.dir)?
            .iter()
            .filter(|d| d.action != Action::Staged)
            .filter_map(|d| version_number(&d.version))
            .max()
            .unwrap_or(0)
            .max(version_number(incumbent.0).unwrap_or(0));
        let (store, read_up_to) = match &config.traces {
            Some(path) => {
                let store = TraceStore::open(path)?;
                // Rewards already in the store predate every trial of this run.
                let up_to = store.last_reward_order()?;
                (Some(store), up_to)
            }
            None => (None, 0),
        };
        Ok(Self {
            reference: (architecture(incumbent.1), incumbent.2.to_json().to_owned()),
            incumbent: incumbent.0.to_owned(),
            controls,
            seen,
            store,
            read_up_to,
            trial: None,
            tallies: HashMap::new(),
            base: None,
            config,
        })
    }

    /// The version serving now.
    pub fn incumbent(&self) -> &str {
        &self.incumbent
    }

    /// One round: reads new rewards, judges the canary on trial, then, when no canary is on
    /// trial, takes the newest version published since the last one taken (versions published
    /// in between are logged as superseded: a canary's trial runs to its verdict, so a learner
    /// that publishes faster than trials end still has its latest work tried). A shadow has no
    /// verdict: a newer version replaces it. Returns the decisions made (also logged).
    pub fn tick(&mut self) -> Result<Vec<Decision>> {
        let mut made = Vec::new();
        self.read_rewards()?;
        if let Some(decision) = self.judge() {
            made.push(decision);
        }
        let canary_on_trial = self.trial.is_some() && self.config.trial != Trial::Shadow;
        let listed = if canary_on_trial {
            Vec::new()
        } else {
            published::list(&self.config.dir)?
        };
        let newest = listed.iter().rposition(|(n, _)| *n > self.seen);
        if let Some(at) = newest {
            let number = listed[at].0;
            for (skipped, _) in listed[..at].iter().filter(|(n, _)| *n > self.seen) {
                made.push(self.decision(
                    Action::Superseded,
                    &format!("v{skipped}"),
                    format!("v{number} was published before it could be tried"),
                    None,
                ));
            }
            let manifest = listed.into_iter().nth(at).expect("found above").1;
            self.seen = number;
            let version = format!("v{number}");
            let loaded = manifest
                .map_err(|e| e.to_string())
                .and_then(|_| self.load(&published::version_policy(&self.config.dir, number)));
            match loaded {
                Err(reason) => made.push(self.decision(Action::Refused, &version, reason, None)),
                Ok(model) => made.extend(self.take(model, &version)),
            }
        }
        for d in &made {
            self.log(d)?;
        }
        Ok(made)
    }

    fn take(&mut self, model: PolicyModel<Cpu>, version: &str) -> Vec<Decision> {
        let mut made = Vec::new();
        if self.store.is_none() {
            self.controls.replace(model, version);
            self.incumbent = version.to_owned();
            made.push(self.decision(
                Action::Replaced,
                version,
                "no trace store to judge it on: served at once".into(),
                None,
            ));
            return made;
        }
        if let Some(old) = self.trial.take() {
            made.push(self.decision(
                Action::Superseded,
                &old.version,
                format!("{version} was published during its shadow trial"),
                None,
            ));
        }
        self.controls.stage(model, version, self.config.trial);
        self.trial = Some(OnTrial {
            version: version.to_owned(),
            since: self.read_up_to,
            looked: 0,
        });
        self.tallies.clear();
        made.push(self.decision(
            Action::Staged,
            version,
            format!("{:?} against {}", self.config.trial, self.incumbent),
            None,
        ));
        made
    }

    fn read_rewards(&mut self) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        for outcome in store.outcomes_since(self.read_up_to)? {
            self.read_up_to = self.read_up_to.max(outcome.order);
            let counted = self.trial.as_ref().is_some_and(|t| outcome.order > t.since);
            if let (true, Some(version)) = (counted, outcome.version) {
                self.tallies.entry(version).or_default().add(outcome.reward);
            }
        }
        Ok(())
    }

    fn judge(&mut self) -> Option<Decision> {
        let (version, look) = self.trial.as_ref().map(|t| (t.version.clone(), t.looked))?;
        let incumbent = self
            .tallies
            .get(&self.incumbent)
            .copied()
            .unwrap_or_default();
        let candidate = self.tallies.get(&version).copied().unwrap_or_default();
        // A shadow's answers are never served, so no reward scores it: it stays until a
        // newer version comes (its record is the agreement in the server's status).
        if self.config.trial == Trial::Shadow {
            return None;
        }
        // Only at the judge's look points (see Judge::looks), each looked at once.
        let looks = self.config.judge.looks();
        let due = looks.get(look).is_some_and(|&at| candidate.n >= at)
            && incumbent.n >= self.config.judge.min_rollouts;
        if !due {
            return None;
        }
        if let Some(t) = self.trial.as_mut() {
            t.looked += 1;
        }
        let verdict = self.config.judge.decide(&incumbent, &candidate, look);
        let p = Judge::p_better(&incumbent, &candidate);
        let tallies = Some((incumbent, candidate));
        let reason = format!(
            "mean reward {:.3} over {} rollouts against the incumbent's {:.3} over {}; P(better) = {p:.3} at look {} of {} (each needs {:.4})",
            candidate.mean(),
            candidate.n,
            incumbent.mean(),
            incumbent.n,
            look + 1,
            looks.len(),
            self.config.judge.per_look_confidence()
        );
        match verdict {
            Verdict::Wait => None,
            Verdict::Promote => {
                self.controls.promote();
                self.incumbent = version.clone();
                self.trial = None;
                Some(self.decision(Action::Promoted, &version, reason, tallies))
            }
            Verdict::Rollback => {
                self.controls.rollback();
                self.trial = None;
                Some(self.decision(Action::RolledBack, &version, reason, tallies))
            }
        }
    }

    /// Loads a published checkpoint, checks it fits the incumbent and readies it for
    /// sampling (adapters merged). A LoRA version's base model is loaded once and kept: later
    /// versions over it read only their adapters.
    fn load(&mut self, dir: &Path) -> std::result::Result<PolicyModel<Cpu>, String> {
        let device = Default::default();
        let text = |e: sandgym_policy::PolicyError| e.to_string();
        let header = checkpoint::read_config(dir).map_err(text)?;
        let (config, model, tokenizer) = match (&header.lora, &header.base) {
            (Some(_), Some(info)) => {
                if self
                    .base
                    .as_ref()
                    .is_none_or(|(have, _)| have.sha256 != info.sha256)
                {
                    let loaded = sandgym_policy::load::model::<Cpu>(&info.source, &device)
                        .map_err(|e| format!("its base model {}: {e}", info.source))?;
                    self.base = Some((loaded.info, loaded.model));
                }
                let (info, base) = self.base.as_ref().expect("loaded above");
                checkpoint::load_onto::<Cpu>(dir, base, info, &device).map_err(text)?
            }
            _ => load::checkpoint::<Cpu>(dir, &device).map_err(text)?,
        };
        if architecture(&config) != self.reference.0 {
            return Err(format!(
                "its model ({} layers, width {}, vocabulary {}, base {:?}) is not the incumbent's \
                 ({} layers, width {}, vocabulary {}, base {:?})",
                config.n_layers,
                config.d_model,
                config.vocab_size,
                config.base.as_ref().map(|b| &b.source),
                self.reference.0.n_layers,
                self.reference.0.d_model,
                self.reference.0.vocab_size,
                self.reference.0.base.as_ref().map(|b| &b.source),
            ));
        }
        if tokenizer.to_json() != self.reference.1 {
            return Err("its tokenizer is not the incumbent's".into());
        }
        Ok(model.for_inference())
    }

    fn decision(
        &self,
        action: Action,
        version: &str,
        reason: String,
        tallies: Option<(Tally, Tally)>,
    ) -> Decision {
        Decision {
            at_us: now_us(),
            action,
            version: version.to_owned(),
            incumbent: self.incumbent.clone(),
            reason,
            tallies,
        }
    }

    fn log(&self, decision: &Decision) -> Result<()> {
        let path = self.config.dir.join(DECISIONS);
        let fail = |e: std::io::Error| ProxyError::Published {
            path: path.clone(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(&self.config.dir).map_err(fail)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(fail)?;
        let line = serde_json::to_string(decision).expect("a decision serialises");
        writeln!(file, "{line}").map_err(fail)
    }
}

/// A thread running [`FollowState::tick`] every `poll`; stops when dropped. An error of a
/// round (an unreadable store, a full disk) is printed and the next round tries again: the
/// incumbent keeps serving meanwhile.
#[derive(Debug)]
pub struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Follower {
    /// Starts following with `state`.
    pub fn start(mut state: FollowState) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let poll = state.config.poll;
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match state.tick() {
                        Ok(made) => {
                            for d in made {
                                eprintln!("policy {}: {:?} ({})", d.version, d.action, d.reason);
                            }
                        }
                        Err(e) => eprintln!("following the published versions: {e}"),
                    }
                    std::thread::sleep(poll);
                }
            })
        };
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::published::{Manifest, publish};
    use crate::test_model::tiny;
    use crate::{CallRecord, PolicyServer, RewardRecord, ServerConfig, TraceWriter};

    /// Records a rollout answered by `version` with `reward`, as the proxy would.
    fn rollout(writer: &TraceWriter, id: &str, version: &str, reward: f64) {
        writer
            .record(CallRecord {
                rollout: id.into(),
                status: 200,
                response: serde_json::json!({"policy_version": version}).to_string(),
                ..CallRecord::default()
            })
            .unwrap();
        writer
            .reward(RewardRecord {
                rollout: id.into(),
                reward,
                info: serde_json::Value::Null,
            })
            .unwrap();
    }

    #[test]
    fn a_better_canary_is_promoted_and_a_restart_serves_it() {
        let dir = std::env::temp_dir().join(format!("sandgym-follow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("traces.db");
        let writer = TraceWriter::open(&db).unwrap();
        // Rewards from before the follower started are no trial's.
        rollout(&writer, "old", "v0", 0.0);
        let (config, tokenizer) = tiny();
        let model = config.init::<Cpu>(&Default::default());
        let server =
            PolicyServer::start(model.clone(), tokenizer.clone(), ServerConfig::default()).unwrap();
        let follow = FollowConfig {
            judge: Judge {
                confidence: 0.9,
                min_rollouts: 4,
                max_rollouts: 100,
            },
            ..FollowConfig::new(dir.join("versions"), Some(db.clone()))
        };
        let mut state = FollowState::new(
            follow.clone(),
            server.controls(),
            ("v0", &config, &tokenizer),
        )
        .unwrap();
        assert!(state.tick().unwrap().is_empty());
        let manifest = Manifest {
            version: "v3".into(),
            number: 3,
            rollouts: Vec::new(),
            reward_mean: 0.0,
            published_us: 0,
        };
        publish(&follow.dir, &manifest, &config, &model, &tokenizer).unwrap();
        let made = state.tick().unwrap();
        assert_eq!(made.len(), 1);
        assert_eq!(made[0].action, Action::Staged);
        assert_eq!(server.status().candidate.unwrap().0, "v3");
        // Not enough rollouts yet: nothing decided.
        for i in 0..3 {
            rollout(&writer, &format!("a{i}"), "v0", 0.2 + 0.1 * f64::from(i));
            rollout(&writer, &format!("b{i}"), "v3", 0.8 + 0.05 * f64::from(i));
        }
        assert!(state.tick().unwrap().is_empty());
        rollout(&writer, "a3", "v0", 0.3);
        rollout(&writer, "b3", "v3", 0.9);
        let made = state.tick().unwrap();
        assert_eq!(made.len(), 1, "{made:?}");
        assert_eq!(made[0].action, Action::Promoted);
        let (inc, cand) = made[0].tallies.unwrap();
        assert_eq!((inc.n, cand.n), (4, 4), "the old reward is not counted");
        assert_eq!(server.status().incumbent, "v3");
        assert_eq!(state.incumbent(), "v3");
        // A restart serves the promoted version and does not take it again.
        assert_eq!(last_incumbent(&follow.dir).unwrap(), Some(3));
        let mut again = FollowState::new(
            follow.clone(),
            server.controls(),
            ("v3", &config, &tokenizer),
        )
        .unwrap();
        assert!(again.tick().unwrap().is_empty());
        let logged = decisions(&follow.dir).unwrap();
        assert_eq!(
            logged.iter().map(|d| d.action).collect::<Vec<_>>(),
            [Action::Staged, Action::Promoted]
        );
        // A version left on trial when the server stopped is tried again after a restart.
        publish(
            &follow.dir,
            &Manifest {
                version: "v4".into(),
                number: 4,
                ..manifest.clone()
            },
            &config,
            &model,
            &tokenizer,
        )
        .unwrap();
        assert_eq!(again.tick().unwrap()[0].action, Action::Staged);
        let mut restarted = FollowState::new(
            follow.clone(),
            server.controls(),
            ("v3", &config, &tokenizer),
        )
        .unwrap();
        let made = restarted.tick().unwrap();
        assert_eq!(
            (made[0].action, made[0].version.as_str()),
            (Action::Staged, "v4")
        );
        // Absurd settings are refused up front.
        for bad in [
            FollowConfig {
                trial: Trial::Canary { share: 0.0 },
                ..follow.clone()
            },
            FollowConfig {
                judge: Judge {
                    confidence: 1.5,
                    ..Judge::default()
                },
                ..follow.clone()
            },
        ] {
            assert!(FollowState::new(bad, server.controls(), ("v3", &config, &tokenizer)).is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// LoRA versions over a pretrained base (the policy crate's tiny Llama fixture) load over
    /// the base kept from the first, serve merged, and a version over another base is refused.
    #[test]
    fn lora_versions_load_over_a_kept_base_and_serve_merged() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../policy/tests/fixtures/tiny-llama"
        );
        let device = Default::default();
        let base = sandgym_policy::load::model::<Cpu>(fixture, &device).unwrap();
        let lora = sandgym_policy::LoraConfig::default();
        let config = base
            .config
            .clone()
            .with_lora(Some(lora.clone()))
            .with_base(Some(base.info.clone()));
        let adapted = base.model.clone().with_lora(&lora, &device);
        let dir = std::env::temp_dir().join(format!("sandgym-follow-lora-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let server = PolicyServer::start(
            adapted.clone().for_inference(),
            base.tokenizer.clone(),
            ServerConfig::default(),
        )
        .unwrap();
        let mut state = FollowState::new(
            FollowConfig::new(&dir, None),
            server.controls(),
            ("v0", &config, &base.tokenizer),
        )
        .unwrap();
        let manifest = |number: u64| Manifest {
            version: format!("v{number}"),
            number,
            rollouts: Vec::new(),
            reward_mean: 0.0,
            published_us: 0,
        };
        for n in [1, 2] {
            publish(&dir, &manifest(n), &config, &adapted, &base.tokenizer).unwrap();
            let made = state.tick().unwrap();
            assert_eq!(made[0].action, Action::Replaced, "{made:?}");
        }
        assert!(state.base.is_some(), "the base is kept");
        assert_eq!(server.status().incumbent, "v2");
        let mut other = config.clone();
        other.base.as_mut().unwrap().sha256 = "0".repeat(64);
        publish(&dir, &manifest(3), &other, &adapted, &base.tokenizer).unwrap();
        let made = state.tick().unwrap();
        assert_eq!(made[0].action, Action::Refused, "{made:?}");
        assert!(made[0].reason.contains("SHA-256"), "{made:?}");
        assert_eq!(server.status().incumbent, "v2");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
