//! Supervised warm-start: behaviour cloning of recorded episodes (e.g. the scripted baseline's)
//! on the same token rendering that rollouts produce.

use std::collections::HashMap;
use std::sync::Arc;

use burn::tensor::backend::AutodiffBackend;
use sandgym_env_api::{EnvSpec, SplitMix64, Trajectory};
use sandgym_policy::{Rendered, TokenMask, Tokenizer, ToolCallGrammar, replay_masks};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Result;
use crate::batch::Sample;
use crate::learner::Learner;
use crate::rollout::{RolloutSettings, episode_grammar, render_imitating};

/// Settings of a supervised warm-start.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Episodes of the env's scripted baseline to train on (seeds `0..episodes` of the train
    /// split).
    pub episodes: usize,
    /// Episodes of the env's demonstrator (each task's known solution, where the env has
    /// one) to train on as well: the train split's tasks in order, each once, at most this
    /// many (capped at the split's size when the env declares it). SFT is skipped when these,
    /// `episodes` and `recoveries` are all 0.
    pub demonstrations: usize,
    /// Extra demonstrations of recovering from a mistake, on the train split's first tasks
    /// in order (each once, at most the split's size): the demonstrator first makes a typical
    /// mistake, reads what the env says, then plays the solution — the data of a multi-turn
    /// agent that repairs its own errors (the SQL demonstrator first runs its join query
    /// without the `JOIN`). The mistake is shown but not learned
    /// ([`SftExample::imitate`]); a recovery demonstration in which the demonstrator made no
    /// mistake (a task with none to make) is dropped, as a copy of a plain one.
    pub recoveries: usize,
    /// Passes over them.
    pub epochs: u32,
    /// Episodes per optimiser step.
    pub minibatch: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Keep only each episode's final turn (its answer) after the instruction: the data for a
    /// policy that answers in one turn (`max_turns: 1`), when the recorded agent first checked
    /// its answer with a tool.
    pub final_turn_only: bool,
    /// Keep only the recorded episodes that succeeded (rejection-sampled behaviour cloning):
    /// a scripted baseline's failures teach the policy its mistakes.
    pub successful_only: bool,
    /// Draw each epoch's samples in runs of this many whose prompts share a long prefix
    /// beyond the part every prompt shares (shuffled within and across runs;
    /// [`crate::prompt_runs`]): with the prompt encoded without gradient, a pass then encodes
    /// that prefix (a database's schema) once instead of once per sample. 0 or 1: a plain
    /// shuffle. Minibatches of fewer databases learn differently: on the SQL main job, 8
    /// took 27% less SFT time and its trained policy scored 0.035 less on the bundled split
    /// over two seeds (0.853 and 0.866 against 0.905 and 0.884) and about the same on two
    /// databases it never saw (README, "SFT: where a step goes"), so the presets leave it
    /// at 0.
    pub prompt_runs: usize,
    /// Learn under the decoder's constraint: each action token's likelihood is normalised
    /// over the tokens the tool-call grammar allows at its place (the episode's own, when its
    /// reset info narrows the response), exactly the distribution sampling draws from. The
    /// model then spends nothing on what the grammar already decides.
    pub constrained: bool,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            episodes: 0,
            demonstrations: 0,
            recoveries: 0,
            epochs: 4,
            minibatch: 16,
            lr: 2e-3,
            final_turn_only: false,
            successful_only: false,
            prompt_runs: 0,
            constrained: true,
        }
    }
}

/// One recorded episode to learn from, with the info of the observation its episode reset
/// to (where an env declares a per-episode response schema, `RESPONSE_SCHEMA`); empty when
/// unknown, e.g. for episodes read from an Agent Template file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SftExample {
    /// The recorded steps.
    pub trajectory: Trajectory,
    /// The reset observation's info.
    pub reset_info: Map<String, Value>,
    /// Which records' actions to learn, by record index (a missing entry means yes): a
    /// demonstrator's deliberate mistake is shown, with what the env said about it, but not
    /// learned, so the policy learns the recovery and not the mistake.
    pub imitate: Vec<bool>,
}

impl SftExample {
    /// Whether the action of record `i` carries loss.
    pub fn imitates(&self, i: usize) -> bool {
        self.imitate.get(i).copied().unwrap_or(true)
    }
}

impl From<Trajectory> for SftExample {
    fn from(trajectory: Trajectory) -> Self {
        Self {
            trajectory,
            reset_info: Map::new(),
            imitate: Vec::new(),
        }
    }
}

