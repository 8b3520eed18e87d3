//! The `Env` trait and its reset options.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Action, Done, EnvError, EnvSpec, Observation, Result};

/// Which part of an env's task set an episode draws from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Tasks to train on.
    #[default]
    Train,
    /// Held-out tasks to evaluate on.
    Test,
}

impl std::str::FromStr for Split {
    type Err = EnvError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "train" => Ok(Split::Train),
            "test" => Ok(Split::Test),
            other => Err(EnvError::InvalidOptions {
                reason: format!("unknown split `{other}` (use train or test)"),
            }),
        }
    }
}

/// Options for [`Env::reset`] beyond the seed.
///
/// With no `task`, the env picks a task from `split` as a pure function of the seed, so a
/// seed names an episode.
///
/// ```
/// use sandgym_env_api::{ResetOptions, Split};
/// let opts = ResetOptions::split(Split::Test).with_task("q-017");
/// assert_eq!(serde_json::to_string(&opts)?, r#"{"split":"test","task":"q-017"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetOptions {
    /// The task split to draw from.
    #[serde(default)]
    pub split: Split,
    /// A specific task id, overriding the seed's choice of task (the seed still drives any
    /// other randomness of the episode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Take the split's task by position instead of drawing it: seed `i` plays task
    /// `i mod n` of the split's `n` tasks, so seeds `0..n` play every task exactly once (an
    /// honest evaluation; [`EnvSpec::tasks`] gives `n`). The seed still drives the episode's
    /// other randomness.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cycle: bool,
    /// Env-specific options.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ResetOptions {
    /// Options drawing from `split`.
    pub fn split(split: Split) -> Self {
        Self {
            split,
            ..Self::default()
        }
    }

    /// Selects a task by id.
    pub fn with_task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Takes tasks by position (see [`ResetOptions::cycle`]).
    pub fn cycling(mut self) -> Self {
        self.cycle = true;
        self
    }

    /// The index of the episode's task among `tasks` (id and split of each, in order): the
    /// task named by [`ResetOptions::task`], or else one of the tasks of
    /// [`ResetOptions::split`] chosen by `seed` (drawn, or by position when
    /// [`ResetOptions::cycle`]), so a seed names an episode.
    ///
    /// ```
    /// use sandgym_env_api::{ResetOptions, Split};
    /// let tasks = [("a", Split::Train), ("b", Split::Test), ("c", Split::Train)];
    /// assert_eq!(ResetOptions::default().with_task("b").choose_task(0, tasks)?, 1);
    /// assert_ne!(ResetOptions::default().choose_task(7, tasks)?, 1);
    /// assert!(ResetOptions::default().with_task("z").choose_task(0, tasks).is_err());
    /// let every: Vec<usize> = (0..4).map(|s| ResetOptions::default().cycling().choose_task(s, tasks)).collect::<Result<_, _>>()?;
    /// assert_eq!(every, [0, 2, 0, 2]);
    /// # Ok::<(), sandgym_env_api::EnvError>(())
    /// ```
    pub fn choose_task<'a>(
        &self,
        seed: u64,
        tasks: impl IntoIterator<Item = (&'a str, Split)>,
    ) -> Result<usize> {
        let tasks: Vec<(&str, Split)> = tasks.into_iter().collect();
        if let Some(id) = &self.task {
            return tasks.iter().position(|(t, _)| t == id).ok_or_else(|| {
                EnvError::InvalidOptions {
                    reason: format!("no task `{id}`"),
                }
            });
        }
        let pool: Vec<usize> = (0..tasks.len())
            .filter(|&i| tasks[i].1 == self.split)
            .collect();
        if pool.is_empty() {
            return Err(EnvError::InvalidOptions {
                reason: format!("the {:?} split has no tasks", self.split),
            });
        }
        if self.cycle {
            return Ok(pool[(seed % pool.len() as u64) as usize]);
        }
        Ok(*crate::SplitMix64::new(seed).choose(&pool))
    }
}

