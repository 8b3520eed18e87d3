//! Evaluation: a policy's success rate and mean reward on fixed seeds.

use burn::tensor::backend::Backend;
use sandgym_env_api::{ResetOptions, Split, SplitMix64, TaskCounts};
use sandgym_policy::PolicyModel;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::rollout::{Episode, RolloutEngine, RolloutSettings, RolloutStats};

/// The outcome of an evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Episodes played.
    pub episodes: usize,
    /// Fraction that succeeded.
    pub success_rate: f64,
    /// The 95% confidence interval of the success rate (Wilson score interval).
    #[serde(default)]
    pub success_ci95: (f64, f64),
    /// Mean total reward.
    pub mean_reward: f64,
    /// Mean agent turns.
    pub mean_turns: f64,
    /// Episodes ended by an env failure.
    pub env_errors: usize,
    /// Episodes whose context could not take another turn (see
    /// [`Episode::out_of_context`]).
    #[serde(default)]
    pub out_of_context: usize,
    /// Of those, episodes whose very first prompt did not fit (they played no turn).
    #[serde(default)]
    pub prompt_too_long: usize,
    /// Which: each one's task id (or `seed N` for an env without task ids), so a task whose
    /// prompt (a database's schema, say) is too large for the model is named, not just
    /// counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompt_too_long_tasks: Vec<String>,
    /// Each episode's outcome, in the order played, to pair with another evaluation on the
    /// same episodes ([`Paired`](crate::Paired)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<crate::Outcome>,
    /// Where the evaluation's wall time went (`None` where it was not played by [`evaluate`]:
    /// a scripted baseline, a harness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<EvalTiming>,
}

/// Where an evaluation's wall time went, in seconds: the parts of [`evaluate`]'s `seconds` add
/// up to at most it (the rest is rendering prompts and reading actions); making the envs
/// comes before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalTiming {
    /// Making the envs the episodes were played on (set by whoever made them; 0 if unknown).
    #[serde(default)]
    pub make_envs_seconds: f64,
    /// [`evaluate`] itself: every episode played.
    pub seconds: f64,
    /// Env resets and steps.
    pub env_seconds: f64,
    /// Building constraints: episodes' narrowed grammars and each turn's matcher.
    pub grammar_seconds: f64,
    /// Generation: prefill, constrained decoding and its masks.
    pub generate_seconds: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
}

impl EvalTiming {
    /// Seconds per episode over `episodes` episodes, making the envs included (0 for none).
    pub fn per_episode(&self, episodes: usize) -> f64 {
        if episodes == 0 {
            0.0
        } else {
            (self.make_envs_seconds + self.seconds) / episodes as f64
        }
    }

    fn add(&mut self, stats: &RolloutStats) {
        self.env_seconds += stats.env_time.as_secs_f64();
        self.grammar_seconds += stats.grammar_time.as_secs_f64();
        self.generate_seconds += stats.generate_time.as_secs_f64();
        self.generated_tokens += stats.generated_tokens;
    }
}

impl EvalReport {
    /// The report of episodes that came out as `outcomes` (success rate, its interval and the
    /// mean reward are theirs), with `turns` turns in all and `env_errors` ended by the env.
    pub fn of_outcomes(outcomes: Vec<crate::Outcome>, turns: usize, env_errors: usize) -> Self {
        let n = outcomes.len().max(1) as f64;
        let successes = outcomes.iter().filter(|o| o.success).count();
        Self {
            episodes: outcomes.len(),
            success_rate: successes as f64 / n,
            success_ci95: wilson_interval(successes, outcomes.len()),
            mean_reward: outcomes.iter().map(|o| o.reward).sum::<f64>() / n,
            mean_turns: turns as f64 / n,
            env_errors,
            outcomes,
            ..Self::default()
        }
    }

    /// The report of a set of finished episodes.
    pub fn from_episodes(episodes: &[Episode]) -> Self {
        let outcomes = episodes
            .iter()
            .map(|e| crate::Outcome {
                seed: e.seed,
                task: e.task.clone(),
                success: e.success,
                reward: e.total_reward(),
            })
            .collect();
        let too_long: Vec<&Episode> = episodes
            .iter()
            .filter(|e| e.out_of_context && e.turns.is_empty())
            .collect();
        Self {
            out_of_context: episodes.iter().filter(|e| e.out_of_context).count(),
            prompt_too_long: too_long.len(),
            prompt_too_long_tasks: too_long
                .iter()
                .map(|e| e.task.clone().unwrap_or_else(|| format!("seed {}", e.seed)))
                .collect(),
            ..Self::of_outcomes(
                outcomes,
                episodes.iter().map(|e| e.turns.len()).sum(),
                episodes.iter().filter(|e| e.error.is_some()).count(),
            )
        }
    }
}