/// What [`samples`] made of a set of examples.
#[derive(Clone, Debug, Default)]
pub struct SftData {
    /// The training samples.
    pub samples: Vec<Sample>,
    /// Examples left out as longer than the context (or without an action).
    pub too_long: usize,
    /// Samples learned without the constraint because an action of theirs does not fit the
    /// grammar (counted only when [`SftConfig::constrained`]).
    pub unconstrained: usize,
}

/// The constraint masks of every trainable token of `rendered` (each action replayed through
/// a fresh matcher of `grammar`), or `None` when an action does not fit the grammar.
fn action_masks(
    rendered: &Rendered,
    grammar: &ToolCallGrammar,
    vocab: usize,
) -> Option<Vec<Option<TokenMask>>> {
    let mut allowed = vec![None; rendered.ids.len()];
    let mut i = 0;
    while i < rendered.ids.len() {
        if !rendered.loss_mask[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < rendered.ids.len() && rendered.loss_mask[i] {
            i += 1;
        }
        let mut matcher = grammar.matcher().ok()?;
        let masks = replay_masks(&mut matcher, &rendered.ids[start..i], vocab).ok()?;
        allowed.splice(start..i, masks);
    }
    Some(allowed)
}

/// The training samples of recorded episodes of an env with `spec`: only the actions carry
/// loss, and with [`SftConfig::constrained`] each action token carries the grammar's mask at
/// its place.
pub fn samples(
    tokenizer: &Tokenizer,
    spec: &EnvSpec,
    examples: &[SftExample],
    settings: &RolloutSettings,
    config: &SftConfig,
) -> Result<SftData> {
    let vocab = tokenizer.vocab_size();
    let default = Arc::new(ToolCallGrammar::for_spec(tokenizer, spec, settings.limits)?);
    let mut grammars: HashMap<String, Arc<ToolCallGrammar>> = HashMap::new();
    let mut data = SftData::default();
    for example in examples {
        let mut t = example.trajectory.clone();
        let mut skipped = 0;
        if config.final_turn_only && t.records.len() > 1 {
            skipped = t.records.len() - 1;
            t.records.drain(..skipped);
        }
        let r = render_imitating(tokenizer, &spec.tools, &t, settings, |i| {
            example.imitates(i + skipped)
        })?;
        if r.ids.len() > settings.max_context || !r.loss_mask.iter().any(|&m| m) {
            data.too_long += 1;
            continue;
        }
        let n = r.ids.len();
        let mut allowed = vec![None; n];
        if config.constrained {
            let masks = episode_grammar(
                &mut grammars,
                &default,
                spec,
                settings.limits,
                &example.reset_info,
            )
            .ok()
            .and_then(|g| action_masks(&r, &g, vocab));
            match masks {
                Some(m) => allowed = m,
                None => data.unconstrained += 1,
            }
        }
        data.samples.push(Sample {
            inputs: r.ids[..n - 1].iter().map(|&x| i64::from(x)).collect(),
            targets: r.ids[1..].iter().map(|&x| i64::from(x)).collect(),
            mask: r.loss_mask[1..].to_vec(),
            allowed: allowed.split_off(1),
            old_logp: vec![0.0; n - 1],
            ref_logp: vec![0.0; n - 1],
            old_values: vec![0.0; n - 1],
            adv: vec![0.0; n - 1],
            returns: vec![0.0; n - 1],
        });
    }
    Ok(data)
}

/// Trains `learner` on `samples` for `config.epochs` shuffled passes (in runs of a shared
/// prompt prefix with [`SftConfig::prompt_runs`]); calls `progress(epoch,
/// step, loss)` after each step and returns the mean loss of each epoch.
pub fn train<B: AutodiffBackend>(
    learner: &mut Learner<B>,
    samples: &[Sample],
    config: &SftConfig,
    seed: u64,
    mut progress: impl FnMut(u32, usize, f64),
) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    let mut means = Vec::new();
    let groups = if config.prompt_runs > 1 {
        crate::prompt_runs::groups(samples)
    } else {
        vec![(0..samples.len()).collect()]
    };
    for epoch in 0..config.epochs {
        let order = crate::prompt_runs::order(&groups, config.prompt_runs, &mut rng);
        let mut total = 0.0;
        let mut steps = 0;
        for (step, chunk) in order.chunks(config.minibatch.max(1)).enumerate() {
            let batch: Vec<&Sample> = chunk.iter().map(|&i| &samples[i]).collect();
            let loss = learner.sft_step(&batch, config.lr);
            progress(epoch, step, loss);
            total += loss;
            steps += 1;
        }
        means.push(total / f64::from(steps.max(1)));
    }
    means
}
