//! The episodes of a run, kept for reading them back (the dashboard, `sandgym replay`):
//! `episodes/train-000007.jsonl` holds the episodes iteration 7 played and
//! `episodes/eval-000010.jsonl` those of the evaluation after iteration 10, one [`EpisodeLog`]
//! per line. Each file is written beside and renamed into place, so a reader sees a whole file
//! or none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sandgym_env_api::{Done, ResetOptions, StepRecord};
use sandgym_policy::Tokenizer;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::error::io;
use crate::rollout::Episode;

/// Which episodes a log file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EpisodeKind {
    /// Played by a training iteration (sampled).
    Train,
    /// Played by an evaluation (greedy, on its fixed seeds).
    Eval,
    /// Played by a run's closing evaluation (greedy, the trained policy, every task of the
    /// evaluated split once where the env has a task list).
    Closing,
}

impl EpisodeKind {
    /// Its name in file names and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Eval => "eval",
            Self::Closing => "closing",
        }
    }
}

/// A stretch of an episode's tokens: the context the policy read (prompt, observations) as one
/// span of text, or one token the policy generated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenSpan {
    /// The text of the span.
    pub text: String,
    /// Whether the policy generated it (a single token then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generated: bool,
    /// The log-prob it was sampled with (generated tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprob: Option<f32>,
    /// The grammar allowed only this token (generated tokens).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    /// The policy turn it belongs to, from 0 (generated tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
}

/// One episode of a run as a person reads it: what it was, how it went, its Agent Template
/// steps and its tokens. One JSON line of an episode log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpisodeLog {
    /// Training or evaluation.
    pub kind: EpisodeKind,
    /// The iteration (for an evaluation: the iterations trained before it).
    pub iter: u32,
    /// Its place in the file, from 0.
    pub index: usize,
    /// Its group (task) within the iteration.
    pub group: usize,
    /// The reset seed.
    pub seed: u64,
    /// The options it was reset with (with `task`, the same episode again).
    #[serde(default)]
    pub options: ResetOptions,
    /// The task the env reset to, when its reset info names one.
    #[serde(default)]
    pub task: Option<String>,
    /// The instruction it started from.
    #[serde(default)]
    pub instruction: String,
    /// The sum of its turn rewards.
    pub reward: f64,
    /// Whether it succeeded.
    pub success: bool,
    /// Policy turns played.
    pub turns: usize,
    /// How it ended.
    pub done: Done,
    /// The env failure that ended it, if any.
    #[serde(default)]
    pub error: Option<String>,
    /// It ended because the context could not take another turn.
    #[serde(default)]
    pub out_of_context: bool,
    /// Each policy turn's reward.
    #[serde(default)]
    pub turn_rewards: Vec<f64>,
    /// Under a composed reward, each term summed over the episode.
    #[serde(default)]
    pub reward_terms: BTreeMap<String, f64>,
    /// The named parts of the terms (`term/part`), summed over the episode.
    #[serde(default)]
    pub reward_parts: BTreeMap<String, f64>,
    /// The Agent Template steps.
    #[serde(default)]
    pub records: Vec<StepRecord>,
    /// The tokens: context as spans of text, each generated token on its own.
    #[serde(default)]
    pub tokens: Vec<TokenSpan>,
}

impl EpisodeLog {
    /// The log of `episode`, the `index`-th of a `kind` batch at iteration `iter` reset with
    /// `options`, its tokens decoded with `tokenizer`.
    pub fn of(
        episode: &Episode,
        (kind, iter, index): (EpisodeKind, u32, usize),
        options: &ResetOptions,
        tokenizer: &Tokenizer,
    ) -> Result<Self> {
        Ok(Self {
            kind,
            iter,
            index,
            group: episode.group,
            seed: episode.seed,
            options: options.clone(),
            task: episode.task.clone(),
            instruction: episode
                .trajectory
                .records
                .first()
                .map(|r| r.instruction.clone())
                .unwrap_or_default(),
            reward: episode.total_reward(),
            success: episode.success,
            turns: episode.turns.len(),
            done: episode.done,
            error: episode.error.clone(),
            out_of_context: episode.out_of_context,
            turn_rewards: episode.turns.iter().map(|t| t.reward).collect(),
            reward_terms: episode.reward_terms.clone(),
            reward_parts: episode.reward_parts.clone(),
            records: episode.trajectory.records.clone(),
            tokens: spans(episode, tokenizer)?,
        })
    }
}

