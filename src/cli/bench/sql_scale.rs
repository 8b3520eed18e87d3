//! `bench envs`' SQL cases at real sizes: the generated database of
//! [`sandgym_env_sql::synthetic_db`] at each `--rows`, natively and in WASM: making the env
//! (building the database once), a fresh episode, and each join, grouping and nested query as
//! a `run_sql` step — with which of them the row budget refused.

use std::time::{Duration, Instant};

use sandgym::env_api::{Action, ResetOptions};
use sandgym_env_sql::{SYNTHETIC_CORRELATED, SYNTHETIC_QUERIES, synthetic_db};
use serde_json::{Map, Value, json};

/// The figures for each size in `sizes` (rows per large table).
pub fn run(sizes: &[usize]) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for &rows in sizes {
        let db = synthetic_db(rows);
        let config = json!({"tasks_jsonl": db.tasks_jsonl, "databases": {"synthetic": db.script}});
        let config = config.as_object().expect("an object");
        let mut figures = Map::new();
        for backend in [sandgym::Backend::Native, sandgym::Backend::Wasm] {
            let started = Instant::now();
            let mut env = sandgym::make_env("sql-agent-v0", backend, config)?;
            let make = started.elapsed();
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
            let side = match backend {
                sandgym::Backend::Native => "native",
                sandgym::Backend::Wasm => "wasm",
            };
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
