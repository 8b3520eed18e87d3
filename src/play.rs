//! Episodes of an agent over many seeds, and their typed report. Each episode is played by
//! the env contract's one runner ([`env_api::play`]); `run`, the baseline rows of `eval`, the
//! SFT demonstrations, the benchmarks, the tokenizer corpus and the dashboard all come here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::env_api::{
    self, Agent, BoxEnv, DEFAULT_MAX_STEPS, Env, PlayedEpisode, RecordTrajectory, ResetOptions,
    Split,
};
use crate::trainer::{EvalReport, Outcome, wilson_interval};
use crate::{EnvTarget, registry};

/// Plays a fresh agent from `agent` (given each episode's seed) in `env` for each seed with
/// `options`, up to the env's step limit (else [`DEFAULT_MAX_STEPS`]) per episode. An episode
/// that fails to reset is the error; one that fails later is reported in its
/// [`PlayedEpisode`].
///
/// ```
/// use sandgym::env_api::{ResetOptions, toy::{BinarySearch, GuessNumber}};
/// let episodes = sandgym::play::play_env(
///     Box::new(GuessNumber::new()),
///     0..4,
///     &ResetOptions::default(),
///     |_| Ok(Box::new(BinarySearch::default())),
/// )?;
/// assert!(episodes.iter().all(|e| e.success));
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn play_env(
    env: BoxEnv,
    seeds: impl IntoIterator<Item = u64>,
    options: &ResetOptions,
    mut agent: impl FnMut(u64) -> anyhow::Result<Box<dyn Agent>>,
) -> anyhow::Result<Vec<PlayedEpisode>> {
    let mut env = RecordTrajectory::new(env);
    let limit = env.spec().max_episode_steps.unwrap_or(DEFAULT_MAX_STEPS);
    seeds
        .into_iter()
        .map(|seed| {
            let mut agent = agent(seed)?;
            Ok(env_api::play(&mut env, &mut agent, seed, options, limit)?)
        })
        .collect()
}

/// [`play_env`] with one agent for every episode: for an agent that starts afresh at each
/// episode's first observation (a demonstrator, which reads the task from it) and is costly
/// to make (the SQL demonstrator builds the env's whole task set).
pub fn play_env_with(
    env: BoxEnv,
    seeds: impl IntoIterator<Item = u64>,
    options: &ResetOptions,
    agent: &mut dyn Agent,
) -> anyhow::Result<Vec<PlayedEpisode>> {
    let mut env = RecordTrajectory::new(env);
    let limit = env.spec().max_episode_steps.unwrap_or(DEFAULT_MAX_STEPS);
    seeds
        .into_iter()
        .map(|seed| Ok(env_api::play(&mut env, agent, seed, options, limit)?))
        .collect()
}

/// [`play_env`] on `target`, natively (or sandboxed for a guest file).
pub fn play_episodes(
    target: &EnvTarget,
    seeds: impl IntoIterator<Item = u64>,
    options: &ResetOptions,
    agent: impl FnMut(u64) -> anyhow::Result<Box<dyn Agent>>,
) -> anyhow::Result<Vec<PlayedEpisode>> {
    play_env(target.make_fastest()?, seeds, options, agent)
}

/// The scripted baseline of `target` played for each seed ([`play_episodes`]); an env without
/// a baseline is an error.
pub fn baseline_episodes(
    target: &EnvTarget,
    seeds: impl IntoIterator<Item = u64>,
    options: &ResetOptions,
) -> anyhow::Result<Vec<PlayedEpisode>> {
    let id = target.id()?;
    play_episodes(target, seeds, options, |_| {
        registry::baseline(&id).ok_or_else(|| anyhow::anyhow!("{id} has no scripted baseline"))
    })
}

