//! The token-level record of one episode, shared by whatever produces episodes (the trainer's
//! rollout engine, the recording proxy's trace reader) and whatever learns from them.

use sandgym_env_api::{Done, Trajectory};

use crate::Rendered;

/// One policy turn inside an episode's token sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// Index of the turn's first generated token in [`Episode::tokens`].
    pub start: usize,
    /// One past its last generated token.
    pub end: usize,
    /// The env's reward for this turn's action.
    pub reward: f64,
}

/// One finished episode: exactly the tokens the policy saw and produced, with the log-prob
/// and the constraint mask of every produced token, and the env's rewards per turn.
#[derive(Clone, Debug, Default)]
pub struct Episode {
    /// The group (task) this rollout belongs to, within its iteration.
    pub group: usize,
    /// The reset seed (it chose the task).
    pub seed: u64,
    /// The task the env reset to, when its reset info names one (`info.task`).
    pub task: Option<String>,
    /// Prompt, actions and observations, as rendered by the [`Template`](crate::Template).
    pub tokens: Vec<u32>,
    /// `true` for tokens the policy generated.
    pub loss_mask: Vec<bool>,
    /// Per token: the log-prob it was sampled with (0 where not generated).
    pub logprobs: Vec<f32>,
    /// Per token: the constraint's allowed set when it was sampled (`None`: not generated or
    /// unconstrained).
    pub allowed: Vec<Option<crate::TokenMask>>,
    /// The policy turns.
    pub turns: Vec<Turn>,
    /// How the episode ended (`Truncated` also when it ran out of turns, tokens or context).
    pub done: Done,
    /// Whether the env reported success (its `success` info) or, without one, whether it
    /// terminated with a positive final reward.
    pub success: bool,
    /// The env failure that ended the episode, if any.
    pub error: Option<String>,
    /// The episode ended because its context could not take another turn: the prompt (or
    /// the conversation so far) plus a turn's token budget exceeds the model's context.
    /// `turns` is empty when the very first prompt did not fit.
    pub out_of_context: bool,
    /// The Agent Template records of the episode.
    pub trajectory: Trajectory,
    /// Under a composed reward, each term summed over the episode's steps (from the steps'
    /// `info.reward_terms`); empty otherwise.
    pub reward_terms: std::collections::BTreeMap<String, f64>,
    /// The parts of the terms that give them (a reward plugin's rubric), each summed over the
    /// episode's steps, keyed `term/part` (from the steps' `info.reward_parts`).
    pub reward_parts: std::collections::BTreeMap<String, f64>,
}

impl Episode {
    /// The sum of the turn rewards.
    pub fn total_reward(&self) -> f64 {
        self.turns.iter().map(|t| t.reward).sum()
    }

    /// The canonical text of its actions, one per line (used to measure diversity).
    pub fn action_text(&self) -> String {
        self.trajectory
            .records
            .iter()
            .filter_map(|r| r.to_action().map(|a| crate::canonical_json(&a)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Appends tokens the policy did not generate (a prompt, an observation): no loss, no
    /// log-prob, no constraint.
    pub fn push_context(&mut self, rendered: Rendered) {
        let n = rendered.ids.len();
        self.tokens.extend(rendered.ids);
        self.loss_mask.extend(std::iter::repeat_n(false, n));
        self.logprobs.extend(std::iter::repeat_n(0.0, n));
        self.allowed.extend(std::iter::repeat_n(None, n));
    }
}
