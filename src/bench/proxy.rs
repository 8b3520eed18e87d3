//! `sandgym bench proxy`: the recording proxy's added latency against a fast upstream
//! ([`ProxyReport`]).
//!
//! A canned-answer upstream runs in this process; client threads send chat completions at a
//! fixed total rate, first straight to the upstream, then through the proxy (which records
//! every call in SQLite before it answers). The added latency is the difference of the two
//! latency percentiles; the proxy's own view (answer ready minus upstream time, recording
//! excluded) is reported next to it, and every answered call is checked to be in the store.

use std::time::{Duration, Instant};

use crate::approach::percentile;
use crate::proxy::http;
use crate::proxy::{Proxy, ProxyConfig, TraceStore};
use serde::{Deserialize, Serialize};
use serde_json::json;

const CLIENTS: usize = 8;

fn canned() -> Vec<u8> {
    json!({
        "id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": "fast",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "SELECT COUNT(*) FROM customers"},
            "token_ids": [5, 6, 7, 8],
            "logprobs": {"content": [
                {"token": "a", "logprob": -0.1}, {"token": "b", "logprob": -0.2},
                {"token": "c", "logprob": -0.3}, {"token": "d", "logprob": 0.0}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
        "prompt_token_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    })
    .to_string()
    .into_bytes()
}

fn request_body() -> String {
    json!({"model": "fast", "messages": [
        {"role": "system", "content": "You answer questions about a database."},
        {"role": "user", "content": "How many customers are there?"}]})
    .to_string()
}

/// Latencies (µs, sorted) of requests sent at `rate` per second for `budget` to `url(i)`.
fn load(
    rate: f64,
    budget: Duration,
    url: &(dyn Fn(usize) -> String + Sync),
) -> anyhow::Result<(Vec<u64>, f64)> {
    let body = request_body();
    let interval = Duration::from_secs_f64(CLIENTS as f64 / rate);
    let started = Instant::now();
    let results: Vec<anyhow::Result<Vec<u64>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let body = body.clone();
                scope.spawn(move || {
                    let agent = ureq::Agent::new_with_defaults();
                    let mut lat = Vec::new();
                    // Stagger the clients over one interval.
                    let mut next = started + interval.mul_f64(c as f64 / CLIENTS as f64);
                    let mut i = 0;
                    while next.duration_since(started) < budget {
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let t = Instant::now();
                        let mut resp = agent
                            .post(&url(c * 1_000_000 + i))
                            .header("content-type", "application/json")
                            .send(&body)?;
                        resp.body_mut().read_to_vec()?;
                        lat.push(t.elapsed().as_micros() as u64);
                        next += interval;
                        i += 1;
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort_unstable();
    let rps = all.len() as f64 / elapsed;
    Ok((all, rps))
}

fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}

/// What `bench proxy` measured: latencies in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyReport {
    /// What the proxy adds at the median (proxied minus direct).
    pub p50_ms: f64,
    /// What it adds at the 99th percentile.
    pub p99_ms: f64,
    /// Requests per second reached through the proxy.
    pub requests_per_s: f64,
    /// The rate asked for.
    pub target_requests_per_s: f64,
    /// Requests sent through the proxy.
    pub requests: usize,
    /// Straight to the upstream, median.
    pub direct_p50_ms: f64,
    /// Straight to the upstream, 99th percentile.
    pub direct_p99_ms: f64,
    /// Through the proxy, median.
    pub proxied_p50_ms: f64,
    /// Through the proxy, 99th percentile.
    pub proxied_p99_ms: f64,
    /// The proxy's own view (answer ready minus upstream time), median.
    pub proxy_own_p50_ms: f64,
    /// The same, 99th percentile.
    pub proxy_own_p99_ms: f64,
    /// Answered calls missing from the store (0 when nothing is lost).
    pub lost_traces: i64,
}

/// Runs the benchmark for `budget` per phase at `rate` requests/s.
pub fn run(budget: Duration, rate: f64) -> anyhow::Result<ProxyReport> {
    let answer = canned();
    let upstream = http::Server::start("127.0.0.1:0", move |_| {
        http::Response::bytes(200, answer.clone())
    })?;
    let up_addr = upstream.addr();
    let dir = std::env::temp_dir().join(format!("sandgym-bench-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("traces.db");
    let _ = std::fs::remove_file(&db);
    let proxy = Proxy::start(&ProxyConfig::new(format!("http://{up_addr}")), &db)?;
    let direct_url = format!("http://{up_addr}/v1/chat/completions");
    let proxy_addr = proxy.addr();
    // Warm up connections and SQLite.
    load(rate, Duration::from_millis(200), &|_| direct_url.clone())?;
    load(rate, Duration::from_millis(200), &|i| {
        format!("http://{proxy_addr}/rollouts/warm-{i}/v1/chat/completions")
    })?;
    let (direct, _) = load(rate, budget, &|_| direct_url.clone())?;
    let (via, rps) = load(rate, budget, &|i| {
        format!("http://{proxy_addr}/rollouts/bench-{i}/v1/chat/completions")
    })?;
    drop(proxy);
    drop(upstream);
    let store = TraceStore::open(&db)?;
    let recorded = store.count()?;
    let warm: usize = store
        .rollouts()?
        .iter()
        .filter(|r| r.starts_with("warm-"))
        .count();
    let own = store.added_latencies_us()?;
    let _ = std::fs::remove_dir_all(&dir);
    let added = |q: f64| percentile(&via, q) as i64 - percentile(&direct, q) as i64;
    Ok(ProxyReport {
        p50_ms: ms(added(0.5)),
        p99_ms: ms(added(0.99)),
        requests_per_s: rps.round(),
        target_requests_per_s: rate,
        requests: via.len(),
        direct_p50_ms: ms(percentile(&direct, 0.5) as i64),
        direct_p99_ms: ms(percentile(&direct, 0.99) as i64),
        proxied_p50_ms: ms(percentile(&via, 0.5) as i64),
        proxied_p99_ms: ms(percentile(&via, 0.99) as i64),
        proxy_own_p50_ms: ms(percentile(&own, 0.5) as i64),
        proxy_own_p99_ms: ms(percentile(&own, 0.99) as i64),
        lost_traces: via.len() as i64 - (recorded as i64 - warm as i64),
    })
}