/// What a set of played episodes came to: the figures `sandgym run` prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlayReport {
    /// The env's id.
    pub env: String,
    /// Where it ran (`native`, `wasm`).
    pub backend: crate::Backend,
    /// The task split.
    pub split: Split,
    /// Episodes played.
    pub episodes: usize,
    /// Mean total reward per episode.
    pub mean_reward: f64,
    /// The share of successful episodes.
    pub success_rate: f64,
    /// Its 95% Wilson interval.
    pub success_ci95: (f64, f64),
    /// Steps the env was asked to take.
    pub steps: usize,
    /// Steps per episode.
    pub mean_steps: f64,
    /// Episodes ended by a failure of the env or of the agent.
    pub failed_episodes: usize,
    /// Env steps per second of time spent in the env.
    pub steps_per_s: f64,
    /// Wall-clock seconds for the whole set.
    pub wall_s: f64,
}

impl PlayReport {
    /// The report of `episodes` of `env` on `backend` and `split`, played in `wall`.
    pub fn new(
        env: &str,
        backend: crate::Backend,
        split: Split,
        episodes: &[PlayedEpisode],
        wall: Duration,
    ) -> Self {
        let n = episodes.len();
        let per = n.max(1) as f64;
        let successes = episodes.iter().filter(|e| e.success).count();
        let steps = episodes.iter().map(|e| e.steps).sum::<usize>();
        let env_time = episodes.iter().map(|e| e.env_time).sum::<Duration>();
        Self {
            env: env.to_owned(),
            backend,
            split,
            episodes: n,
            mean_reward: episodes.iter().map(PlayedEpisode::reward).sum::<f64>() / per,
            success_rate: successes as f64 / per,
            success_ci95: wilson_interval(successes, n),
            steps,
            mean_steps: steps as f64 / per,
            failed_episodes: episodes.iter().filter(|e| e.failed()).count(),
            steps_per_s: steps as f64 / env_time.as_secs_f64().max(1e-9),
            wall_s: wall.as_secs_f64(),
        }
    }
}

/// The report of played episodes in the shape of a policy's [`EvalReport`], to compare with
/// one (the baseline rows of `eval`).
pub fn eval_report(episodes: &[PlayedEpisode]) -> EvalReport {
    let outcomes = episodes
        .iter()
        .map(|e| Outcome {
            seed: e.seed,
            task: e.task().map(str::to_owned),
            success: e.success,
            reward: e.reward(),
        })
        .collect();
    EvalReport::of_outcomes(
        outcomes,
        episodes.iter().map(|e| e.trajectory.records.len()).sum(),
        episodes.iter().filter(|e| e.error.is_some()).count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_api::Demonstration;

    /// A demonstrator lent to every episode plays what a fresh one per episode plays: it
    /// starts afresh at each task (solutions and recoveries alike), so the SFT data and the
    /// narrowing check may make it once.
    #[test]
    fn a_shared_demonstrator_plays_what_fresh_ones_play() {
        let options = ResetOptions::split(Split::Train).cycling();
        for (env, kind) in [
            ("sql-agent-v0", Demonstration::Solution),
            ("sql-agent-v0", Demonstration::Recovery),
            ("customer-service-v0", Demonstration::Solution),
        ] {
            let target = EnvTarget::new(env);
            let make = || {
                registry::demonstrator(env, &target.config, kind)
                    .unwrap()
                    .unwrap()
            };
            let fresh = play_env(target.make_fastest().unwrap(), 0..300, &options, |_| {
                Ok(make())
            })
            .unwrap();
            let shared = play_env_with(
                target.make_fastest().unwrap(),
                0..300,
                &options,
                &mut *make(),
            )
            .unwrap();
            assert_eq!((fresh.len(), shared.len()), (300, 300));
            for (a, b) in fresh.iter().zip(&shared) {
                assert_eq!(a.trajectory, b.trajectory, "{env} {kind:?} seed {}", a.seed);
                assert_eq!((a.success, &a.imitate), (b.success, &b.imitate));
            }
            assert!(fresh.iter().filter(|e| e.success).count() >= 280, "{env}");
            if kind == Demonstration::Recovery {
                assert!(
                    shared.iter().any(|e| e.imitate.contains(&false)),
                    "no mistake"
                );
            }
        }
    }
}
