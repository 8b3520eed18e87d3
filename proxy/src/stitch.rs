//! The two ways a rollout whose context broke becomes training samples: each segment its own
//! sample, or the segments stitched into one trajectory.
//!
//! A harness breaks its context (a sub-agent's conversation, a compressed history, an answer
//! re-tokenised), so [`TraceReader`](crate::TraceReader) gives one token sequence per segment.
//! Peers train across such breaks in one of two ways, and [`Samples`] names them.

use std::fmt;
use std::str::FromStr;

use sandgym_policy::{Episode, Turn};
use serde::{Deserialize, Serialize};

/// How a rollout of several segments is trained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Samples {
    /// Each segment is its own sample, with the rollout's reward on its last turn: every turn
    /// is trained in exactly the context it was sampled in, and a rollout of k segments counts
    /// k times in its group's statistics.
    #[default]
    Segments,
    /// The segments are concatenated in call order into one sample per rollout (see
    /// [`stitch`]): one sample per rollout in its group, but every turn after the first break
    /// is trained behind a context it was not sampled in (the earlier segments precede it);
    /// the clipped importance ratio only partly corrects that.
    Stitched,
}

impl FromStr for Samples {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "segments" => Ok(Self::Segments),
            "stitched" => Ok(Self::Stitched),
            other => Err(format!(
                "unknown sample kind {other:?} (segments or stitched)"
            )),
        }
    }
}

impl fmt::Display for Samples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Segments => "segments",
            Self::Stitched => "stitched",
        })
    }
}

/// What stitching a rollout's segments gave.
#[derive(Clone, Debug, Default)]
pub struct Stitched {
    /// The stitched episodes: one per rollout unless the segments together outgrow
    /// `max_tokens`.
    pub episodes: Vec<Episode>,
    /// Turns now trained behind a context they were not sampled in (those of every segment
    /// joined behind another).
    pub moved_turns: usize,
}

/// One rollout's `segments` (in call order, as [`TraceReader::read`] gives them) concatenated
/// into one episode: tokens, loss masks, sampled log-probs and constraint masks in order, each
/// turn shifted to its new place, and the rollout's reward only on the very last turn. A
/// segment that would take the episode past `max_tokens` (the model's context) starts a new
/// episode instead.
///
/// [`TraceReader::read`]: crate::TraceReader::read
pub fn stitch(segments: Vec<Episode>, max_tokens: usize) -> Stitched {
    let mut out = Stitched::default();
    let reward = segments
        .last()
        .and_then(|e| e.turns.last())
        .map_or(0.0, |t| t.reward);
    for mut segment in segments {
        match out.episodes.last_mut() {
            Some(episode) if episode.tokens.len() + segment.tokens.len() <= max_tokens => {
                let offset = episode.tokens.len();
                out.moved_turns += segment.turns.len();
                episode.tokens.append(&mut segment.tokens);
                episode.loss_mask.append(&mut segment.loss_mask);
                episode.logprobs.append(&mut segment.logprobs);
                episode.allowed.append(&mut segment.allowed);
                episode.turns.extend(segment.turns.iter().map(|t| Turn {
                    start: t.start + offset,
                    end: t.end + offset,
                    reward: t.reward,
                }));
            }
            _ => out.episodes.push(segment),
        }
    }
    // The rollout's reward once, on its very last turn.
    for t in out.episodes.iter_mut().flat_map(|e| e.turns.iter_mut()) {
        t.reward = 0.0;
    }
    if let Some(t) = out.episodes.last_mut().and_then(|e| e.turns.last_mut()) {
        t.reward = reward;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(tokens: &[u32], generated: std::ops::Range<usize>, reward: f64) -> Episode {
        let n = tokens.len();
        let mask: Vec<bool> = (0..n).map(|i| generated.contains(&i)).collect();
        Episode {
            tokens: tokens.to_vec(),
            logprobs: mask.iter().map(|&m| if m { -0.5 } else { 0.0 }).collect(),
            allowed: mask
                .iter()
                .map(|&m| m.then(|| sandgym_policy::TokenMask::from_bools(&[true; 8])))
                .collect(),
            loss_mask: mask,
            turns: vec![Turn {
                start: generated.start,
                end: generated.end,
                reward,
            }],
            ..Episode::default()
        }
    }

    #[test]
    fn segments_become_one_episode_with_the_reward_once_at_the_end() {
        let a = segment(&[1, 2, 3, 4], 2..4, 1.0);
        let b = segment(&[5, 6, 7], 1..3, 1.0);
        let s = stitch(vec![a.clone(), b.clone()], 100);
        assert_eq!(s.episodes.len(), 1);
        assert_eq!(s.moved_turns, 1);
        let e = &s.episodes[0];
        assert_eq!(e.tokens, [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(e.loss_mask, [false, false, true, true, false, true, true]);
        assert_eq!(e.logprobs.len(), 7);
        assert_eq!(e.allowed.iter().filter(|m| m.is_some()).count(), 4);
        // Each turn still spans the tokens it generated.
        let spans: Vec<&[u32]> = e.turns.iter().map(|t| &e.tokens[t.start..t.end]).collect();
        assert_eq!(spans, [&[3, 4][..], &[6, 7][..]]);
        let rewards: Vec<f64> = e.turns.iter().map(|t| t.reward).collect();
        assert_eq!(rewards, [0.0, 1.0]);
        assert_eq!(e.total_reward(), a.total_reward());
    }

    #[test]
    fn a_segment_past_the_context_starts_a_new_episode() {
        let parts = vec![
            segment(&[1, 2, 3], 1..3, 0.5),
            segment(&[4, 5, 6], 2..3, 0.5),
            segment(&[7, 8, 9], 0..3, 0.5),
        ];
        let s = stitch(parts, 6);
        assert_eq!(s.episodes.len(), 2);
        assert_eq!(s.moved_turns, 1);
        assert_eq!(s.episodes[0].tokens.len(), 6);
        let rewards: Vec<f64> = s
            .episodes
            .iter()
            .flat_map(|e| e.turns.iter().map(|t| t.reward))
            .collect();
        assert_eq!(rewards, [0.0, 0.0, 0.5]);
        assert!(stitch(Vec::new(), 6).episodes.is_empty());
    }

    #[test]
    fn sample_kinds_parse_and_print() {
        for kind in [Samples::Segments, Samples::Stitched] {
            assert_eq!(kind.to_string().parse::<Samples>(), Ok(kind));
        }
        assert!(
            "whole"
                .parse::<Samples>()
                .unwrap_err()
                .contains("segments or stitched")
        );
    }
}
