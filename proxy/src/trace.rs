//! Recorded traces become training episodes.
//!
//! The calls of one rollout merge into one token sequence while each new prompt extends the
//! previous prompt plus completion exactly; otherwise a new segment starts and the break is
//! counted as drift, classified by where the sequences part: inside the opening system/user
//! turns (a new context: a sub-agent, or the main agent after it), inside a tool output (the
//! history was compressed), inside an assistant turn (the harness's copy of the answer
//! re-tokenised differently from what was sampled), or elsewhere.

use std::collections::HashMap;
use std::sync::Arc;

use sandgym_chat_api::ChatRequest;
use sandgym_env_api::Done;
use sandgym_policy::{ActionLimits, Role, TokenMask, Tokenizer, ToolCallGrammar, replay_masks};
use sandgym_policy::{Episode, Turn};
use serde::{Deserialize, Serialize};

use crate::chat;
use crate::store::{CallRecord, TraceStore};
use crate::{ProxyError, Result};

/// Why a rollout's calls did not merge into one sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// A new conversation began (sub-agent, or back to the main agent).
    pub new_context: usize,
    /// An earlier tool output changed (history compression).
    pub compressed: usize,
    /// An earlier assistant turn came back tokenised differently.
    pub retokenised: usize,
    /// Any other mismatch.
    pub other: usize,
}

impl Drift {
    /// All breaks.
    pub fn total(&self) -> usize {
        self.new_context + self.compressed + self.retokenised + self.other
    }

    fn add(&mut self, other: &Drift) {
        self.new_context += other.new_context;
        self.compressed += other.compressed;
        self.retokenised += other.retokenised;
        self.other += other.other;
    }
}

/// What turning traces into episodes found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Rollouts read.
    pub rollouts: usize,
    /// Rollouts without a posted reward (left out).
    pub unrewarded: usize,
    /// Rollouts whose reward names a failure of the harness run (`info.error`: a crash, a
    /// tool-service or HTTP error mid-run); their episodes carry it as their `error`, so the
    /// trainer treats them as it treats env failures (`rollout.on_env_error`).
    #[serde(default)]
    pub failed: usize,
    /// Calls read.
    pub calls: usize,
    /// Calls whose tokens are in an episode exactly as sampled.
    pub calls_exact: usize,
    /// Calls that could not be used (upstream error, no token ids, ids the grammar rejects).
    pub calls_unusable: usize,
    /// Token sequences (episodes) produced.
    pub segments: usize,
    /// Generated tokens in the episodes.
    pub completion_tokens: usize,
    /// Prompt tokens that continued a previous call exactly (not re-sent as a new context).
    pub reused_prompt_tokens: usize,
    /// Segment breaks by cause.
    pub drift: Drift,
}

impl TraceStats {
    /// Accumulates `other` into `self`.
    pub fn merge(&mut self, other: &TraceStats) {
        self.rollouts += other.rollouts;
        self.unrewarded += other.unrewarded;
        self.failed += other.failed;
        self.calls += other.calls;
        self.calls_exact += other.calls_exact;
        self.calls_unusable += other.calls_unusable;
        self.segments += other.segments;
        self.completion_tokens += other.completion_tokens;
        self.reused_prompt_tokens += other.reused_prompt_tokens;
        self.drift.add(&other.drift);
    }
}

/// Turns a store's traces into episodes for the trainer.
#[derive(Debug)]
pub struct TraceReader {
    tokenizer: Tokenizer,
    limits: ActionLimits,
    vocab: usize,
    grammars: HashMap<String, Arc<ToolCallGrammar>>,
}

struct Segment {
    tokens: Vec<u32>,
    loss_mask: Vec<bool>,
    logprobs: Vec<f32>,
    allowed: Vec<Option<TokenMask>>,
    turns: Vec<Turn>,
}

impl Segment {
    fn start(prompt: &[u32]) -> Self {
        let n = prompt.len();
        Self {
            tokens: prompt.to_vec(),
            loss_mask: vec![false; n],
            logprobs: vec![0.0; n],
            allowed: vec![None; n],
            turns: Vec::new(),
        }
    }

    fn extend_prompt(&mut self, rest: &[u32]) {
        self.tokens.extend_from_slice(rest);
        self.loss_mask
            .extend(std::iter::repeat_n(false, rest.len()));
        self.logprobs.extend(std::iter::repeat_n(0.0, rest.len()));
        self.allowed.extend(std::iter::repeat_n(None, rest.len()));
    }

    fn push_completion(&mut self, ids: &[u32], logprobs: &[f32], masks: Vec<Option<TokenMask>>) {
        let start = self.tokens.len();
        self.tokens.extend_from_slice(ids);
        self.loss_mask.extend(std::iter::repeat_n(true, ids.len()));
        self.logprobs.extend_from_slice(logprobs);
        self.allowed.extend(masks);
        self.turns.push(Turn {
            start,
            end: self.tokens.len(),
            reward: 0.0,
        });
    }
}

impl TraceReader {
    /// A reader for traces generated by a server with `tokenizer` and `limits`.
    pub fn new(tokenizer: Tokenizer, limits: ActionLimits) -> Self {
        Self {
            vocab: tokenizer.vocab_size(),
            tokenizer,
            limits,
            grammars: HashMap::new(),
        }
    }

