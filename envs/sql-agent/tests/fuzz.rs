//! Fuzzing by property: what users and models hand the SQL env — task files and the SQL a
//! model writes — never panics it. Task lines are arbitrary text and mutations of a real
//! line; queries are arbitrary text and random sequences of SQL tokens, run on the bundled
//! databases. Every input gets a value or a typed error. (A coverage-guided fuzzer needs a
//! nightly toolchain for its sanitizer flags; these run in every `cargo test`.)

use proptest::prelude::*;
use sandgym_env_api::{Action, Env, ResetOptions, Split};
use sandgym_env_sql::{SqlAgentEnv, SqlConfig, TaskSet};
use serde_json::json;

const GOOD: &str = r#"{"id": "p1", "database": "pets", "question": "How many pets?", "gold_sql": "SELECT COUNT(*) FROM pets", "schema_sql": "CREATE TABLE pets (name TEXT, age INTEGER); INSERT INTO pets VALUES ('Rex', 3);", "split": "test"}"#;

const WORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "JOIN",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "UNION",
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "CREATE",
    "TABLE",
    "DROP",
    "WITH",
    "AS",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "NULL",
    "NOT",
    "IN",
    "LIKE",
    "BETWEEN",
    "COUNT(*)",
    "SUM(",
    "AVG(",
    "MIN(",
    "MAX(",
    "CAST(",
    "*",
    ",",
    "(",
    ")",
    ";",
    "=",
    "<",
    ">",
    "+",
    "-",
    "/",
    "%",
    "||",
    "'x'",
    "''",
    "0",
    "-1",
    "9223372036854775807",
    "1e308",
    "0.5",
    "orders",
    "customers",
    "products",
    "tracks",
    "genres",
    "name",
    "price",
    "id",
    "a.b",
    "\"q\"",
    "--",
    "/*",
    "*/",
    "DISTINCT",
    "EXISTS",
    "ALL",
    "ANY",
    "IS",
    "AND",
    "OR",
    "ASC",
    "DESC",
];

fn sql_tokens() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..24).prop_map(|w| w.join(" "))
}

fn mutated_line() -> impl Strategy<Value = String> {
    (0..GOOD.len(), any::<char>(), 0..GOOD.len()).prop_map(|(at, c, cut)| {
        let mut s: Vec<char> = GOOD.chars().collect();
        let at = at.min(s.len() - 1);
        s[at] = c;
        s.truncate(cut.max(1));
        s.into_iter().collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn task_files_of_any_text_parse_or_fail_with_a_typed_error(
        lines in prop::collection::vec(prop_oneof![".{0,200}", mutated_line(), Just(GOOD.to_owned())], 0..4)
    ) {
        let text = lines.join("\n");
        let _ = TaskSet::from_jsonl(text.as_bytes());
        let _ = SqlAgentEnv::with_config(SqlConfig { tasks_jsonl: Some(text), ..Default::default() });
    }

    #[test]
    fn tasks_with_any_gold_or_schema_sql_build_or_fail_with_a_typed_error(
        gold in prop_oneof![sql_tokens(), ".{0,80}"],
        schema in prop_oneof![sql_tokens(), Just("CREATE TABLE pets (name TEXT); INSERT INTO pets VALUES ('Rex');".to_owned())],
    ) {
        let line = json!({"id": "f", "database": "fuzz", "question": "?", "gold_sql": gold, "schema_sql": schema}).to_string();
        if let Ok(mut env) = SqlAgentEnv::with_config(SqlConfig { tasks_jsonl: Some(line), ..Default::default() }) {
            let _ = env.reset(0, &ResetOptions::split(Split::Train));
            let _ = env.step(&Action::respond("1"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_query_a_model_writes_gets_an_observation_or_a_typed_error(
        queries in prop::collection::vec(prop_oneof![3 => sql_tokens(), 1 => ".{0,120}"], 1..4),
        seed in any::<u64>(),
    ) {
        let mut env = SqlAgentEnv::new().unwrap();
        env.reset(seed, &ResetOptions::split(Split::Train)).unwrap();
        for q in queries {
            match env.step(&Action::tool("run_sql", json!({"query": q}))) {
                Ok(obs) => prop_assert!(!obs.content.is_empty() || env.done().is_done()),
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
            if env.done().is_done() {
                break;
            }
        }
    }
}

/// Queries with subqueries in every place the engine folds them (scalar, `IN`, `EXISTS`,
/// nested, correlated or not, with random columns that may not exist), so the folding pass
/// meets shapes random tokens rarely form.
fn nested_query() -> impl Strategy<Value = String> {
    let table = prop::sample::select(&["orders", "customers", "products", "nope"][..]);
    let column = prop::sample::select(&["id", "price", "name", "customer_id", "o.id", "x"][..]);
    let inner =
        (table.clone(), column.clone(), column.clone(), 0..4usize).prop_map(|(t, c, w, kind)| {
            match kind {
                0 => format!("SELECT MAX({c}) FROM {t}"),
                1 => format!("SELECT {c} FROM {t} WHERE {w} > 1"),
                2 => format!("SELECT {c} FROM {t} i WHERE i.{w} = o.{c}"),
                _ => format!("SELECT {c} FROM {t} WHERE {w} IN (SELECT {c} FROM {t})"),
            }
        });
    (table, column, inner, 0..5usize).prop_map(|(t, c, inner, kind)| match kind {
        0 => format!("SELECT COUNT(*) FROM {t} o WHERE {c} > ({inner})"),
        1 => format!("SELECT {c} FROM {t} o WHERE {c} IN ({inner})"),
        2 => format!("SELECT {c} FROM {t} o WHERE NOT EXISTS ({inner})"),
        3 => format!("SELECT {c}, ({inner}) FROM {t} o"),
        _ => format!("SELECT {c} FROM {t} o GROUP BY {c} HAVING COUNT(*) < ({inner})"),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn nested_queries_get_an_observation(query in nested_query(), seed in any::<u64>()) {
        let mut env = SqlAgentEnv::new().unwrap();
        env.reset(seed, &ResetOptions::split(Split::Train)).unwrap();
        let obs = env.step(&Action::tool("run_sql", json!({"query": query}))).unwrap();
        prop_assert!(!obs.content.is_empty());
        prop_assert!(!env.done().is_done());
    }
}
