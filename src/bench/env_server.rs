//! `sandgym bench env-server`: an env server under load on loopback — sessions held,
//! requests/s and round-trip p50/p99 over WebSocket and HTTP, for guess-number and sql-agent
//! at growing numbers of concurrent sessions, each session a sandboxed env instance.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::openenv::load::{LoadConfig, LoadReport, run_http, run_ws};
use crate::openenv::{EnvFactory, EnvServer, ServeConfig};
use crate::sandbox::{Sandbox, SandboxConfig};

/// One env's load cases.
struct Case {
    env: &'static str,
    /// The step every session sends (an Agent Template action, JSON).
    action: &'static str,
    /// Steps per episode before the next reset.
    steps: usize,
    /// Concurrent WebSocket sessions, one case each.
    ws_sessions: &'static [usize],
    /// Concurrent HTTP clients, one case each.
    http_clients: &'static [usize],
}

const CASES: &[Case] = &[
    Case {
        env: "guess-number-v0",
        action: r#"{"tool_name": "guess", "parameters": {"number": 50}}"#,
        steps: 4,
        ws_sessions: &[1, 64, 1024],
        http_clients: &[1, 16],
    },
    Case {
        env: "sql-agent-v0",
        action: r#"{"tool_name": "run_sql", "parameters": {"query": "SELECT COUNT(*) FROM orders"}}"#,
        steps: 3,
        ws_sessions: &[1, 16, 64],
        http_clients: &[1],
    },
];

/// Runs every case for `budget` each; `sessions_cap` drops the larger ones (for a quick run).
/// Besides the closed-loop cases (each session sends its next request when the answer
/// comes), the largest WebSocket case of each env runs open loop at `rate` requests/s in all
/// (`ws_N_at_R`), the figure to set next to a published one at a given load.
pub fn run(budget: Duration, sessions_cap: usize, rate: f64) -> anyhow::Result<EnvServerReport> {
    if !(rate.is_finite() && rate > 0.0) {
        anyhow::bail!("--rate must be a positive number of requests per second");
    }
    let most = CASES
        .iter()
        .flat_map(|c| c.ws_sessions.iter().chain(c.http_clients))
        .copied()
        .filter(|&n| n <= sessions_cap)
        .max()
        .unwrap_or(1);
    let sandbox = sandbox_for(most)?;
    let mut out = EnvServerReport::new();
    for &Case {
        env,
        action,
        steps,
        ws_sessions,
        http_clients,
    } in CASES
    {
        let server = serve(&sandbox, env, most)?;
        let action: Value = serde_json::from_str(action)?;
        let config = |sessions, interval| LoadConfig {
            url: server.url(),
            sessions,
            duration: budget,
            action: action.clone(),
            steps_per_episode: steps,
            interval,
            episodes: None,
        };
        let mut figures = BTreeMap::new();
        let ws: Vec<usize> = ws_sessions
            .iter()
            .copied()
            .filter(|&n| n <= sessions_cap)
            .collect();
        for &n in &ws {
            figures.insert(format!("ws_{n}"), figure(&run_ws(&config(n, None))?));
        }
        if let Some(&n) = ws.last() {
            let interval = Duration::from_secs_f64(n as f64 / rate);
            figures.insert(
                format!("ws_{n}_at_{rate}"),
                figure(&run_ws(&config(n, Some(interval)))?),
            );
        }
        for &n in http_clients.iter().filter(|&&n| n <= sessions_cap) {
            figures.insert(format!("http_{n}"), figure(&run_http(&config(n, None))?));
        }
        out.insert(env.into(), figures);
    }
    Ok(out)
}

/// A sandbox of the bench's own, sized for `sessions` at once (each is an instance).
fn sandbox_for(sessions: usize) -> anyhow::Result<Sandbox> {
    Ok(Sandbox::new(SandboxConfig {
        max_instances: (sessions + 16) as u32,
        ..SandboxConfig::default()
    })?)
}

/// An in-process server on loopback of the bundled `env`, sandboxed in `sandbox`, holding up
/// to `sessions` sessions.
fn serve(sandbox: &Sandbox, env: &str, sessions: usize) -> anyhow::Result<EnvServer> {
    let guest = crate::bundled_guest(env)
        .ok_or_else(|| anyhow::anyhow!("{env} has no WebAssembly build"))?;
    let guest = sandbox.load(guest.wasm)?;
    let factory: EnvFactory =
        Arc::new(move || Ok(Box::new(guest.instantiate(&Map::new())?) as crate::env_api::BoxEnv));
    Ok(EnvServer::start(
        factory,
        ServeConfig {
            listen: "127.0.0.1:0".into(),
            max_sessions: sessions + 16,
            idle_timeout: Duration::from_secs(600),
            max_message_bytes: 1 << 20,
            first_seed: 0,
            env_threads: crate::openenv::default_env_threads(),
        },
    )?)
}

