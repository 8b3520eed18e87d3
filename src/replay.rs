//! Replaying recorded episodes: an Agent Template trajectory's actions played again in an env
//! from the episode's seed (and task), each step's observation, reward and end compared with
//! what was recorded. Envs draw all randomness from the reset seed, so a faithful env — native
//! or sandboxed — reproduces its episodes exactly; the first difference is reported.

use serde::Serialize;

use crate::env_api::{Env, ResetOptions, Trajectory};

/// Where a replayed episode first differed from its record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// The episode's id (`env-id/seed=N[/task=T]`).
    pub episode: String,
    /// The step (0: the reset's instruction).
    pub step: usize,
    /// What differed, recorded vs replayed.
    pub what: String,
}

/// The replay of a file of episodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Episodes replayed.
    pub episodes: usize,
    /// Of which reproduced step for step.
    pub reproduced: usize,
    /// The others, each at its first difference.
    pub divergences: Vec<Divergence>,
}

/// Replays every trajectory in `env` (reset with `options`, plus each episode's own task).
pub fn replay_all(
    env: &mut dyn Env,
    trajectories: &[Trajectory],
    options: &ResetOptions,
) -> ReplayReport {
    let mut report = ReplayReport::default();
    for t in trajectories {
        report.episodes += 1;
        match replay(env, t, options) {
            Ok(()) => report.reproduced += 1,
            Err(d) => report.divergences.push(d),
        }
    }
    report
}

/// Replays one trajectory; `Err` says where it first differed.
pub fn replay(
    env: &mut dyn Env,
    trajectory: &Trajectory,
    options: &ResetOptions,
) -> Result<(), Divergence> {
    let diverged = |step: usize, what: String| Divergence {
        episode: trajectory.episode.clone(),
        step,
        what,
    };
    let (id, seed, task) = parse_episode(&trajectory.episode).ok_or_else(|| {
        diverged(
            0,
            "the episode id does not say its seed (expected `env-id/seed=N`)".into(),
        )
    })?;
    let env_id = env.spec().id.to_string();
    if id != env_id {
        return Err(diverged(
            0,
            format!("recorded on {id}, replayed on {env_id}"),
        ));
    }
    let mut options = options.clone();
    if let Some(task) = task {
        options.task = Some(task);
    }
    let obs = env
        .reset(seed, &options)
        .map_err(|e| diverged(0, format!("reset failed: {e}")))?;
    let Some(first) = trajectory.records.first() else {
        return Ok(());
    };
    if obs.content != first.instruction {
        return Err(diverged(
            0,
            format!(
                "instruction {:?} vs {:?}",
                short(&first.instruction),
                short(&obs.content)
            ),
        ));
    }
    for (i, record) in trajectory.records.iter().enumerate() {
        let step = i + 1;
        let action = record.to_action().ok_or_else(|| {
            diverged(
                step,
                "the record has neither a tool call nor an answer".into(),
            )
        })?;
        let (observation, reward) = match env.step(&action) {
            Ok(o) => (o.content, env.reward()),
            Err(e) if e.is_invalid_action() => (e.to_string(), 0.0),
            Err(e) => return Err(diverged(step, format!("the env failed: {e}"))),
        };
        if observation != record.observation {
            return Err(diverged(
                step,
                format!(
                    "observation {:?} vs {:?}",
                    short(&record.observation),
                    short(&observation)
                ),
            ));
        }
        // Rewards are compared exactly: a replay is the same computation on the same inputs.
        if reward.to_bits() != record.reward.to_bits() {
            return Err(diverged(
                step,
                format!("reward {} vs {reward}", record.reward),
            ));
        }
        let done = env.done();
        if done != record.done {
            return Err(diverged(step, format!("end {:?} vs {done:?}", record.done)));
        }
    }
    Ok(())
}

/// `env-id/seed=N[/task=T]` → its parts.
fn parse_episode(episode: &str) -> Option<(String, u64, Option<String>)> {
    let mut parts = episode.split('/');
    let id = parts.next()?.to_owned();
    let mut seed = None;
    let mut task = None;
    for part in parts {
        if let Some(s) = part.strip_prefix("seed=") {
            seed = s.parse().ok();
        } else if let Some(t) = part.strip_prefix("task=") {
            task = Some(t.to_owned());
        }
    }
    Some((id, seed?, task))
}

fn short(text: &str) -> String {
    const MAX: usize = 120;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        text.chars().take(MAX).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_api::{Action, RecordTrajectory, toy::GuessNumber};
    use serde_json::json;

    fn recorded(seed: u64) -> Trajectory {
        let mut env = RecordTrajectory::new(GuessNumber::new());
        env.reset(seed, &ResetOptions::default()).unwrap();
        for n in [50, 25, 75] {
            if env.done().is_done() {
                break;
            }
            env.step(&Action::tool("guess", json!({"number": n})))
                .unwrap();
        }
        let _ = env.step(&Action::tool("shout", json!({})));
        env.take_trajectory()
    }

    #[test]
    fn a_faithful_env_reproduces_and_a_changed_record_is_found() {
        let ts: Vec<Trajectory> = (0..4).map(recorded).collect();
        let report = replay_all(&mut GuessNumber::new(), &ts, &ResetOptions::default());
        assert_eq!((report.episodes, report.reproduced), (4, 4), "{report:?}");

        let mut changed = ts[1].clone();
        changed.records[1].observation = "lower".into();
        let d = replay(&mut GuessNumber::new(), &changed, &ResetOptions::default()).unwrap_err();
        assert_eq!(d.step, 2, "{d:?}");
        assert!(d.what.starts_with("observation"), "{d:?}");

        let mut reward = ts[2].clone();
        reward.records[0].reward = 0.5;
        let d = replay(&mut GuessNumber::new(), &reward, &ResetOptions::default()).unwrap_err();
        assert_eq!((d.step, d.what.starts_with("reward")), (1, true), "{d:?}");

        let mut no_seed = ts[0].clone();
        no_seed.episode = "guess-number-v0".into();
        let d = replay(&mut GuessNumber::new(), &no_seed, &ResetOptions::default()).unwrap_err();
        assert!(d.what.contains("seed"), "{d:?}");
    }
}
