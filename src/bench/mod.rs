//! Benchmarks: whole-pipeline figures, each against a baseline measured in the same run.
//! Each returns a typed report (serde): `sandgym bench --json` prints it and the tests read
//! it back.

pub mod conversation;
pub mod crash;
pub mod env_server;
pub mod envs;
pub mod online;
pub mod policy;
pub mod proxy;
pub mod sandbox;
pub mod serve;
mod sql_scale;

use std::time::{Duration, Instant};

/// Mean time per call of `f`, over rounds of about `budget`, as the median of three rounds.
pub(crate) fn per_call(budget: Duration, mut f: impl FnMut()) -> Duration {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let mut n = 0u32;
        while start.elapsed() < budget / 3 {
            for _ in 0..64 {
                f();
            }
            n += 64;
        }
        rounds.push(start.elapsed() / n);
    }
    rounds.sort();
    rounds[1]
}

/// Microseconds, to a hundredth.
pub(crate) fn us(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e8).round() / 100.0
}

/// Microseconds as milliseconds, to a hundredth.
pub(crate) fn ms_of_us(us: u64) -> f64 {
    (us as f64 / 10.0).round() / 100.0
}

/// A ratio to a hundredth.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    (a / b * 100.0).round() / 100.0
}

/// The process's peak resident memory in MB (Linux; 0 elsewhere).
pub(crate) fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
