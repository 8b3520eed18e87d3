//! The embedded SQL engine (GlueSQL over in-memory storage) and result comparison.

use gluesql::core::executor::Payload;
use gluesql::core::store::Planner;
use gluesql::core::translate::translate;
use gluesql::prelude::{Glue, MemoryStorage, Value};

/// A database image: built once from SQL, cloned for every episode.
pub type Image = MemoryStorage;

/// Builds an image by running `sql` (DDL and inserts; SQLite-style scripts and dumps are
/// rewritten for GlueSQL first, see [`crate::ddl`]). An error names the statement that failed.
pub fn build(sql: &str) -> Result<Image, String> {
    let mut glue = Glue::new(MemoryStorage::default());
    for (i, statement) in crate::ddl::statements(sql)?.iter().enumerate() {
        let plan = translate(statement).and_then(|s| glue.storage.plan(s.into()));
        plan.and_then(|plan| glue.execute_stmt(&plan))
            .map_err(|e| {
                let text: String = statement.to_string().chars().take(80).collect();
                format!("statement {} (`{text}`): {e}", i + 1)
            })?;
    }
    Ok(glue.storage)
}

/// The rows of a query, rendered as text, plus what kind of statement ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Column labels (empty for statements that return no rows).
    pub labels: Vec<String>,
    /// Rows, each value rendered as text (`NULL` for null; floats rounded to 6 decimals).
    pub rows: Vec<Vec<String>>,
    /// A one-line summary for statements that return no rows (`3 rows deleted`).
    pub summary: Option<String>,
}

/// Runs `sql` on `image` (mutating it) and returns the outcome of the last statement.
pub fn run(image: &mut Image, sql: &str) -> Result<Outcome, String> {
    let storage = std::mem::take(image);
    let mut glue = Glue::new(storage);
    let result = glue.execute(sql);
    *image = glue.storage;
    let payloads = result.map_err(|e| e.to_string())?;
    let last = payloads.into_iter().last().ok_or("empty query")?;
    Ok(match last {
        Payload::Select { labels, rows } => Outcome {
            labels,
            rows: rows
                .into_iter()
                .map(|r| r.iter().map(render).collect())
                .collect(),
            summary: None,
        },
        Payload::SelectMap(maps) => Outcome {
            labels: Vec::new(),
            rows: maps
                .into_iter()
                .map(|m| m.values().map(render).collect())
                .collect(),
            summary: None,
        },
        Payload::Insert(n) => summary(format!("{n} rows inserted")),
        Payload::Delete(n) => summary(format!("{n} rows deleted")),
        Payload::Update(n) => summary(format!("{n} rows updated")),
        Payload::DropTable(n) => summary(format!("{n} tables dropped")),
        other => summary(format!("{other:?}").chars().take(60).collect()),
    })
}

fn summary(text: String) -> Outcome {
    Outcome {
        labels: Vec::new(),
        rows: Vec::new(),
        summary: Some(text),
    }
}

/// Renders one value; floats get at most 6 decimals so equal results compare equal.
fn render(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::F64(f) => number(*f),
        Value::F32(f) => number(f64::from(*f)),
        other => String::from(other),
    }
}

