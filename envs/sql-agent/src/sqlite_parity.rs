//! Every gold query of the bundled tasks, the music fixture's tasks and the generated
//! databases' queries gives the same rows in this env's engine as in SQLite (the reference
//! implementation of the dialect users write), with nested queries folded
//! ([`crate::fold`]) and reads metered ([`crate::metered`]).

use std::collections::BTreeMap;

use rusqlite::types::ValueRef;

use crate::engine::{self, DEFAULT_MAX_ROWS_READ, Outcome};

/// SQLite's rows for `query` on a connection, rendered as the engine renders values.
fn sqlite_rows(conn: &rusqlite::Connection, query: &str) -> Vec<Vec<String>> {
    let mut statement = conn
        .prepare(query)
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    let columns = statement.column_count();
    let rows = statement
        .query_map([], |row| {
            (0..columns)
                .map(|i| {
                    Ok(match row.get_ref(i)? {
                        ValueRef::Null => "NULL".to_owned(),
                        ValueRef::Integer(n) => n.to_string(),
                        ValueRef::Real(f) => engine::render_number(f),
                        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        ValueRef::Blob(b) => format!("{b:?}"),
                    })
                })
                .collect()
        })
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    rows.map(|r| r.unwrap_or_else(|e| panic!("{query}: {e}")))
        .collect()
}

/// Runs every `(id, query, ordered)` on both engines over the database `script` builds and
/// returns the ids whose rows differ, with both results.
fn differences(script: &str, queries: &[(String, String, bool)]) -> Vec<String> {
    let image = engine::build(script).expect("builds in the engine");
    let conn = rusqlite::Connection::open_in_memory().expect("sqlite");
    conn.execute_batch(script).expect("builds in SQLite");
    let mut out = Vec::new();
    for (id, query, ordered) in queries {
        let ours = engine::query(&image, query, DEFAULT_MAX_ROWS_READ)
            .unwrap_or_else(|e| panic!("{id}: `{query}` fails in the engine: {e}"));
        let theirs = Outcome {
            labels: ours.labels.clone(),
            rows: sqlite_rows(&conn, query),
            summary: None,
        };
        if !engine::same_rows(&ours, &theirs, *ordered) {
            out.push(format!(
                "{id}: `{query}`\n  engine: {:?}\n  sqlite: {:?}",
                first(&ours.rows),
                first(&theirs.rows)
            ));
        }
    }
    out
}

fn first(rows: &[Vec<String>]) -> &[Vec<String>] {
    &rows[..rows.len().min(5)]
}

#[test]
fn every_bundled_gold_query_answers_as_sqlite_does() {
    let tasks = crate::tasks::bundled();
    let mut by_db: BTreeMap<&str, Vec<(String, String, bool)>> = BTreeMap::new();
    for t in &tasks.tasks {
        by_db.entry(t.database.as_str()).or_default().push((
            t.id.clone(),
            t.gold_sql.clone(),
            t.ordered,
        ));
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (db, queries) in &by_db {
        wrong.extend(differences(&tasks.databases[*db], queries));
        checked += queries.len();
    }
    assert_eq!(checked, tasks.tasks.len());
    assert!(
        wrong.is_empty(),
        "{} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn generated_databases_answer_as_sqlite_does() {
    let db = crate::synthetic_db(2_000);
    let queries: Vec<(String, String, bool)> = crate::SYNTHETIC_QUERIES
        .iter()
        .map(|(name, _, sql)| (name.to_string(), sql.to_string(), false))
        .chain([(
            "correlated".to_owned(),
            crate::SYNTHETIC_CORRELATED.to_owned(),
            false,
        )])
        .collect();
    let wrong = differences(&db.script, &queries);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Subqueries of every kind the folding pass rewrites, and ones it must leave alone
/// (correlated, several rows for a scalar), against SQLite.
#[test]
fn folded_subqueries_answer_as_sqlite_does() {
    let script = "CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT, v INTEGER);\n\
        INSERT INTO t VALUES (1, 'a', 10), (2, 'a', 20), (3, 'b', 30), (4, 'b', NULL), (5, 'c', 50);\n\
        CREATE TABLE u (id INTEGER PRIMARY KEY, t_id INTEGER, w INTEGER);\n\
        INSERT INTO u VALUES (1, 1, 5), (2, 1, 6), (3, 3, 7), (4, 9, 8), (5, NULL, 9);";
    let queries = [
        "SELECT id FROM t WHERE v > (SELECT AVG(v) FROM t)",
        "SELECT id FROM t WHERE v = (SELECT MAX(v) FROM t WHERE g = 'a')",
        "SELECT id FROM t WHERE v > (SELECT v FROM t WHERE g = 'zzz')",
        "SELECT id FROM t WHERE id IN (SELECT t_id FROM u)",
        "SELECT id FROM t WHERE id NOT IN (SELECT t_id FROM u WHERE t_id IS NOT NULL)",
        "SELECT id FROM t WHERE id IN (SELECT t_id FROM u WHERE w > 100)",
        "SELECT id FROM t WHERE id NOT IN (SELECT t_id FROM u WHERE w > 100)",
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE w > 8)",
        "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE w > 100)",
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.t_id = t.id)",
        "SELECT id FROM t WHERE v > (SELECT MIN(w) FROM u WHERE u.t_id = t.id)",
        "SELECT g, COUNT(*) FROM t GROUP BY g HAVING COUNT(*) > (SELECT COUNT(*) FROM u WHERE w > 7)",
        "SELECT id, (SELECT MAX(w) FROM u) FROM t",
        "SELECT id FROM t WHERE id IN (SELECT t_id FROM u WHERE w IN (SELECT w FROM u WHERE w < 7))",
        "SELECT COUNT(*) FROM t WHERE v BETWEEN (SELECT MIN(w) FROM u) AND (SELECT MAX(v) FROM t WHERE g = 'b')",
        // Correlated through the outer table's own name or alias: must not be folded.
        "SELECT id FROM t WHERE v > (SELECT AVG(v) FROM t AS t2 WHERE t2.g = t.g)",
        "SELECT id FROM t x WHERE v >= (SELECT MAX(v) FROM t WHERE g = x.g)",
        "SELECT id FROM t WHERE id IN (SELECT t_id FROM u WHERE u.w > t.v / 10)",
    ];
    let queries: Vec<(String, String, bool)> = queries
        .iter()
        .map(|q| (q.to_string(), q.to_string(), false))
        .collect();
    let wrong = differences(script, &queries);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
