use crate::{
    Action, Done, Env, EnvSpec, Observation, ResetOptions, Result, StepRecord, Trajectory,
};

/// Records every turn of the current episode as Agent Template [`StepRecord`]s.
///
/// A successful step is recorded with its observation, reward and `done`; an invalid action is
/// recorded too, with the error message as its observation and reward 0, because that is what
/// the agent saw. Other errors are not turns and are not recorded.
///
/// ```
/// use sandgym_env_api::{Action, Env, RecordTrajectory, ResetOptions, toy::GuessNumber};
/// use serde_json::json;
/// let mut env = RecordTrajectory::new(GuessNumber::new());
/// env.reset(3, &ResetOptions::default())?;
/// let _ = env.step(&Action::tool("shout", json!({})));   // invalid, but recorded
/// env.step(&Action::tool("guess", json!({"number": 50})))?;
/// let t = env.trajectory();
/// assert_eq!(t.records.len(), 2);
/// assert!(t.records[0].observation.starts_with("unknown tool `shout`"));
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Debug)]
pub struct RecordTrajectory<E> {
    inner: E,
    instruction: String,
    trajectory: Trajectory,
}

impl<E: Env> RecordTrajectory<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            instruction: String::new(),
            trajectory: Trajectory::default(),
        }
    }

    /// The current episode's trajectory so far.
    pub fn trajectory(&self) -> &Trajectory {
        &self.trajectory
    }

    /// Takes the current trajectory, leaving an empty one.
    pub fn take_trajectory(&mut self) -> Trajectory {
        std::mem::take(&mut self.trajectory)
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

impl<E: Env> Env for RecordTrajectory<E> {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let obs = self.inner.reset(seed, options)?;
        let mut episode = format!("{}/seed={seed}", self.inner.spec().id);
        if let Some(task) = &options.task {
            episode.push_str(&format!("/task={task}"));
        }
        self.instruction = obs.content.clone();
        self.trajectory = Trajectory::new(episode);
        Ok(obs)
    }

    fn observe(&self) -> Observation {
        self.inner.observe()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        let result = self.inner.step(action);
        let record = match &result {
            Ok(obs) => {
                let mut r =
                    StepRecord::new(&self.instruction, action, &obs.content, self.inner.reward())
                        .with_breakdown(&obs.info);
                r.done = self.inner.done();
                Some(r)
            }
            Err(e) if e.is_invalid_action() => {
                let mut r = StepRecord::new(&self.instruction, action, e.to_string(), 0.0);
                r.done = self.inner.done();
                Some(r)
            }
            Err(_) => None,
        };
        if let Some(record) = record {
            self.trajectory.push(record);
        }
        result
    }

    fn reward(&self) -> f64 {
        self.inner.reward()
    }

    fn done(&self) -> Done {
        self.inner.done()
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        self.inner.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        self.inner.restore(snapshot)
    }
}
