//! [`play`]: the one episode runner. Every place that lets an agent play an env — `run`, the
//! baseline rows of `eval`, SFT demonstrations, benchmarks, the tokenizer corpus, the
//! dashboard — plays it through here, so an episode ends, records and scores the same way
//! everywhere.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::{Agent, Env, Observation, RecordTrajectory, ResetOptions, Result, Trajectory};

/// How long an episode may go when its env sets no step limit.
pub const DEFAULT_MAX_STEPS: u32 = 16;

/// One episode an agent played ([`play`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlayedEpisode {
    /// The seed it was reset with.
    pub seed: u64,
    /// The recorded Agent Template steps (an invalid action is a step: the agent read its
    /// error and went on).
    pub trajectory: Trajectory,
    /// Whether it succeeded ([`episode_success`](crate::episode_success)); never when it
    /// ended on a failure.
    pub success: bool,
    /// The info of the observation it reset to (the task's id, the narrowing …).
    pub reset_info: Map<String, Value>,
    /// The env failure that ended it, if one did (a guest fault, a reward plugin that could
    /// not score a step): it counts as played and not successful.
    pub error: Option<String>,
    /// Why the agent could not decide an action, if it could not
    /// ([`Agent::failure`]): the episode ended there, not successful.
    pub agent_failure: Option<String>,
    /// Whether each recorded step's action is one to learn from ([`Agent::imitate`]).
    pub imitate: Vec<bool>,
    /// Steps the env was asked to take (the refused ones included).
    pub steps: usize,
    /// Time spent in the env (reset and steps), not in the agent.
    pub env_time: Duration,
}

impl PlayedEpisode {
    /// Its total reward.
    pub fn reward(&self) -> f64 {
        self.trajectory.total_reward()
    }

    /// The task it played, where the env names it in the reset info (`task`).
    pub fn task(&self) -> Option<&str> {
        self.reset_info.get("task").and_then(Value::as_str)
    }

    /// Whether it ended on a failure of the env or of the agent.
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.agent_failure.is_some()
    }
}

/// Plays one episode of `agent` in `env` from `seed` with `options`, at most `max_steps` steps
/// (the env's own limit, if lower, ends it first). A failed reset is the error; a failure
/// later ends the episode and is reported in it, and an invalid action is shown to the agent
/// as its observation, as in a rollout.
///
/// ```
/// use sandgym_env_api::{RecordTrajectory, ResetOptions, play, toy::{BinarySearch, GuessNumber}};
/// let mut env = RecordTrajectory::new(GuessNumber::new());
/// let episode = play(&mut env, &mut BinarySearch::default(), 7, &ResetOptions::default(), 16)?;
/// assert!(episode.success && episode.reward() == 1.0);
/// assert_eq!(episode.trajectory.records.len(), episode.steps);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
pub fn play<E: Env, A: Agent + ?Sized>(
    env: &mut RecordTrajectory<E>,
    agent: &mut A,
    seed: u64,
    options: &ResetOptions,
    max_steps: u32,
) -> Result<PlayedEpisode> {
    let t = Instant::now();
    let mut obs = env.reset(seed, options)?;
    let mut env_time = t.elapsed();
    let reset_info = obs.info.clone();
    let (mut error, mut agent_failure) = (None, None);
    let (mut imitate, mut steps) = (Vec::new(), 0);
    for _ in 0..max_steps {
        if env.done().is_done() {
            break;
        }
        let action = agent.act(&obs);
        if let Some(why) = agent.failure() {
            agent_failure = Some(why.to_owned());
            break;
        }
        // Every step that returns (or is refused as invalid) is recorded.
        imitate.push(agent.imitate());
        let t = Instant::now();
        let result = env.step(&action);
        env_time += t.elapsed();
        steps += 1;
        match result {
            Ok(next) => obs = next,
            // The agent's mistake: it reads the error and goes on.
            Err(e) if e.is_invalid_action() => obs = Observation::new(e.to_string()),
            Err(e) => {
                imitate.pop();
                error = Some(e.to_string());
                break;
            }
        }
    }
    let trajectory = env.take_trajectory();
    let success = error.is_none()
        && agent_failure.is_none()
        && crate::episode_success(&obs.info, env.done(), trajectory.total_reward());
    Ok(PlayedEpisode {
        seed,
        trajectory,
        success,
        reset_info,
        error,
        agent_failure,
        imitate,
        steps,
        env_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Action;
    use crate::toy::{BinarySearch, GuessNumber};
    use serde_json::json;

    /// Plays a fixed list of actions; past its end it fails with its reason, if it has one.
    struct Script(Vec<Action>, Option<&'static str>, bool);

    impl Agent for Script {
        fn act(&mut self, _: &Observation) -> Action {
            self.2 = self.0.is_empty();
            if self.2 {
                return Action::respond("");
            }
            self.0.remove(0)
        }
        fn failure(&self) -> Option<&str> {
            self.1.filter(|_| self.2)
        }
    }

    #[test]
    fn an_invalid_action_is_a_recorded_step_the_agent_reads() {
        let mut env = RecordTrajectory::new(GuessNumber::with_max(8));
        let mut agent = Script(
            vec![
                Action::tool("shout", json!({})),
                Action::respond("I give up"),
            ],
            None,
            false,
        );
        let e = play(&mut env, &mut agent, 1, &ResetOptions::default(), 16).unwrap();
        assert_eq!((e.steps, e.trajectory.records.len()), (2, 2));
        assert!(e.trajectory.records[0].observation.contains("unknown tool"));
        assert!(!e.success && !e.failed());
        assert_eq!(e.imitate, vec![true, true]);
    }

    #[test]
    fn an_agent_failure_ends_the_episode_unsuccessful() {
        let mut env = RecordTrajectory::new(GuessNumber::with_max(8));
        let mut agent = Script(
            vec![Action::tool("guess", json!({"number": 4}))],
            Some("down"),
            false,
        );
        let e = play(&mut env, &mut agent, 1, &ResetOptions::default(), 16).unwrap();
        assert_eq!(e.agent_failure.as_deref(), Some("down"));
        assert_eq!(e.steps, 1);
        assert!(!e.success && e.failed());
    }

    #[test]
    fn the_step_limit_ends_an_episode_and_a_bad_reset_is_the_error() {
        let mut env = RecordTrajectory::new(GuessNumber::new());
        let e = play(
            &mut env,
            &mut BinarySearch::default(),
            5,
            &ResetOptions::default(),
            2,
        )
        .unwrap();
        assert_eq!(e.steps, 2);
        assert!(!e.success);
        let bad = ResetOptions::default().with_task("no-such-task");
        assert!(play(&mut env, &mut BinarySearch::default(), 5, &bad, 2).is_err());
    }
}