/// The tokens of `episode` as spans: each run of context tokens decoded as one text, each
/// generated token on its own with its log-prob, whether the grammar forced it, and its turn.
fn spans(episode: &Episode, tokenizer: &Tokenizer) -> Result<Vec<TokenSpan>> {
    let mut out = Vec::new();
    let mut context: Vec<u32> = Vec::new();
    let turn_of = |at: usize| {
        episode
            .turns
            .iter()
            .position(|t| (t.start..t.end).contains(&at))
    };
    // The context read since the last generated token, as one span.
    let flush = |context: &mut Vec<u32>, out: &mut Vec<TokenSpan>| -> Result<()> {
        if !context.is_empty() {
            out.push(TokenSpan {
                text: tokenizer.decode(context)?,
                generated: false,
                logprob: None,
                forced: false,
                turn: None,
            });
            context.clear();
        }
        Ok(())
    };
    for (at, &id) in episode.tokens.iter().enumerate() {
        if !episode.loss_mask.get(at).copied().unwrap_or(false) {
            context.push(id);
            continue;
        }
        flush(&mut context, &mut out)?;
        let forced = episode
            .allowed
            .get(at)
            .and_then(|a| a.as_ref())
            .is_some_and(|mask| mask.count() == 1);
        out.push(TokenSpan {
            text: tokenizer.decode(&[id])?,
            generated: true,
            logprob: episode.logprobs.get(at).copied(),
            forced,
            turn: turn_of(at),
        });
    }
    flush(&mut context, &mut out)?;
    Ok(out)
}

/// The file of the `kind` episodes of iteration `iter` in run directory `out`.
pub fn episode_log_path(out: &Path, kind: EpisodeKind, iter: u32) -> PathBuf {
    crate::RunDir::new(out)
        .episodes()
        .join(format!("{}-{iter:06}.jsonl", kind.as_str()))
}

/// Writes `episodes`, reset with `options`, as the `kind` log of iteration `iter` in run
/// directory `out`.
pub fn write_episode_log(
    out: &Path,
    (kind, iter): (EpisodeKind, u32),
    episodes: &[Episode],
    options: &ResetOptions,
    tokenizer: &Tokenizer,
) -> Result<()> {
    let logs = episodes
        .iter()
        .enumerate()
        .map(|(index, e)| EpisodeLog::of(e, (kind, iter, index), options, tokenizer))
        .collect::<Result<Vec<_>>>()?;
    write_episode_logs(out, (kind, iter), &logs)
}

/// Writes `logs` as the `kind` log of iteration `iter` in run directory `out` (beside, then
/// renamed into place).
fn write_episode_logs(
    out: &Path,
    (kind, iter): (EpisodeKind, u32),
    logs: &[EpisodeLog],
) -> Result<()> {
    let path = episode_log_path(out, kind, iter);
    let dir = crate::RunDir::new(out).episodes();
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let mut text = String::new();
    for log in logs {
        text.push_str(&serde_json::to_string(log).expect("an episode log serialises"));
        text.push('\n');
    }
    let tmp = path.with_extension("jsonl.tmp");
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandgym_policy::Turn;

    #[test]
    fn context_is_one_span_each_generated_token_its_own_with_logprob_turn_and_forcing() {
        let tokenizer = Tokenizer::train(
            ["the answer is forty two", "guess higher lower"]
                .into_iter()
                .map(String::from)
                .cycle()
                .take(50),
            300,
        )
        .unwrap();
        let context = tokenizer.encode("the answer is").unwrap();
        let generated = tokenizer.encode(" forty two").unwrap();
        let n = context.len();
        let vocab = tokenizer.vocab_size();
        let forced = sandgym_policy::TokenMask::only(generated[0] as usize, vocab);
        let open = sandgym_policy::TokenMask::from_bools(&vec![true; vocab]);
        let mut episode = Episode {
            tokens: [context.clone(), generated.clone(), context.clone()].concat(),
            loss_mask: [vec![false; n], vec![true; generated.len()], vec![false; n]].concat(),
            ..Episode::default()
        };
        episode.logprobs = vec![0.0; episode.tokens.len()];
        episode.allowed = vec![None; episode.tokens.len()];
        for (k, _) in generated.iter().enumerate() {
            episode.logprobs[n + k] = -0.5 * k as f32;
            episode.allowed[n + k] = Some(if k == 0 { forced.clone() } else { open.clone() });
        }
        episode.turns = vec![Turn {
            start: n,
            end: n + generated.len(),
            reward: 1.0,
        }];
        let spans = spans(&episode, &tokenizer).unwrap();
        assert_eq!(spans.len(), 2 + generated.len());
        assert_eq!(spans[0].text, "the answer is");
        assert!(!spans[0].generated && spans[0].logprob.is_none());
        let gen_spans = &spans[1..=generated.len()];
        assert!(gen_spans.iter().all(|s| s.generated && s.turn == Some(0)));
        assert!(gen_spans[0].forced, "only one token was allowed");
        assert!(gen_spans[1..].iter().all(|s| !s.forced));
        if generated.len() > 1 {
            assert_eq!(gen_spans[1].logprob, Some(-0.5));
        }
        let text: String = gen_spans.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(text.trim(), "forty two");
        assert!(!spans.last().unwrap().generated);

        let log = EpisodeLog::of(
            &episode,
            (EpisodeKind::Eval, 3, 1),
            &ResetOptions::default(),
            &tokenizer,
        )
        .unwrap();
        assert_eq!((log.iter, log.index, log.turns, log.reward), (3, 1, 1, 1.0));
        let back: EpisodeLog = serde_json::from_str(&serde_json::to_string(&log).unwrap()).unwrap();
        assert_eq!(back, log);
    }
}
