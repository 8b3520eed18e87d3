//! `sandgym bench serve`: a short request's latency at the policy server, alone and while a
//! batch of long requests is generating (several short requests arriving one after another),
//! and the long requests' own latency. The server batches continuously, and a short request
//! arriving during a long batch decodes in the express lane, stepped ahead of the long batch
//! ([`crate::proxy::Express`], the server's default).

use std::time::{Duration, Instant};

use crate::ModelSource;
use crate::approach::percentile;
use crate::policy::Cpu;
use crate::proxy::{Express, PolicyServer, ServerConfig};
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

/// A short request's latency alone and behind a long batch, and the long requests', at one
/// server setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latencies {
    /// The short request alone, median (ms).
    pub short_solo_p50_ms: f64,
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
    /// A long request's time over the tokens it made, median (ms per token).
    pub long_ms_per_token_p50: f64,
    /// Tokens the long requests made, mean (the short one was behind them only if they
    /// outlasted it).
    pub long_tokens_mean: f64,
    /// Decode steps the express lane ran alone while the long batch waited.
    pub express_steps: u64,
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
    /// Short requests per round while the long ones generate, arriving
    /// [`SHORT_GAP_MS`] apart from 20 ms after the long ones.
    pub short_requests_per_round: usize,
    /// The server as it starts by default (short requests beside a long batch in the
    /// express lane).
    pub express: Latencies,
    /// The same server with the express lane off: short requests join the long batch.
    pub joined: Latencies,
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
    // Each setting its own server, the first stopped before the second starts.
    let measure = |express: Express| -> anyhow::Result<Latencies> {
        let server = PolicyServer::start(
            policy.clone(),
            tokenizer.clone(),
            ServerConfig {
                // Room for the long batch and the short requests beside it.
                max_batch: long + shorts,
                express,
                ..ServerConfig::default()
            },
        )?;
        latencies(&server, rounds, long, long_tokens, shorts)
    };
    let express = measure(Express::default())?;
    let joined = measure(Express {
        tokens: 0,
        ..Express::default()
    })?;
    Ok(ServeReport {
        model: model.clone(),
        rounds,
        long_requests: long,
        long_max_tokens: long_tokens,
        short_requests_per_round: shorts,
        express,
        joined,
        conversation,
    })
}

/// `rounds` of `long` requests of `long_tokens` tokens with `shorts` short ones arriving
/// behind them, at `server`.
fn latencies(
    server: &PolicyServer,
    rounds: usize,
    long: usize,
    long_tokens: u32,
    shorts: usize,
) -> anyhow::Result<Latencies> {
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
    // Microseconds per token of each long request (its length differs between settings:
    // batches of other shapes round differently, so the same seed samples other tokens).
    let mut long_us_per_token: Vec<u64> = long_us
        .iter()
        .zip(&long_tokens_made)
        .map(|(&us, &tokens)| us / tokens.max(1))
        .collect();
    long_us_per_token.sort_unstable();
    long_us.sort_unstable();
    let (s50, b50) = (percentile(&solo, 0.5), percentile(&behind, 0.5));
    Ok(Latencies {
        short_solo_p50_ms: ms(s50),
        short_behind_long_p50_ms: ms(b50),
        short_behind_long_p99_ms: ms(percentile(&behind, 0.99)),
        short_behind_long_max_ms: ms(*behind.last().unwrap_or(&0)),
        ratio_p50: (b50 as f64 / s50.max(1) as f64 * 100.0).round() / 100.0,
        long_p50_ms: ms(percentile(&long_us, 0.5)),
        long_ms_per_token_p50: ms(percentile(&long_us_per_token, 0.5)),
        long_tokens_mean: long_tokens_made.iter().sum::<u64>() as f64
            / long_tokens_made.len().max(1) as f64,
        express_steps: server.express_steps(),
    })
}
