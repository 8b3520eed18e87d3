//! A load generator for env servers: many concurrent WebSocket sessions (or HTTP clients)
//! playing episodes against a server, with the round-trip latency of every request. What
//! `sandgym bench env-server` measures.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::ServeError;

/// How to load a server.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server's base URL (`http://host:port`).
    pub url: String,
    /// Concurrent sessions (WebSocket) or clients (HTTP).
    pub sessions: usize,
    /// How long to keep playing once every session is open.
    pub duration: Duration,
    /// The step action every session sends (an Agent Template action).
    pub action: Value,
    /// Steps per episode at most before a new reset.
    pub steps_per_episode: usize,
    /// Pacing: each session sends a request at most this often (open loop, start times
    /// staggered across sessions), so the server sees `sessions / interval` requests per
    /// second; `None` sends the next one as soon as the answer comes (closed loop: the
    /// latency is then mostly queueing).
    pub interval: Option<Duration>,
    /// Stop once this many episodes have started across all sessions (`duration` then only
    /// bounds the run): a soak of a fixed size. Its latencies are not kept (4 bytes a
    /// request would otherwise grow the process a soak measures); the report's percentiles
    /// are then 0.
    pub episodes: Option<usize>,
}

/// What a load run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadReport {
    /// Sessions asked for.
    pub sessions: usize,
    /// Sessions that opened and were served to the end.
    pub sessions_held: usize,
    /// Sessions the server refused or lost (the first error of each, counted by message).
    pub session_errors: Vec<(String, usize)>,
    /// Requests answered (resets and steps).
    pub requests: usize,
    /// Steps answered.
    pub steps: usize,
    /// Episodes started.
    pub episodes: usize,
    /// Requests answered per second over the measured time.
    pub requests_per_s: f64,
    /// Median round trip of a request, ms (each session's first request left out: see
    /// `first_p99_ms`).
    pub p50_ms: f64,
    /// 99th percentile of it, ms.
    pub p99_ms: f64,
    /// 99th percentile of each session's first request (its first reset, which finds a
    /// fresh env), ms.
    pub first_p99_ms: f64,
    /// The warm-up, s: every WebSocket session opened and its first reset answered (HTTP:
    /// 0, its clients start on the clock).
    pub warmup_s: f64,
    /// The measured time, s.
    pub wall_s: f64,
}

/// One session's tally.
#[derive(Default)]
struct Tally {
    /// Round trips after the first.
    latencies_us: Vec<u32>,
    /// The first request's round trip.
    first_us: Option<u32>,
    /// Requests answered (with or without their latency kept).
    answered: usize,
    steps: usize,
    episodes: usize,
    error: Option<String>,
}

impl Tally {
    /// Keeps one round trip: the session's first apart from the others.
    fn record(&mut self, us: u32) {
        if self.first_us.is_none() {
            self.first_us = Some(us);
        } else {
            self.latencies_us.push(us);
        }
    }
}

fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

fn report(config: &LoadConfig, tallies: Vec<Tally>, warmup_s: f64, wall_s: f64) -> LoadReport {
    let mut latencies: Vec<u32> = Vec::new();
    let mut firsts: Vec<u32> = Vec::new();
    let mut errors: std::collections::BTreeMap<String, usize> = Default::default();
    let mut held = 0;
    let (mut steps, mut episodes, mut answered) = (0, 0, 0);
    for t in tallies {
        latencies.extend(&t.latencies_us);
        firsts.extend(t.first_us);
        answered += t.answered;
        steps += t.steps;
        episodes += t.episodes;
        match t.error {
            Some(e) => *errors.entry(e).or_default() += 1,
            None => held += 1,
        }
    }
    latencies.sort_unstable();
    firsts.sort_unstable();
    LoadReport {
        sessions: config.sessions,
        sessions_held: held,
        session_errors: errors.into_iter().collect(),
        requests: answered,
        steps,
        episodes,
        requests_per_s: answered as f64 / wall_s.max(1e-9),
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        first_p99_ms: percentile(&firsts, 0.99),
        warmup_s,
        wall_s,
    }
}

fn since_us(start: Instant) -> u32 {
    start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32
}

/// The error frame's message, or why the answer is not an observation.
fn check_answer(text: &str) -> Result<bool, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match v["type"].as_str() {
        Some("observation") => Ok(v["data"]["done"].as_bool().unwrap_or(false)),
        Some("error") => Err(format!(
            "{}: {}",
            v["data"]["code"].as_str().unwrap_or("?"),
            v["data"]["message"].as_str().unwrap_or("?")
        )),
        other => Err(format!("unexpected frame type {other:?}")),
    }
}

/// A session's WebSocket.
type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends one frame and waits for its answer (pings and pongs skipped); the error says why
/// the session ended.
async fn round_trip(socket: &mut Socket, frame: &str) -> Result<String, String> {
    socket
        .send(Message::text(frame))
        .await
        .map_err(|e| format!("send: {e}"))?;
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(other)) => return Err(format!("unexpected message {other:?}")),
            Some(Err(e)) => return Err(format!("receive: {e}")),
            None => return Err("the server closed the session".into()),
        }
    }
}