    fn masks(&mut self, call: &CallRecord, ids: &[u32]) -> Result<Vec<Option<TokenMask>>, String> {
        let request: ChatRequest =
            serde_json::from_str(&call.request).map_err(|e| format!("request: {e}"))?;
        let key = chat::grammar_key(&request);
        let grammar = match self.grammars.get(&key) {
            Some(g) => g.clone(),
            None => {
                let g = Arc::new(
                    chat::grammar(&self.tokenizer, &request, self.limits).map_err(|e| e.message)?,
                );
                self.grammars.insert(key, g.clone());
                g
            }
        };
        let mut matcher = grammar.matcher().map_err(|e| e.to_string())?;
        replay_masks(&mut matcher, ids, self.vocab).map_err(|e| e.to_string())
    }

    /// Where `prompt` leaves `segment`: the kind of turn of `segment` it first differs in.
    fn classify(&self, segment: &[u32], prompt: &[u32]) -> fn(&mut Drift) -> &mut usize {
        let common = segment
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let format = self.tokenizer.format();
        // The turns whose opening starts in the common part (or at the first differing token).
        let last = common.min(segment.len() - 1);
        let roles: Vec<Role> = (0..=last)
            .filter_map(|at| format.role_at(segment, at))
            .collect();
        let before: Vec<Role> = (0..common.min(segment.len()))
            .filter_map(|at| format.role_at(segment, at))
            .collect();
        let opening = before.iter().filter(|&&r| r == Role::User).count() <= 1
            && !before.contains(&Role::Assistant);
        let role = roles.last().copied();
        match role {
            _ if opening => |d| &mut d.new_context,
            Some(Role::Tool) => |d| &mut d.compressed,
            Some(Role::Assistant) => |d| &mut d.retokenised,
            _ => |d| &mut d.other,
        }
    }

    /// The episodes of `rollout`'s calls given its reward; `group` and `seed` label them.
    pub fn episodes(
        &mut self,
        calls: &[CallRecord],
        reward: f64,
        success: bool,
        group: usize,
        seed: u64,
    ) -> (Vec<Episode>, TraceStats) {
        let mut stats = TraceStats {
            rollouts: 1,
            calls: calls.len(),
            ..TraceStats::default()
        };
        let mut segments: Vec<Segment> = Vec::new();
        for call in calls {
            let (Some(prompt), Some(ids), Some(lps)) =
                (&call.prompt_ids, &call.completion_ids, &call.logprobs)
            else {
                stats.calls_unusable += 1;
                continue;
            };
            if call.status != 200 || ids.is_empty() || lps.len() != ids.len() || prompt.is_empty() {
                stats.calls_unusable += 1;
                continue;
            }
            let Ok(masks) = self.masks(call, ids) else {
                stats.calls_unusable += 1;
                continue;
            };
            match segments.last_mut() {
                Some(seg) if prompt.starts_with(&seg.tokens) => {
                    stats.reused_prompt_tokens += seg.tokens.len();
                    let rest = prompt[seg.tokens.len()..].to_vec();
                    seg.extend_prompt(&rest);
                }
                last => {
                    if let Some(seg) = last {
                        *self.classify(&seg.tokens, prompt)(&mut stats.drift) += 1;
                    }
                    segments.push(Segment::start(prompt));
                }
            }
            let seg = segments.last_mut().expect("a segment");
            seg.push_completion(ids, lps, masks);
            stats.calls_exact += 1;
            stats.completion_tokens += ids.len();
        }
        let episodes: Vec<Episode> = segments
            .into_iter()
            .filter(|s| !s.turns.is_empty())
            .map(|mut s| {
                if let Some(last) = s.turns.last_mut() {
                    last.reward = reward;
                }
                Episode {
                    group,
                    seed,
                    task: None,
                    tokens: s.tokens,
                    loss_mask: s.loss_mask,
                    logprobs: s.logprobs,
                    allowed: s.allowed,
                    turns: s.turns,
                    done: Done::Terminated,
                    success,
                    error: None,
                    out_of_context: false,
                    trajectory: Default::default(),
                    reward_terms: Default::default(),
                    reward_parts: Default::default(),
                }
            })
            .collect();
        stats.segments = episodes.len();
        (episodes, stats)
    }

    /// The episodes of every rollout in `rollouts` (`(id, group, seed)`) found in `store`, one
    /// list per rollout in order; rollouts without a reward are counted and get no episodes
    /// (a harness that died, or a proxy killed, before the reward was posted: what was
    /// answered stays in the store, nothing of it is trained). A reward whose `info.error`
    /// names a failed run marks that run's episodes with the error.
    pub fn read(
        &mut self,
        store: &TraceStore,
        rollouts: &[(String, usize, u64)],
    ) -> Result<(Vec<Vec<Episode>>, TraceStats)> {
        let mut all = Vec::new();
        let mut stats = TraceStats::default();
        for (id, group, seed) in rollouts {
            let calls = store.calls(id)?;
            let Some(reward) = store.reward(id)? else {
                stats.unrewarded += 1;
                all.push(Vec::new());
                continue;
            };
            // The harness posts the reward when its episode has ended.
            let info = reward.info.as_object().cloned().unwrap_or_default();
            let success = sandgym_env_api::episode_success(
                &info,
                sandgym_env_api::Done::Terminated,
                reward.reward,
            );
            let (mut eps, mut s) = self.episodes(&calls, reward.reward, success, *group, *seed);
            if let Some(error) = info.get("error").and_then(|e| e.as_str()) {
                s.failed = 1;
                for e in &mut eps {
                    e.error = Some(error.to_owned());
                }
            }
            if let Some(short) = eps.iter().find(|e| e.tokens.len() < 2) {
                return Err(ProxyError::Trace {
                    rollout: id.clone(),
                    seq: short.turns.len() as i64,
                    reason: "an episode with fewer than two tokens".into(),
                });
            }
            stats.merge(&s);
            all.push(eps);
        }
        Ok((all, stats))
    }
}