/// Each env's cases, by name (`ws_N`: N WebSocket sessions; `ws_N_at_R`: the same, open loop
/// at R requests/s; `http_N`: N HTTP clients).
pub type EnvServerReport = BTreeMap<String, BTreeMap<String, ServerCase>>;

/// One case of `bench env-server`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCase {
    /// Sessions asked for.
    pub sessions: usize,
    /// Sessions the server held.
    pub sessions_held: usize,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Env steps taken.
    pub steps: usize,
    /// Round trip, median (ms).
    pub p50_ms: f64,
    /// Round trip, 99th percentile (ms).
    pub p99_ms: f64,
    /// The first requests' 99th percentile (ms: sessions opening).
    pub first_p99_ms: f64,
    /// Seconds until every session had answered once.
    pub warmup_s: f64,
    /// Sessions that failed, by error, with how many.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_errors: Vec<(String, usize)>,
}

fn figure(r: &LoadReport) -> ServerCase {
    let round = |x: f64, places: i32| {
        let k = 10f64.powi(places);
        (x * k).round() / k
    };
    ServerCase {
        sessions: r.sessions,
        sessions_held: r.sessions_held,
        requests_per_s: round(r.requests_per_s, 0),
        steps: r.steps,
        p50_ms: round(r.p50_ms, 3),
        p99_ms: round(r.p99_ms, 3),
        first_p99_ms: round(r.first_p99_ms, 3),
        warmup_s: round(r.warmup_s, 3),
        session_errors: r.session_errors.clone(),
    }
}

/// A soak of one env ([`soak`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoakReport {
    /// Episodes played.
    pub episodes: usize,
    /// Sessions the server held.
    pub sessions_held: usize,
    /// Seconds it took.
    pub wall_s: f64,
    /// Resident memory, sampled every half second (MB).
    pub rss_mb: Vec<f64>,
    /// Growth from the end of the warm-up to the end (%).
    pub rss_growth_after_warmup_pct: Option<f64>,
    /// Threads and open files after the warm-up.
    pub threads_and_fds_after_warmup: Option<(Option<u64>, Option<usize>)>,
    /// Threads and open files at the end.
    pub threads_and_fds_at_end: Option<(Option<u64>, Option<usize>)>,
}

/// A soak: `episodes` episodes of each env over 64 WebSocket sessions against an in-process
/// server, the process's resident memory sampled every half second. Reports the samples and
/// the growth from the end of the warm-up (the first tenth of the samples) to the end.
pub fn soak(episodes: usize) -> anyhow::Result<BTreeMap<String, SoakReport>> {
    const SESSIONS: usize = 64;
    let support = Case {
        env: "customer-service-v0",
        action: r#"{"tool_name": "search_kb", "parameters": {"query": "refund"}}"#,
        steps: 3,
        ws_sessions: &[],
        http_clients: &[],
    };
    let sandbox = sandbox_for(SESSIONS)?;
    let mut out = BTreeMap::new();
    for case in CASES.iter().chain([&support]) {
        let server = serve(&sandbox, case.env, SESSIONS)?;
        let config = LoadConfig {
            url: server.url(),
            sessions: SESSIONS,
            duration: Duration::from_secs(3600),
            action: serde_json::from_str(case.action)?,
            steps_per_episode: case.steps,
            interval: None,
            episodes: Some(episodes),
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (report, samples) = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| {
                let mut samples = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(rss) = rss_mb() {
                        samples.push((rss, threads(), fds()));
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                samples
            });
            let report = run_ws(&config);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (report, sampler.join().unwrap_or_default())
        });
        let report = report?;
        drop(server);
        let warm = samples.len() / 10;
        let growth = match (samples.get(warm), samples.last()) {
            (Some(&(a, ..)), Some(&(b, ..))) if a > 0.0 => Some(100.0 * (b - a) / a),
            _ => None,
        };
        // Threads and open files after warm-up and at the end, with every session live: a
        // leak per episode or per session would show as growth.
        out.insert(
            case.env.into(),
            SoakReport {
                episodes: report.episodes,
                sessions_held: report.sessions_held,
                wall_s: (report.wall_s * 10.0).round() / 10.0,
                rss_mb: samples
                    .iter()
                    .map(|x| (x.0 * 10.0).round() / 10.0)
                    .collect(),
                rss_growth_after_warmup_pct: growth.map(|g| (g * 10.0).round() / 10.0),
                threads_and_fds_after_warmup: samples.get(warm).map(|&(_, t, f)| (t, f)),
                threads_and_fds_at_end: samples.last().map(|&(_, t, f)| (t, f)),
            },
        );
    }
    Ok(out)
}

/// This process's threads (Linux: `/proc/self/status`; elsewhere none).
fn threads() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

/// This process's open file descriptors (Linux: `/proc/self/fd`; elsewhere none).
fn fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// This process's resident memory in MB (Linux: `/proc/self/status`; elsewhere none).
fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