fn number(f: f64) -> String {
    let r = (f * 1e6).round() / 1e6;
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Whether two results hold the same rows (in the same order when `ordered`).
pub fn same_rows(a: &Outcome, b: &Outcome, ordered: bool) -> bool {
    if a.summary.is_some() || b.summary.is_some() {
        return false;
    }
    if ordered {
        return a.rows == b.rows;
    }
    let mut x = a.rows.clone();
    let mut y = b.rows.clone();
    x.sort();
    y.sort();
    x == y
}

/// How much of `gold`'s result `got` reproduces: the F1 of their rows as multisets (order
/// ignored), 1 for two empty results, 0 when either is a statement's summary. Partial
/// credit for an execution-match reward (`info.execution_match`).
pub fn row_f1(got: &Outcome, gold: &Outcome) -> f64 {
    if got.summary.is_some() || gold.summary.is_some() {
        return 0.0;
    }
    if got.rows.is_empty() && gold.rows.is_empty() {
        return 1.0;
    }
    let mut a = got.rows.clone();
    let mut b = gold.rows.clone();
    a.sort();
    b.sort();
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

/// Whether a plain-value answer (`42`, `Paris`, `a, b, c`) equals a result with one column.
pub fn same_value(answer: &str, gold: &Outcome) -> bool {
    if gold.rows.is_empty() || gold.rows.iter().any(|r| r.len() != 1) {
        return false;
    }
    let clean = |s: &str| {
        s.trim()
            .trim_end_matches('.')
            .trim_matches(|c| c == '\'' || c == '"')
            .trim()
            .to_lowercase()
    };
    let mut want: Vec<String> = gold.rows.iter().map(|r| clean(&r[0])).collect();
    let mut got: Vec<String> = answer
        .split([',', '\n'])
        .map(clean)
        .filter(|s| !s.is_empty())
        .collect();
    if let ([w], [g]) = (want.as_slice(), got.as_slice())
        && let (Ok(x), Ok(y)) = (w.parse::<f64>(), g.parse::<f64>())
    {
        return (x - y).abs() <= 1e-6 * x.abs().max(1.0);
    }
    want.sort();
    got.sort();
    want == got
}

/// Statements that change data or schema, by their leading keyword.
const WRITES: [&str; 9] = [
    "DROP", "DELETE", "UPDATE", "ALTER", "INSERT", "CREATE", "TRUNCATE", "REPLACE", "MERGE",
];

/// The leading keyword of every statement in `sql` (split on `;` outside quotes), uppercased.
pub fn statement_keywords(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                current.push(c);
            }
            (None, ';') => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    out.push(current);
    out.iter()
        .filter_map(|s| {
            s.split(|c: char| c.is_whitespace() || c == '(')
                .find(|w| !w.is_empty())
        })
        .map(str::to_uppercase)
        .collect()
}

/// Whether `sql` contains a statement that writes (DROP, DELETE, UPDATE, ALTER, INSERT, …).
pub fn is_destructive(sql: &str) -> bool {
    statement_keywords(sql)
        .iter()
        .any(|k| WRITES.contains(&k.as_str()))
}

/// Whether `sql` looks like a query rather than a plain value.
pub fn looks_like_sql(text: &str) -> bool {
    statement_keywords(text).first().is_some_and(|k| {
        matches!(k.as_str(), "SELECT" | "WITH" | "SHOW" | "VALUES") || WRITES.contains(&k.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destructive_statements_are_found_anywhere() {
        assert!(!is_destructive("SELECT 'drop; table' FROM t"));
        assert!(is_destructive("select 1; drop table customers"));
        assert!(is_destructive("  DELETE FROM orders"));
        assert!(is_destructive("update t set a = 1"));
        assert!(!is_destructive(
            "SELECT name FROM products WHERE name = 'DELETE'"
        ));
    }

    #[test]
    fn row_f1_gives_partial_credit_for_overlapping_results() {
        let mut db =
            build("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2), (2), (3);").unwrap();
        let gold = run(&mut db, "SELECT a FROM t").unwrap();
        let same = run(&mut db, "SELECT a FROM t ORDER BY a DESC").unwrap();
        assert_eq!(row_f1(&same, &gold), 1.0);
        // {2, 2} against {1, 2, 2, 3}: 2 common rows, F1 = 2*2 / (2 + 4).
        let part = run(&mut db, "SELECT a FROM t WHERE a = 2").unwrap();
        assert!((row_f1(&part, &gold) - 4.0 / 6.0).abs() < 1e-12);
        let none = run(&mut db, "SELECT a FROM t WHERE a > 9").unwrap();
        assert_eq!(row_f1(&none, &gold), 0.0);
        assert_eq!(row_f1(&none, &none), 1.0);
        let wrote = run(&mut db, "DELETE FROM t WHERE a = 1").unwrap();
        assert_eq!(row_f1(&wrote, &gold), 0.0);
    }

    #[test]
    fn engine_runs_queries_and_compares_results() {
        let mut db = build("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'y');").unwrap();
        let all = run(&mut db, "SELECT a FROM t ORDER BY a DESC").unwrap();
        let any = run(&mut db, "SELECT a FROM t").unwrap();
        assert!(same_rows(&all, &any, false));
        assert!(!same_rows(&all, &any, true));
        let avg = run(&mut db, "SELECT AVG(a) FROM t").unwrap();
        assert_eq!(avg.rows, vec![vec!["2".to_owned()]]);
        assert!(same_value("2.0", &avg));
        let names = run(&mut db, "SELECT DISTINCT b FROM t").unwrap();
        assert!(same_value("y, x", &names));
        assert!(run(&mut db, "SELECT nope FROM t").is_err());
        let deleted = run(&mut db, "DELETE FROM t WHERE a = 1").unwrap();
        assert_eq!(deleted.summary.as_deref(), Some("1 rows deleted"));
    }
}

#[cfg(test)]
mod sqlite_dump {
    use std::collections::BTreeMap;

    use super::*;

    /// The real-size fixture (`scripts/make_music_db.py`): a SQLite dump of ~7,400 rows, and
    /// the rows SQLite gives for each task's gold query.
    #[test]
    fn a_sqlite_dump_builds_and_answers_as_sqlite_does() {
        let mut db = build(include_str!("../tests/data/music.sql")).unwrap();
        let expected: BTreeMap<String, Vec<Vec<String>>> =
            serde_json::from_str(include_str!("../tests/data/music_expected.json")).unwrap();
        let tasks = include_str!("../tests/data/music_tasks.jsonl");
        let mut checked = 0;
        for line in tasks.lines() {
            let task: crate::Task = serde_json::from_str(line).unwrap();
            let got = run(&mut db, &task.gold_sql).unwrap();
            let want = Outcome {
                labels: got.labels.clone(),
                rows: expected[&task.id].clone(),
                summary: None,
            };
            assert!(
                same_rows(&got, &want, task.ordered),
                "{}: {:?} vs SQLite's {:?}",
                task.id,
                got.rows,
                want.rows
            );
            checked += 1;
        }
        assert_eq!(checked, expected.len());
        let rows = run(&mut db, "SELECT COUNT(*) FROM tracks").unwrap();
        assert_eq!(rows.rows, [["3000"]]);
    }
}
