//! Evaluation: a policy's success rate and mean reward on fixed seeds.

use burn::tensor::backend::Backend;
use sandgym_env_api::ResetOptions;
use sandgym_policy::PolicyModel;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::rollout::{Episode, RolloutEngine};

/// The outcome of an evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Episodes played.
    pub episodes: usize,
    /// Fraction that succeeded.
    pub success_rate: f64,
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
}

impl EvalReport {
    /// The report of a set of finished episodes.
    pub fn from_episodes(episodes: &[Episode]) -> Self {
        let n = episodes.len().max(1) as f64;
        Self {
            episodes: episodes.len(),
            success_rate: episodes.iter().filter(|e| e.success).count() as f64 / n,
            mean_reward: episodes.iter().map(Episode::total_reward).sum::<f64>() / n,
            mean_turns: episodes.iter().map(|e| e.turns.len()).sum::<usize>() as f64 / n,
            env_errors: episodes.iter().filter(|e| e.error.is_some()).count(),
            out_of_context: episodes.iter().filter(|e| e.out_of_context).count(),
            prompt_too_long: episodes
                .iter()
                .filter(|e| e.out_of_context && e.turns.is_empty())
                .count(),
        }
    }
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
    let mut episodes = Vec::with_capacity(seeds.len());
    let jobs: Vec<(usize, u64)> = seeds.iter().enumerate().map(|(i, &s)| (i, s)).collect();
    for chunk in jobs.chunks(engine.capacity().max(1)) {
        let (eps, _) = engine.run(model, device, chunk, options, temperature, 0)?;
        episodes.extend(eps);
    }
    Ok((EvalReport::from_episodes(&episodes), episodes))
}
