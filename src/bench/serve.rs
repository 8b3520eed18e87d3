//! `sandgym bench serve`: a short request's latency at the policy server, alone and while a
//! batch of long requests is generating (several short requests arriving one after another) (the server batches continuously: a request arriving
//! during a long batch joins it at its next decode step).

use std::time::{Duration, Instant};

use crate::ModelSource;
use crate::approach::percentile;
use crate::policy::Cpu;
use crate::proxy::{PolicyServer, ServerConfig};
use crate::training::{ModelChoice, initial_policy};
use serde::{Deserialize, Serialize};

use super::conversation::ConversationReport;
use super::ms_of_us as ms;
use serde_json::{Value, json};

fn body(max_tokens: u32) -> String {
    json!({"messages": [{"role": "user", "content": "Say something."}],
           "max_tokens": max_tokens, "temperature": 1.0})
    .to_string()
}

/// One request's latency (µs) and its completion tokens.
fn call(agent: &ureq::Agent, url: &str, body: &str) -> anyhow::Result<(u64, u64)> {
    let started = Instant::now();
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)?;
    let text = resp.body_mut().read_to_string()?;
    let took = started.elapsed().as_micros() as u64;
    let v: Value = serde_json::from_str(&text)?;
    let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
    Ok((took, tokens))
}

/// What `bench serve` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeReport {
    /// The model served.
    pub model: ModelSource,
    /// Rounds measured.
    pub rounds: usize,
    /// Long requests per round.
    pub long_requests: usize,
    /// Their token budget.
    pub long_max_tokens: u32,
    /// The short request alone, median (ms).
    pub short_solo_p50_ms: f64,
    /// Short requests per round while the long ones generate, arriving
    /// [`SHORT_GAP_MS`] apart from 20 ms after the long ones.
    pub short_requests_per_round: usize,
    /// A short request while the long ones generate, median (ms).
    pub short_behind_long_p50_ms: f64,
    /// The same, 99th percentile (ms).
    pub short_behind_long_p99_ms: f64,
    /// The same, slowest (ms).
    pub short_behind_long_max_ms: f64,
    /// Behind-long over solo, at the median.
    pub ratio_p50: f64,
    /// The long requests, median (ms).
    pub long_p50_ms: f64,
    /// Tokens the long requests made, mean (the short one was behind them only if they
    /// outlasted it).
    pub long_tokens_mean: f64,
    /// Agents' multi-turn conversations with the server's cache of finished generations and
    /// without it.
    pub conversation: ConversationReport,
}

/// Conversations at a time in the conversation case (as many as a harness runs at once).
pub const CONVERSATIONS: usize = 4;

/// Calls per conversation in the conversation case.
pub const TURNS: usize = 6;

/// Milliseconds between the arrivals of a round's short requests.
pub const SHORT_GAP_MS: u64 = 10;

/// Runs `rounds` of: the short request alone, then `shorts` of them arriving one after another
/// while `long` requests of `long_tokens` tokens generate.
pub fn run(
    model: &ModelSource,
    rounds: usize,
    long: usize,
    long_tokens: u32,
    shorts: usize,
) -> anyhow::Result<ServeReport> {
    let shorts = shorts.max(1);
    let choice = ModelChoice {
        model: model.clone(),
        lora_rank: if model.is_pretrained() { 8 } else { 0 },
    };
    let (_, policy, tokenizer) = initial_policy::<Cpu>(&choice, 0, &Default::default())?;
    let policy = policy.for_inference();
    let conversation = super::conversation::run(&policy, &tokenizer, CONVERSATIONS, TURNS)?;
    let server = PolicyServer::start(
        policy,
        tokenizer,
        ServerConfig {
            // Room for the long batch and the short requests beside it.
            max_batch: long + shorts,
            ..ServerConfig::default()
        },
    )?;
    let url = format!("{}/v1/chat/completions", server.url());
    let agent = ureq::Agent::new_with_defaults();
    let short = body(8);
    // Warm up (first use of each shape).
    call(&agent, &url, &short)?;
    let mut solo = Vec::new();
    let mut behind = Vec::new();
    let mut long_us = Vec::new();
    let mut long_tokens_made = Vec::new();
    for _ in 0..rounds {
        solo.push(call(&agent, &url, &short)?.0);
        let long_body = body(long_tokens);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| -> anyhow::Result<()> {
            for _ in 0..long {
                let (url, long_body, tx) = (url.clone(), long_body.clone(), tx.clone());
                scope.spawn(move || {
                    let agent = ureq::Agent::new_with_defaults();
                    let _ = tx.send(call(&agent, &url, &long_body).map_err(|e| e.to_string()));
                });
            }
            // The short requests arrive once the long batch is generating, one after another.
            let waits: Vec<_> = (0..shorts as u64)
                .map(|i| {
                    let (url, short) = (url.clone(), short.clone());
                    scope.spawn(move || {
                        std::thread::sleep(Duration::from_millis(20 + i * SHORT_GAP_MS));
                        let agent = ureq::Agent::new_with_defaults();
                        call(&agent, &url, &short).map(|(us, _)| us)
                    })
                })
                .collect();
            for wait in waits {
                let us = wait
                    .join()
                    .map_err(|_| anyhow::anyhow!("a short request's thread panicked"))??;
                behind.push(us);
            }
            Ok(())
        })?;
        drop(tx);
        for r in rx {
            let (us, tokens) = r.map_err(anyhow::Error::msg)?;
            long_us.push(us);
            long_tokens_made.push(tokens);
        }
    }
    solo.sort_unstable();
    behind.sort_unstable();
    long_us.sort_unstable();
    let (s50, b50) = (percentile(&solo, 0.5), percentile(&behind, 0.5));
    Ok(ServeReport {
        model: model.clone(),
        rounds,
        long_requests: long,
        long_max_tokens: long_tokens,
        short_solo_p50_ms: ms(s50),
        short_requests_per_round: shorts,
        short_behind_long_p50_ms: ms(b50),
        short_behind_long_p99_ms: ms(percentile(&behind, 0.99)),
        short_behind_long_max_ms: ms(*behind.last().unwrap_or(&0)),
        ratio_p50: (b50 as f64 / s50.max(1) as f64 * 100.0).round() / 100.0,
        long_p50_ms: ms(percentile(&long_us, 0.5)),
        long_tokens_mean: long_tokens_made.iter().sum::<u64>() as f64
            / long_tokens_made.len().max(1) as f64,
        conversation,
    })
}