/// Runs `config.sessions` WebSocket sessions at once. Warm-up, before the clock starts: every
/// session connects, then sends its first reset, all at once (that reset finds a fresh env,
/// whose first episode costs the most; its round trip is `first_p99_ms`). Then, for
/// `config.duration`, each session steps and resets, as fast as answers come or at its pace.
/// A held session is one that was served to the end.
pub fn run_ws(config: &LoadConfig) -> Result<LoadReport, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let ws = format!("{}/ws", config.url.replacen("http://", "ws://", 1));
    runtime.block_on(async {
        let warmup = Instant::now();
        let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let limit = config.episodes;
        let more = {
            let started = started.clone();
            move || {
                let n = started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                limit.is_none_or(|limit| n < limit)
            }
        };
        let warmed = futures_util::future::join_all((0..config.sessions).map(|i| {
            let (ws, more) = (ws.clone(), more.clone());
            async move {
                let mut tally = Tally::default();
                let reset = json!({"type": "reset", "data": {"seed": i}}).to_string();
                let mut socket = match tokio_tungstenite::connect_async(ws).await {
                    Ok((socket, _)) => socket,
                    Err(e) => {
                        tally.error = Some(format!("connect: {e}"));
                        return (tally, None, false);
                    }
                };
                more();
                tally.episodes += 1;
                let sent = Instant::now();
                let done = match round_trip(&mut socket, &reset)
                    .await
                    .map(|a| check_answer(&a))
                {
                    Ok(Ok(done)) => done,
                    Ok(Err(e)) | Err(e) => {
                        tally.error = Some(e);
                        return (tally, None, false);
                    }
                };
                tally.first_us = Some(since_us(sent));
                tally.answered += 1;
                (tally, Some(socket), done)
            }
        }))
        .await;
        let warmup_s = warmup.elapsed().as_secs_f64();
        let start = Instant::now();
        let deadline = tokio::time::Instant::now() + config.duration;
        let tasks = warmed
            .into_iter()
            .enumerate()
            .map(|(i, (mut tally, socket, mut done))| {
                let config = config.clone();
                let more = more.clone();
                async move {
                    let Some(mut socket) = socket else {
                        return tally;
                    };
                    let reset = json!({"type": "reset", "data": {"seed": i}}).to_string();
                    let step = json!({"type": "step", "data": config.action}).to_string();
                    let mut next = config.interval.map(|iv| {
                        tokio::time::Instant::now() + iv.mul_f64(i as f64 / config.sessions as f64)
                    });
                    // The first episode's reset was the warm-up's: it goes on with its steps.
                    let mut n = 1;
                    loop {
                        if done || n > config.steps_per_episode {
                            if tokio::time::Instant::now() >= deadline || !more() {
                                break;
                            }
                            tally.episodes += 1;
                            n = 0;
                        }
                        if let (Some(at), Some(iv)) = (next.as_mut(), config.interval) {
                            tokio::time::sleep_until(*at).await;
                            *at += iv;
                        }
                        if tokio::time::Instant::now() >= deadline {
                            break;
                        }
                        let frame = if n == 0 { &reset } else { &step };
                        let sent = Instant::now();
                        match round_trip(&mut socket, frame)
                            .await
                            .map(|a| check_answer(&a))
                        {
                            Ok(Ok(d)) => done = d,
                            Ok(Err(e)) | Err(e) => {
                                tally.error = Some(e);
                                return tally;
                            }
                        }
                        if limit.is_none() {
                            tally.latencies_us.push(since_us(sent));
                        }
                        tally.answered += 1;
                        tally.steps += usize::from(n > 0);
                        n += 1;
                    }
                    let _ = socket.close(None).await;
                    tally
                }
            });
        let tallies = futures_util::future::join_all(tasks).await;
        let wall_s = start.elapsed().as_secs_f64();
        Ok(report(config, tallies, warmup_s, wall_s))
    })
}

/// Runs `config.sessions` HTTP clients at once, each alternating `POST /reset` and `POST
/// /step` (OpenEnv's HTTP endpoints are stateless: each request gets a fresh env) for
/// `config.duration`.
pub fn run_http(config: &LoadConfig) -> Result<LoadReport, ServeError> {
    let deadline = Instant::now() + config.duration;
    let start = Instant::now();
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.sessions)
            .map(|i| {
                scope.spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .timeout_global(Some(Duration::from_secs(60)))
                        .http_status_as_error(false)
                        .build()
                        .into();
                    let mut tally = Tally::default();
                    let reset = json!({"seed": i});
                    let step = json!({"action": config.action});
                    while Instant::now() < deadline {
                        tally.episodes += 1;
                        for (path, body) in [("reset", &reset), ("step", &step)] {
                            let sent = Instant::now();
                            let answer = agent
                                .post(format!("{}/{path}", config.url))
                                .header("content-type", "application/json")
                                .send(body.to_string())
                                .map_err(|e| e.to_string())
                                .and_then(|mut r| {
                                    let status = r.status().as_u16();
                                    let text =
                                        r.body_mut().read_to_string().map_err(|e| e.to_string())?;
                                    if status == 200 {
                                        Ok(text)
                                    } else {
                                        Err(format!("HTTP {status}: {text}"))
                                    }
                                });
                            match answer {
                                Ok(_) => {
                                    tally.record(since_us(sent));
                                    tally.answered += 1;
                                    tally.steps += usize::from(path == "step");
                                }
                                Err(e) => {
                                    tally.error = Some(e);
                                    return tally;
                                }
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Tally {
                    error: Some("the client thread panicked".into()),
                    ..Tally::default()
                })
            })
            .collect()
    });
    let wall_s = start.elapsed().as_secs_f64();
    Ok(report(config, tallies, 0.0, wall_s))
}
