//! `sandgym bench serve`'s conversation case: agents' multi-turn conversations at the policy
//! server, with its cache of finished generations and without it.
//!
//! An agent sends each call as its whole conversation so far. With the cache
//! ([`ServerConfig::prefix_cache_bytes`]) a call encodes only what its conversation added
//! since the last one; without it, everything again. Both servers serve the same model the
//! same greedy conversations, so the difference is the cache alone.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ms_of_us as ms;
use super::ratio;
use crate::approach::percentile;
use crate::policy::{Cpu, PolicyModel, Tokenizer};
use crate::proxy::{PolicyServer, ServerConfig};

/// A tool result's text: what a lookup of `key` returned, about 400 characters.
fn tool_output(key: &str, turn: usize) -> String {
    let line = format!("row {turn}: {key} = value {turn}, status open, owner support team; ");
    line.repeat(400 / line.len() + 1)
}

/// One agent's conversation, `turns` calls long; each call's latency (µs).
fn converse(url: &str, agent: usize, turns: usize, max_tokens: u32) -> anyhow::Result<Vec<u64>> {
    let client = ureq::Agent::new_with_defaults();
    let tools = json!([{"type": "function", "function": {
        "name": "lookup", "description": "Look a key up in the records.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                       "required": ["key"]}}}]);
    let mut messages = vec![
        json!({"role": "system", "content": "You are a support agent. Look records up with \
               the lookup tool before you answer, and answer in one sentence."}),
        json!({"role": "user", "content": format!("Customer {agent} asks where order \
               {agent}-{} is and when it will arrive.", agent * 7)}),
    ];
    let mut latencies = Vec::with_capacity(turns);
    for turn in 0..turns {
        let body = json!({"messages": messages, "tools": tools, "temperature": 0.0,
                          "max_tokens": max_tokens})
        .to_string();
        let started = Instant::now();
        let mut resp = client
            .post(url)
            .header("content-type", "application/json")
            .send(&body)?;
        let text = resp.body_mut().read_to_string()?;
        latencies.push(started.elapsed().as_micros() as u64);
        let answer: Value = serde_json::from_str(&text)?;
        let message = answer["choices"][0]["message"].clone();
        anyhow::ensure!(message.is_object(), "no message in the answer: {text}");
        let call = message["tool_calls"][0]["id"].as_str().map(str::to_owned);
        messages.push(message);
        messages.push(match call {
            Some(id) => json!({"role": "tool", "tool_call_id": id,
                               "content": tool_output("order", turn)}),
            None => json!({"role": "user", "content": format!("Please check again. {}",
                                                             tool_output("note", turn))}),
        });
    }
    Ok(latencies)
}

/// The conversations against one server: every call's latency (µs), the wall time (µs) and
/// the share of prompt tokens its cache served.
fn against(
    model: &PolicyModel<Cpu>,
    tokenizer: &Tokenizer,
    prefix_cache_bytes: usize,
    agents: usize,
    turns: usize,
) -> anyhow::Result<(Vec<u64>, u64, f64)> {
    let server = PolicyServer::start(
        model.clone(),
        tokenizer.clone(),
        ServerConfig {
            max_batch: agents,
            prefix_cache_bytes,
            ..ServerConfig::default()
        },
    )?;
    let url = format!("{}/v1/chat/completions", server.url());
    let started = Instant::now();
    let runs: Vec<anyhow::Result<Vec<u64>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..agents)
            .map(|a| {
                let url = url.clone();
                scope.spawn(move || converse(&url, a, turns, MAX_TOKENS))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a conversation's thread panicked")))
            })
            .collect()
    });
    let wall = started.elapsed().as_micros() as u64;
    let mut calls = Vec::new();
    for run in runs {
        calls.extend(run?);
    }
    calls.sort_unstable();
    let stats = server.prefix_stats();
    let share = stats.reused_tokens as f64 / stats.prompt_tokens.max(1) as f64;
    Ok((calls, wall, (share * 1000.0).round() / 1000.0))
}

/// Most tokens of each answer.
const MAX_TOKENS: u32 = 48;

/// What the conversation case measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationReport {
    /// Conversations at a time.
    pub agents: usize,
    /// Calls per conversation.
    pub turns: usize,
    /// Most tokens of each answer.
    pub max_tokens: u32,
    /// All conversations, with the cache (ms).
    pub cached_wall_ms: f64,
    /// All conversations, without it (ms).
    pub uncached_wall_ms: f64,
    /// Without over with.
    pub speedup: f64,
    /// One call, median, with the cache (ms).
    pub cached_call_p50_ms: f64,
    /// One call, median, without it (ms).
    pub uncached_call_p50_ms: f64,
    /// Share of the prompt tokens the cache served instead of encoding them.
    pub reused_share: f64,
}

/// `agents` conversations of `turns` calls at a time, against a server with the cache and
/// one without.
pub fn run(
    model: &PolicyModel<Cpu>,
    tokenizer: &Tokenizer,
    agents: usize,
    turns: usize,
) -> anyhow::Result<ConversationReport> {
    let cache = ServerConfig::default().prefix_cache_bytes;
    let (with, with_wall, reused_share) = against(model, tokenizer, cache, agents, turns)?;
    let (without, without_wall, _) = against(model, tokenizer, 0, agents, turns)?;
    Ok(ConversationReport {
        agents,
        turns,
        max_tokens: MAX_TOKENS,
        cached_wall_ms: ms(with_wall),
        uncached_wall_ms: ms(without_wall),
        speedup: ratio(without_wall as f64, with_wall as f64),
        cached_call_p50_ms: ms(percentile(&with, 0.5)),
        uncached_call_p50_ms: ms(percentile(&without, 0.5)),
        reused_share,
    })
}
