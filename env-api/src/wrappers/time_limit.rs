use crate::{Action, Done, Env, EnvError, EnvSpec, ErrorKind, Observation, ResetOptions, Result};

/// Truncates an episode after a number of agent turns.
///
/// Every turn counts, including invalid actions (an agent that keeps calling unknown tools still
/// runs out of turns). When the budget is spent, [`Env::done`] reports [`Done::Truncated`] and
/// further steps return [`EnvError::EpisodeOver`]. If the inner env terminates on the last turn,
/// `Terminated` wins, as in Gymnasium.
///
/// ```
/// use sandgym_env_api::{Action, Done, Env, EnvError, ResetOptions, TimeLimit, toy::GuessNumber};
/// use serde_json::json;
/// let mut env = TimeLimit::new(GuessNumber::new(), 2);
/// env.reset(7, &ResetOptions::default())?;
/// assert!(env.step(&Action::tool("shout", json!({}))).is_err()); // invalid, still a turn
/// assert!(env.step(&Action::tool("shout", json!({}))).is_err());
/// assert_eq!(env.done(), Done::Truncated);
/// let err = env.step(&Action::tool("guess", json!({"number": 1}))).unwrap_err();
/// assert!(matches!(err, EnvError::EpisodeOver { done: Done::Truncated }));
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Debug)]
pub struct TimeLimit<E> {
    inner: E,
    max_steps: u32,
    steps: u32,
    spec: EnvSpec,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `inner` with a budget of `max_steps` turns per episode.
    pub fn new(inner: E, max_steps: u32) -> Self {
        let spec = inner.spec().clone().with_max_episode_steps(max_steps);
        Self {
            inner,
            max_steps,
            steps: 0,
            spec,
        }
    }

    /// Wraps `inner` with the budget its spec declares, if any.
    pub fn from_spec(inner: E) -> Self {
        let max = inner.spec().max_episode_steps.unwrap_or(u32::MAX);
        Self::new(inner, max)
    }

    /// Turns taken in this episode.
    pub fn elapsed_steps(&self) -> u32 {
        self.steps
    }

    /// The wrapped env.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Unwraps.
    pub fn into_inner(self) -> E {
        self.inner
    }
}

impl<E: Env> Env for TimeLimit<E> {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let obs = self.inner.reset(seed, options)?;
        self.steps = 0;
        Ok(obs)
    }

    fn observe(&self) -> Observation {
        self.inner.observe()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        let done = self.done();
        if done.is_done() {
            return Err(EnvError::EpisodeOver { done });
        }
        let result = self.inner.step(action);
        match &result {
            Err(e) if e.kind() == ErrorKind::Usage => {}
            _ => self.steps += 1,
        }
        result
    }

    fn reward(&self) -> f64 {
        self.inner.reward()
    }

    fn done(&self) -> Done {
        match self.inner.done() {
            Done::Running if self.steps >= self.max_steps => Done::Truncated,
            other => other,
        }
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let mut bytes = self.steps.to_le_bytes().to_vec();
        bytes.extend(self.inner.snapshot()?);
        Ok(bytes)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let (count, rest) =
            snapshot
                .split_first_chunk::<4>()
                .ok_or_else(|| EnvError::Snapshot {
                    reason: "TimeLimit snapshot shorter than its 4-byte step counter".into(),
                })?;
        self.inner.restore(rest)?;
        self.steps = u32::from_le_bytes(*count);
        Ok(())
    }
}
