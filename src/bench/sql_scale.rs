//! `bench envs`' SQL cases at real sizes, natively and in WASM: the music fixture (a SQLite
//! dump) and the generated database of [`sandgym_env_sql::synthetic_db`] at each `--rows`:
//! making the env (building the database once), a fresh episode, and join, grouping and
//! nested queries as `run_sql` steps — with which of them the row budget refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::env_api::{Action, BoxEnv, ResetOptions};
use sandgym_env_sql::{SYNTHETIC_CORRELATED, SYNTHETIC_QUERIES, synthetic_db};

/// The SQL env over a generated database on one backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticFigures {
    /// Making the env: building the database once (ms).
    pub make_env_ms: f64,
    /// A fresh episode (µs).
    pub reset_us: f64,
    /// Each query as a `run_sql` step, by name (ms).
    pub queries_ms: BTreeMap<String, f64>,
    /// The queries the row budget refused, by name, space-separated.
    pub refused: String,
}

/// The SQL env over a real-size SQLite dump on one backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpFigures {
    /// Making the env: building the database once (ms).
    pub make_env_ms: f64,
    /// A fresh episode (µs).
    pub reset_us: f64,
    /// A two-table join with grouping as a `run_sql` step (µs).
    pub join_step_us: f64,
}

/// The figures for each size in `sizes` (rows per large table), under a row budget of
/// `max_rows_read` per query.
pub fn run(
    sizes: &[usize],
    max_rows_read: u64,
) -> anyhow::Result<BTreeMap<usize, BTreeMap<String, SyntheticFigures>>> {
    let mut out = BTreeMap::new();
    for &rows in sizes {
        let db = synthetic_db(rows);
        let config = json!({
            "tasks_jsonl": db.tasks_jsonl,
            "databases": {"synthetic": db.script},
            "max_rows_read": max_rows_read,
        });
        let config = config.as_object().expect("an object");
        let mut figures = BTreeMap::new();
        for (side, backend) in BACKENDS {
            let (mut env, make) = timed_env(backend, config)?;
            let mut seed = 0;
            let reset = median_of(5, || {
                seed += 1;
                env.reset(seed, &ResetOptions::default()).map(drop)
            })?;
            let mut cases = BTreeMap::new();
            let mut refused = Vec::new();
            let queries = SYNTHETIC_QUERIES
                .iter()
                .map(|(name, _, sql)| (*name, *sql))
                .chain([("correlated", SYNTHETIC_CORRELATED)]);
            for (name, sql) in queries {
                let action = Action::tool("run_sql", json!({"query": sql}));
                let mut text = String::new();
                let took = median_of(3, || {
                    text = env.step(&action)?.content;
                    Ok(())
                })?;
                if text.starts_with("error: query too expensive") {
                    refused.push(name);
                } else {
                    anyhow::ensure!(!text.starts_with("error"), "{name} at {rows} rows: {text}");
                }
                cases.insert(name.to_owned(), ms(took));
            }
            figures.insert(
                side.to_owned(),
                SyntheticFigures {
                    make_env_ms: ms(make),
                    reset_us: (reset.as_secs_f64() * 1e7).round() / 10.0,
                    queries_ms: cases,
                    refused: refused.join(" "),
                },
            );
        }
        out.insert(rows, figures);
    }
    Ok(out)
}

/// The backends measured, by the name the figures give them.
const BACKENDS: [(&str, crate::Backend); 2] = [
    ("native", crate::Backend::Native),
    ("wasm", crate::Backend::Wasm),
];

/// The SQL env made over `config` on `backend`, and how long making it took (building its
/// databases and checking its gold queries).
fn timed_env(
    backend: crate::Backend,
    config: &Map<String, Value>,
) -> anyhow::Result<(BoxEnv, Duration)> {
    let started = Instant::now();
    let env = crate::make_env("sql-agent-v0", backend, config)?;
    Ok((env, started.elapsed()))
}

/// The SQL env over a user database of real size: the test fixture written by
/// `scripts/make_music_db.py` (a SQLite dump, nine tables, ~7,400 rows). Making the env builds
/// the database once; episodes read it until they write.
pub fn sqlite_dump(budget: Duration) -> anyhow::Result<BTreeMap<String, DumpFigures>> {
    let config = json!({
        "tasks_jsonl": include_str!("../../envs/sql-agent/tests/data/music_tasks.jsonl"),
        "databases": {"music": include_str!("../../envs/sql-agent/tests/data/music.sql")},
    });
    let config = config.as_object().expect("an object");
    let join = Action::tool(
        "run_sql",
        json!({"query": "SELECT g.name, COUNT(*) FROM tracks t JOIN genres g ON t.genre_id = g.genre_id GROUP BY g.name"}),
    );
    let mut figures = BTreeMap::new();
    for (side, backend) in BACKENDS {
        let (mut env, make) = timed_env(backend, config)?;
        let mut seed = 0;
        let reset = super::per_call(budget, || {
            seed += 1;
            env.reset(seed, &ResetOptions::default()).expect("reset");
        });
        let step = super::per_call(budget, || {
            env.step(&join).expect("step");
        });
        figures.insert(
            side.to_owned(),
            DumpFigures {
                make_env_ms: (make.as_secs_f64() * 1e4).round() / 10.0,
                reset_us: super::us(reset),
                join_step_us: super::us(step),
            },
        );
    }
    Ok(figures)
}

/// The median time of `n` calls of `f` (one call first, off the clock).
fn median_of(
    n: usize,
    mut f: impl FnMut() -> Result<(), crate::env_api::EnvError>,
) -> anyhow::Result<Duration> {
    f()?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[n / 2])
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}
