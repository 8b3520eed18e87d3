//! [`RunDir`]: a training run's directory, owning the name of every file in it.

use std::path::{Path, PathBuf};

/// A run directory and the paths in it. Every part of the project that reads or writes a run
/// (the trainer, `eval`, `view`, `bench crash`, the online learner) goes through it, so a file
/// is named in one place.
///
/// A run directory holds:
/// - `config.json` — the run's description and its training settings;
/// - `metrics.jsonl` — one line per iteration;
/// - `eval.jsonl` — one line per periodic evaluation;
/// - `closing_eval.json` — the closing table, when the run has ended;
/// - `episodes/` — the episodes of each iteration and evaluation;
/// - `plots/*.png` — the curves;
/// - `checkpoint/` — `policy/`, the optimiser state and `state.json`, replaced atomically;
/// - `reference/` — the frozen reference policy, when a KL term is on;
/// - `sft/` — the SFT warm-start's own run, when there was one;
/// - `traces.db` — the proxy's traces, for a run whose episodes came through it;
/// - `versions/` and `learn_*.json` — what `sandgym learn` publishes and its recovery notes.
///
/// ```
/// use sandgym_trainer::RunDir;
/// let run = RunDir::new("runs/sql");
/// assert!(run.metrics().ends_with("metrics.jsonl"));
/// assert_eq!(run.sft().path(), std::path::Path::new("runs/sql/sft"));
/// assert!(!run.is_run());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// The run directory at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { root: path.into() }
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `config.json`: the run's description and training settings.
    pub fn config(&self) -> PathBuf {
        self.root.join("config.json")
    }

    /// `metrics.jsonl`: one line per iteration.
    pub fn metrics(&self) -> PathBuf {
        self.root.join("metrics.jsonl")
    }

    /// `eval.jsonl`: one line per periodic evaluation.
    pub fn evals(&self) -> PathBuf {
        self.root.join("eval.jsonl")
    }

    /// `closing_eval.json`: the closing table.
    pub fn closing_eval(&self) -> PathBuf {
        self.root.join("closing_eval.json")
    }

    /// `episodes/`: the episode logs.
    pub fn episodes(&self) -> PathBuf {
        self.root.join("episodes")
    }

    /// `plots/`: the curves.
    pub fn plots(&self) -> PathBuf {
        self.root.join("plots")
    }

    /// `checkpoint/`: the latest checkpoint.
    pub fn checkpoint(&self) -> PathBuf {
        self.root.join("checkpoint")
    }

    /// `checkpoint/state.json`: the iteration the checkpoint was taken after.
    pub fn checkpoint_state(&self) -> PathBuf {
        Checkpoint::state(&self.checkpoint())
    }

    /// `.checkpoint.tmp/`: where the next checkpoint is written before it replaces the last.
    pub fn checkpoint_tmp(&self) -> PathBuf {
        self.root.join(".checkpoint.tmp")
    }

    /// `.checkpoint.tmp/state.json`: written last into the next checkpoint, so the next one
    /// is whole once it exists.
    pub fn checkpoint_tmp_state(&self) -> PathBuf {
        Checkpoint::state(&self.checkpoint_tmp())
    }

    /// `.checkpoint.old/`: the last checkpoint while the next one takes its place.
    pub fn checkpoint_old(&self) -> PathBuf {
        self.root.join(".checkpoint.old")
    }

    /// `reference/`: the frozen reference policy.
    pub fn reference(&self) -> PathBuf {
        self.root.join("reference")
    }

    /// `sft/`: the SFT warm-start's run.
    pub fn sft(&self) -> RunDir {
        RunDir::new(self.root.join("sft"))
    }

    /// `traces.db`: the traces of a run whose episodes came through the recording proxy.
    pub fn traces(&self) -> PathBuf {
        self.root.join("traces.db")
    }

    /// `versions/`: the policy versions the online learner publishes.
    pub fn versions(&self) -> PathBuf {
        self.root.join("versions")
    }

    /// `learn_pending.json`: the online learner's update in flight (crash recovery).
    pub fn learn_pending(&self) -> PathBuf {
        self.root.join("learn_pending.json")
    }

    /// `learn_rebased.json`: the online learner's last re-basing after a rollback.
    pub fn learn_rebased(&self) -> PathBuf {
        self.root.join("learn_rebased.json")
    }

    /// The policy checkpoint: the run's latest (`checkpoint/policy`), or the directory itself
    /// when it is a policy checkpoint rather than a run.
    pub fn policy(&self) -> PathBuf {
        let inner = Checkpoint::policy(&self.checkpoint());
        if inner.exists() {
            inner
        } else {
            self.root.clone()
        }
    }

    /// Whether the directory holds a run (its config, metrics or episodes).
    pub fn is_run(&self) -> bool {
        [self.config(), self.metrics(), self.episodes()]
            .iter()
            .any(|p| p.exists())
    }
}

/// The parts of a checkpoint directory (`checkpoint/`, and the temporary one it is written
/// into before it replaces the old).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checkpoint;

impl Checkpoint {
    /// `policy/`: weights, config, tokenizer.
    pub(crate) fn policy(dir: &Path) -> PathBuf {
        dir.join("policy")
    }

    /// `optimizer`: the optimiser's record (the recorder adds `.mpk`).
    pub(crate) fn optimizer(dir: &Path) -> PathBuf {
        dir.join("optimizer")
    }

    /// `state.json`.
    pub(crate) fn state(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }
}