/// A gymnasium-style environment for an LLM agent.
///
/// An episode is `reset` followed by `step`s until [`Env::done`] is no longer
/// [`Done::Running`]. Each step takes one Agent Template turn ([`Action`]) and returns what the
/// agent sees next; [`Env::reward`] is the reward of that step.
///
/// # Contract (checked by [`check_env`](crate::check_env))
/// - **Seeding:** `reset(seed, options)` fully determines the episode: the same seed, options
///   and actions give the same observations, rewards and `done` values, in any build (native or
///   WASM) and regardless of earlier episodes. All randomness comes from the seed.
/// - **Invalid actions:** an unknown tool, bad parameters or an action the state does not allow
///   return an error of kind [`ErrorKind::InvalidAction`](crate::ErrorKind::InvalidAction) and
///   leave the env exactly as it was; the caller shows the message to the agent. Use
///   [`validate_action`](crate::validate_action) first thing in `step`.
/// - **Ending:** after the episode ends, `step` returns [`EnvError::EpisodeOver`] until the next
///   `reset`; `step` before any reset returns [`EnvError::NotReset`].
/// - **Rewards** are finite and inside [`EnvSpec::reward_range`]; `reward()` after `reset` is 0.
/// - **Observe:** `observe()` returns the observation the last `reset` or successful `step`
///   returned.
/// - Limits such as a step budget live in wrappers ([`TimeLimit`](crate::TimeLimit)), batching in
///   [`VecEnv`](crate::VecEnv); an env is one episode at a time.
pub trait Env {
    /// The env's id, tools and declared bounds.
    fn spec(&self) -> &EnvSpec;

    /// Starts a new episode and returns the first observation (the task instruction).
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation>;

    /// The observation the agent sees now.
    fn observe(&self) -> Observation;

    /// Applies one agent turn and returns the next observation.
    fn step(&mut self, action: &Action) -> Result<Observation>;

    /// The reward of the last step (0 after `reset`).
    fn reward(&self) -> f64;

    /// Whether the episode is over.
    fn done(&self) -> Done;

    /// Serialises the complete episode state, so that [`Env::restore`] on any instance of the
    /// same env continues bit-identically. Optional.
    fn snapshot(&mut self) -> Result<Vec<u8>> {
        Err(EnvError::SnapshotUnsupported)
    }

    /// Replaces the episode state with a snapshot taken by [`Env::snapshot`]. Optional.
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let _ = snapshot;
        Err(EnvError::SnapshotUnsupported)
    }
}

impl<E: Env + ?Sized> Env for Box<E> {
    fn spec(&self) -> &EnvSpec {
        (**self).spec()
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        (**self).reset(seed, options)
    }
    fn observe(&self) -> Observation {
        (**self).observe()
    }
    fn step(&mut self, action: &Action) -> Result<Observation> {
        (**self).step(action)
    }
    fn reward(&self) -> f64 {
        (**self).reward()
    }
    fn done(&self) -> Done {
        (**self).done()
    }
    fn snapshot(&mut self) -> Result<Vec<u8>> {
        (**self).snapshot()
    }
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        (**self).restore(snapshot)
    }
}

/// A mutable reference to an env is an env, so wrappers can borrow one.
impl<E: Env + ?Sized> Env for &mut E {
    fn spec(&self) -> &EnvSpec {
        (**self).spec()
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        (**self).reset(seed, options)
    }
    fn observe(&self) -> Observation {
        (**self).observe()
    }
    fn step(&mut self, action: &Action) -> Result<Observation> {
        (**self).step(action)
    }
    fn reward(&self) -> f64 {
        (**self).reward()
    }
    fn done(&self) -> Done {
        (**self).done()
    }
    fn snapshot(&mut self) -> Result<Vec<u8>> {
        (**self).snapshot()
    }
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        (**self).restore(snapshot)
    }
}