/// The 95% Wilson score interval of a success rate of `successes` out of `n` (the whole
/// `[0, 1]` for `n = 0`). Unlike the normal approximation it stays inside `[0, 1]` and is
/// honest at rates near 0 or 1 and for small `n`.
///
/// The reference is R's `prop.test(43, 100, correct = FALSE)$conf.int`: 0.3373330, 0.5278461.
///
/// ```
/// let (lo, hi) = sandgym_trainer::wilson_interval(43, 100);
/// assert!((lo - 0.3373330).abs() < 1e-6 && (hi - 0.5278461).abs() < 1e-6);
/// assert_eq!(sandgym_trainer::wilson_interval(0, 0), (0.0, 1.0));
/// assert_eq!(sandgym_trainer::wilson_interval(0, 3).0, 0.0);
/// assert_eq!(sandgym_trainer::wilson_interval(3, 3).1, 1.0);
/// ```
pub fn wilson_interval(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    const Z: f64 = 1.959_963_984_540_054;
    let (n, p) = (n as f64, successes as f64 / n as f64);
    let z2 = Z * Z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    // The interval always holds p; the clamps to it only undo rounding (0 successes gave a
    // lower end of 5.6e-17, above the rate).
    ((centre - half).clamp(0.0, p), (centre + half).clamp(p, 1.0))
}

/// The episodes of an evaluation on `split`: seeds and reset options. For an env with a fixed
/// task list ([`EnvSpec::tasks`](sandgym_env_api::EnvSpec::tasks)) every episode plays a
/// different task, taken by position ([`ResetOptions::cycle`]): all of the split's tasks once
/// when `episodes` is `None` or at least their number, else a fixed sample of `episodes` of
/// them drawn without replacement. For an env that generates episodes from the seed, seeds
/// `0..episodes` (`default` when `None`).
///
/// ```
/// use sandgym_env_api::{Split, TaskCounts};
/// let tasks = Some(TaskCounts { train: 5, test: 3 });
/// let (seeds, options) = sandgym_trainer::eval_plan(tasks, Split::Test, None, 200);
/// assert_eq!((seeds, options.cycle), (vec![0, 1, 2], true));
/// let (seeds, _) = sandgym_trainer::eval_plan(tasks, Split::Train, Some(3), 200);
/// assert_eq!(seeds.len(), 3);
/// assert!(seeds.iter().all(|&s| s < 5));
/// let (seeds, options) = sandgym_trainer::eval_plan(None, Split::Test, None, 4);
/// assert_eq!((seeds, options.cycle), (vec![0, 1, 2, 3], false));
/// ```
pub fn eval_plan(
    tasks: Option<TaskCounts>,
    split: Split,
    episodes: Option<usize>,
    default: usize,
) -> (Vec<u64>, ResetOptions) {
    let options = ResetOptions::split(split);
    let n = match tasks.map(|t| t.get(split)) {
        Some(n) if n > 0 => n,
        _ => {
            let episodes = episodes.unwrap_or(default) as u64;
            return ((0..episodes).collect(), options);
        }
    };
    let mut seeds: Vec<u64> = (0..n).collect();
    if let Some(k) = episodes.filter(|&k| (k as u64) < n) {
        // A partial Fisher-Yates shuffle with a fixed seed: the same sample every time.
        let mut rng = SplitMix64::new(0x5A3D_1E5E);
        for i in 0..k {
            let j = i + rng.below(n - i as u64) as usize;
            seeds.swap(i, j);
        }
        seeds.truncate(k);
        seeds.sort_unstable();
    }
    (seeds, options.cycling())
}

/// How many envs an evaluation of `episodes` episodes is played on: all of them, at most
/// `settings.eval_at_once` (and at least one). [`evaluate`] plays the seeds in chunks of the
/// engine's capacity, so this bounds the KV caches held at once.
pub fn eval_envs(settings: &RolloutSettings, episodes: usize) -> usize {
    episodes.clamp(1, settings.eval_at_once.max(1))
}

/// Plays one episode per seed with `model` (greedy decoding when `temperature` is 0), in
/// batches of the engine's capacity.
pub fn evaluate<B: Backend>(
    engine: &mut RolloutEngine,
    model: &PolicyModel<B>,
    device: &B::Device,
    seeds: &[u64],
    options: &ResetOptions,
    temperature: f32,
) -> Result<(EvalReport, Vec<Episode>)> {
    let clock = std::time::Instant::now();
    let mut timing = EvalTiming::default();
    let mut episodes = Vec::with_capacity(seeds.len());
    let jobs: Vec<(usize, u64)> = seeds.iter().enumerate().map(|(i, &s)| (i, s)).collect();
    for chunk in jobs.chunks(engine.capacity().max(1)) {
        let (eps, stats) = engine.run(model, device, chunk, options, temperature, 0)?;
        timing.add(&stats);
        episodes.extend(eps);
    }
    timing.seconds = clock.elapsed().as_secs_f64();
    let report = EvalReport {
        timing: Some(timing),
        ..EvalReport::from_episodes(&episodes)
    };
    Ok((report, episodes))
}
