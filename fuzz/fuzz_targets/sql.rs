//! A user's task file and the SQL a model writes, against the SQL env natively: the input's
//! first line is one task (JSONL, with its own `schema_sql`: DDL and inserts, SQLite dumps
//! included), each further line a query for `run_sql` or, prefixed `answer `, the final
//! answer. A task file that loads builds its database and plays every query: each gets an
//! observation or a typed error, never a panic, and the reward is finite.
//!
//! GlueSQL catches some of its own panics; the fuzzer's default hook would abort on those, so
//! this target installs the standard hook: a panic that escapes the env still fails the input
//! (libFuzzer's wrapper aborts when the call unwinds).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{Action, Env, ResetOptions};
use sandgym_env_sql::{SqlAgentEnv, SqlConfig};
use serde_json::json;

/// At most this many queries of an input are run, so one input stays fast.
const MAX_QUERIES: usize = 8;

fuzz_target!(|data: &[u8]| {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let _ = std::panic::take_hook();
    });
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.lines();
    let config = SqlConfig {
        tasks_jsonl: Some(lines.next().unwrap_or_default().to_owned()),
        ..SqlConfig::default()
    };
    let Ok(mut env) = SqlAgentEnv::with_config(config) else {
        return;
    };
    let Ok(_) = env.reset(0, &ResetOptions::default()) else {
        return;
    };
    for line in lines.take(MAX_QUERIES) {
        if env.done().is_done() {
            break;
        }
        let action = match line.strip_prefix("answer ") {
            Some(answer) => Action::respond(answer),
            None => Action::tool("run_sql", json!({"query": line})),
        };
        let _ = env.step(&action);
        assert!(env.reward().is_finite(), "reward {}", env.reward());
    }
});
