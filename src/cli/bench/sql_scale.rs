//! `bench envs`' SQL cases at real sizes, natively and in WASM: the music fixture (a SQLite
//! dump) and the generated database of [`sandgym_env_sql::synthetic_db`] at each `--rows`:
//! making the env (building the database once), a fresh episode, and join, grouping and
//! nested queries as `run_sql` steps — with which of them the row budget refused.

use std::time::{Duration, Instant};

use sandgym::env_api::BoxEnv;

use sandgym::env_api::{Action, ResetOptions};
use sandgym_env_sql::{SYNTHETIC_CORRELATED, SYNTHETIC_QUERIES, synthetic_db};
use serde_json::{Map, Value, json};

/// The figures for each size in `sizes` (rows per large table), under a row budget of
/// `max_rows_read` per query.
pub fn run(sizes: &[usize], max_rows_read: u64) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for &rows in sizes {
        let db = synthetic_db(rows);
        let config = json!({
            "tasks_jsonl": db.tasks_jsonl,
            "databases": {"synthetic": db.script},
            "max_rows_read": max_rows_read,
        });
        let config = config.as_object().expect("an object");
        let mut figures = Map::new();
        for (side, backend) in BACKENDS {
            let (mut env, make) = timed_env(backend, config)?;
            let mut seed = 0;
            let reset = median_of(5, || {
                seed += 1;
                env.reset(seed, &ResetOptions::default()).map(drop)
            })?;
            let mut cases = Map::new();
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
                cases.insert(format!("{name}_ms"), ms(took));
            }
            let mut side_figures = Map::new();
            side_figures.insert("make_env_ms".into(), ms(make));
            side_figures.insert(
                "reset_us".into(),
                json!((reset.as_secs_f64() * 1e7).round() / 10.0),
            );
            side_figures.extend(cases);
            side_figures.insert("refused".into(), json!(refused.join(" ")));
            figures.insert(side.into(), Value::Object(side_figures));
        }
        out.insert(
            format!("sql-agent-v0 synthetic {rows} rows"),
            Value::Object(figures),
        );
    }
    Ok(out)
}

/// The backends measured, by the name the figures give them.
const BACKENDS: [(&str, sandgym::Backend); 2] = [
    ("native", sandgym::Backend::Native),
    ("wasm", sandgym::Backend::Wasm),
];

/// The SQL env made over `config` on `backend`, and how long making it took (building its
/// databases and checking its gold queries).
fn timed_env(
    backend: sandgym::Backend,
    config: &Map<String, Value>,
) -> anyhow::Result<(BoxEnv, Duration)> {
    let started = Instant::now();
    let env = sandgym::make_env("sql-agent-v0", backend, config)?;
    Ok((env, started.elapsed()))
}

/// The SQL env over a user database of real size: the test fixture written by
/// `scripts/make_music_db.py` (a SQLite dump, nine tables, ~7,400 rows). Making the env builds
/// the database once; episodes read it until they write.
pub fn sqlite_dump(budget: Duration) -> anyhow::Result<Value> {
    let config = json!({
        "tasks_jsonl": include_str!("../../../envs/sql-agent/tests/data/music_tasks.jsonl"),
        "databases": {"music": include_str!("../../../envs/sql-agent/tests/data/music.sql")},
    });
    let config = config.as_object().expect("an object");
    let join = Action::tool(
        "run_sql",
        json!({"query": "SELECT g.name, COUNT(*) FROM tracks t JOIN genres g ON t.genre_id = g.genre_id GROUP BY g.name"}),
    );
    let mut figures = Map::new();
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
            side.into(),
            json!({"make_env_ms": (make.as_secs_f64() * 1e4).round() / 10.0, "reset_us": super::us(reset), "join_step_us": super::us(step)}),
        );
    }
    Ok(Value::Object(figures))
}

/// The median time of `n` calls of `f` (one call first, off the clock).
fn median_of(
    n: usize,
    mut f: impl FnMut() -> Result<(), sandgym::env_api::EnvError>,
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

fn ms(d: Duration) -> Value {
    json!((d.as_secs_f64() * 1e5).round() / 100.0)
}
