//! The embedded SQL engine (GlueSQL over in-memory storage) and result comparison.

use gluesql::core::executor::Payload;
use gluesql::core::sqlparser::ast::Statement;
use gluesql::core::store::Planner;
use gluesql::core::translate::translate;
use gluesql::prelude::{Glue, MemoryStorage, Value};

use crate::metered::{Access, Metered};

/// A database image: built once from SQL, read by every episode (an episode copies it only
/// when it writes).
pub type Image = MemoryStorage;

/// Builds an image by running `sql` (DDL and inserts; SQLite-style scripts and dumps are
/// rewritten for GlueSQL first, see [`crate::ddl`]). An error names the statement that failed.
///
/// Consecutive inserts into one table run as one statement ([`crate::inserts`]); should that
/// fail, or add fewer rows than it holds (a primary key repeated among its rows), the
/// database is built again one statement at a time, which names the statement at fault.
pub fn build(sql: &str) -> Result<Image, String> {
    build_merged(sql).or_else(|_| build_one_by_one(sql))
}

/// [`build`] with consecutive inserts merged: `Err` (without a statement's number) on any
/// failure.
fn build_merged(sql: &str) -> Result<Image, String> {
    let mut glue = Glue::new(MemoryStorage::default());
    let mut merged = crate::inserts::Merged::default();
    let run = |glue: &mut Glue<MemoryStorage>, (statement, adds): (Statement, Option<usize>)| {
        let before = adds.map(|_| rows(&glue.storage));
        let plan = translate(&statement)
            .and_then(|s| glue.storage.plan(s.into()))
            .map_err(|e| e.to_string())?;
        glue.execute_stmt(&plan).map_err(|e| e.to_string())?;
        match (before, adds) {
            (Some(before), Some(n)) if rows(&glue.storage) != before + n => {
                Err("a merged insert repeated a key".to_owned())
            }
            _ => Ok(()),
        }
    };
    crate::ddl::for_each(sql, |statement| {
        merged
            .push(statement)
            .into_iter()
            .try_for_each(|ready| run(&mut glue, ready))
    })?;
    if let Some((statement, n)) = merged.flush() {
        run(&mut glue, (statement, Some(n)))?;
    }
    Ok(glue.storage)
}

/// The rows stored in every table of `db`.
fn rows(db: &Image) -> usize {
    db.items.values().map(|item| item.rows.len()).sum()
}

/// [`build`] one statement at a time.
fn build_one_by_one(sql: &str) -> Result<Image, String> {
    let mut glue = Glue::new(MemoryStorage::default());
    let mut i = 0;
    crate::ddl::for_each(sql, |statement| {
        i += 1;
        let plan = translate(&statement).and_then(|s| glue.storage.plan(s.into()));
        plan.and_then(|plan| glue.execute_stmt(&plan))
            .map(drop)
            .map_err(|e| {
                let text: String = statement.to_string().chars().take(80).collect();
                format!("statement {i} (`{text}`): {e}")
            })
    })?;
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

/// The rows a query may read by default before it is refused as too expensive (the engine
/// reads tables through a store that counts the rows it hands out): a two-join query over
/// three 100,000-row tables by their keys reads 300,000; a join without a usable key over two
/// 10,000-row tables, 100 million. Measured, a million rows read take about 0.35 s natively,
/// well inside the sandbox's 2 s per call.
pub const DEFAULT_MAX_ROWS_READ: u64 = 1_000_000;

/// Why a query gave no outcome.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The query would read more rows than its budget allows; nothing it did is kept.
    #[error(
        "query too expensive: it reads more than {budget} rows (join tables with JOIN … ON their keys, filter before joining, or compute an aggregate once in a subquery)"
    )]
    TooExpensive {
        /// The budget it passed.
        budget: u64,
    },
    /// The engine refused or failed the query (parse error, unknown column, …).
    #[error("{0}")]
    Sql(String),
}

/// Runs `sql` on `image` (mutating it) and returns the outcome of the last statement, reading
/// at most `max_rows_read` rows in all (see [`crate::metered`]). A refused query changes
/// nothing: a writing script runs on a copy that is kept only when all of it finishes.
pub fn run(image: &mut Image, sql: &str, max_rows_read: u64) -> Result<Outcome, RunError> {
    if !is_destructive(sql) {
        return query(image, sql, max_rows_read);
    }
    let mut scratch = image.clone();
    let payloads = execute(Access::Write(&mut scratch), sql, max_rows_read)?;
    *image = scratch;
    outcome(payloads)
}

/// Runs `sql` on `image` without changing it, as [`run`] does; a statement that would write
/// is refused (`RunError::Sql`). Nothing is copied, so a shared image serves every episode.
pub fn query(image: &Image, sql: &str, max_rows_read: u64) -> Result<Outcome, RunError> {
    outcome(execute(Access::Read(image), sql, max_rows_read)?)
}

fn execute(db: Access<'_>, sql: &str, max_rows_read: u64) -> Result<Vec<Payload>, RunError> {
    let mut storage = Metered::new(db, max_rows_read);
    let mut payloads = Vec::new();
    let mut one = |statement| {
        let mut statement = translate(&statement)?;
        crate::fold::fold(&mut storage, &mut statement)?;
        let plan = storage.plan(statement.into())?;
        gluesql::core::executor::execute(&mut storage, &plan)
    };
    let parsed = gluesql::core::parse_sql::parse(sql).map_err(|e| RunError::Sql(e.to_string()))?;
    for statement in parsed {
        payloads.push(one(statement).map_err(|e| match e {
            gluesql::core::error::Error::StorageMsg(m) if m == crate::metered::REFUSED => {
                RunError::TooExpensive {
                    budget: max_rows_read,
                }
            }
            gluesql::core::error::Error::StorageMsg(m) if m == crate::metered::READ_ONLY => {
                RunError::Sql("this statement writes; only queries run here".into())
            }
            e => RunError::Sql(e.to_string()),
        })?);
    }
    Ok(payloads)
}

fn outcome(payloads: Vec<Payload>) -> Result<Outcome, RunError> {
    let last = payloads
        .into_iter()
        .last()
        .ok_or_else(|| RunError::Sql("empty query".into()))?;
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
        Value::F64(f) => render_number(*f),
        Value::F32(f) => render_number(f64::from(*f)),
        other => String::from(other),
    }
}

/// A float as results show it: at most 6 decimals, no `.0` on whole numbers.
pub(crate) fn render_number(f: f64) -> String {
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

    /// Every table's schema and rows, tables by name.
    fn contents(db: &Image) -> String {
        let tables: std::collections::BTreeMap<_, _> = db.items.iter().collect();
        format!("{tables:?}")
    }

    #[test]
    fn merged_inserts_build_the_same_database_as_one_statement_at_a_time() {
        for dump in [
            include_str!("../tests/data/music.sql"),
            include_str!("../tests/data/films.sql"),
        ] {
            let merged = build_merged(dump).unwrap();
            let single = build_one_by_one(dump).unwrap();
            assert!(rows(&merged) > 5_000);
            assert!(contents(&merged) == contents(&single));
        }
        // Inserts into other tables, with other columns or of another form are not merged,
        // and their order is kept.
        let script = "CREATE TABLE a (id INTEGER PRIMARY KEY, x TEXT); CREATE TABLE b (y INTEGER);
            INSERT INTO a VALUES (1, 'p'); INSERT INTO a (id) VALUES (2); INSERT INTO b VALUES (7);
            INSERT INTO a VALUES (3, 'q'), (4, 'r'); UPDATE a SET x = 's' WHERE id = 4;
            INSERT INTO a VALUES (5, 't'); INSERT INTO b SELECT id FROM a WHERE id > 3;";
        let merged = build_merged(script).unwrap();
        assert!(contents(&merged) == contents(&build_one_by_one(script).unwrap()));
        assert_eq!(rows(&merged), 5 + 3);
    }

    #[test]
    fn a_key_repeated_within_merged_inserts_fails_and_names_its_statement() {
        // The primary key 2 twice, in consecutive inserts that merge into one statement.
        let pk = "CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT);
            INSERT INTO t VALUES (1, 'a'); INSERT INTO t VALUES (2, 'b'); INSERT INTO t VALUES (2, 'c');";
        let e = build(pk).unwrap_err();
        assert!(
            e.starts_with("statement 4 (`INSERT INTO t VALUES (2, 'c')"),
            "{e}"
        );
        // A repeated value of a UNIQUE column, the same.
        let unique = "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT UNIQUE);
            INSERT INTO t VALUES (1, 'a@x'); INSERT INTO t VALUES (2, 'b@x'); INSERT INTO t VALUES (3, 'a@x');";
        let e = build(unique).unwrap_err();
        assert!(
            e.starts_with("statement 4 (`INSERT INTO t VALUES (3, 'a@x')"),
            "{e}"
        );
        assert!(e.contains("duplicate entry"), "{e}");
        // A repeat of a key stored by an earlier statement is caught as before.
        let stored = "CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1);
            CREATE TABLE u (id INTEGER); INSERT INTO t VALUES (1);";
        assert!(build(stored).unwrap_err().starts_with("statement 4 "));
    }

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
        let gold = run(&mut db, "SELECT a FROM t", DEFAULT_MAX_ROWS_READ).unwrap();
        let same = run(
            &mut db,
            "SELECT a FROM t ORDER BY a DESC",
            DEFAULT_MAX_ROWS_READ,
        )
        .unwrap();
        assert_eq!(row_f1(&same, &gold), 1.0);
        // {2, 2} against {1, 2, 2, 3}: 2 common rows, F1 = 2*2 / (2 + 4).
        let part = run(
            &mut db,
            "SELECT a FROM t WHERE a = 2",
            DEFAULT_MAX_ROWS_READ,
        )
        .unwrap();
        assert!((row_f1(&part, &gold) - 4.0 / 6.0).abs() < 1e-12);
        let none = run(
            &mut db,
            "SELECT a FROM t WHERE a > 9",
            DEFAULT_MAX_ROWS_READ,
        )
        .unwrap();
        assert_eq!(row_f1(&none, &gold), 0.0);
        assert_eq!(row_f1(&none, &none), 1.0);
        let wrote = run(&mut db, "DELETE FROM t WHERE a = 1", DEFAULT_MAX_ROWS_READ).unwrap();
        assert_eq!(row_f1(&wrote, &gold), 0.0);
    }

    /// A table of `n` rows `(i, i % 10)`.
    fn numbers(n: usize) -> Image {
        let values: Vec<String> = (0..n).map(|i| format!("({i}, {})", i % 10)).collect();
        build(&format!(
            "CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER); INSERT INTO t VALUES {};",
            values.join(", ")
        ))
        .unwrap()
    }

    #[test]
    fn uncorrelated_subqueries_read_their_table_once() {
        let db = numbers(1000);
        // Each query reads `t` twice when its subquery runs once (plus the IN list's
        // comparisons, 1000 x 100 / 20); once per outer row it would read a million rows.
        for sql in [
            "SELECT COUNT(*) FROM t WHERE a > (SELECT AVG(a) FROM t)",
            "SELECT COUNT(*) FROM t WHERE a IN (SELECT a FROM t WHERE b = 3)",
            "SELECT COUNT(*) FROM t WHERE EXISTS (SELECT a FROM t WHERE b = 3)",
        ] {
            assert!(query(&db, sql, 10_000).is_ok(), "{sql}");
        }
        let correlated =
            "SELECT COUNT(*) FROM t x WHERE EXISTS (SELECT a FROM t y WHERE y.b = x.a)";
        assert_eq!(
            query(&db, correlated, 100_000),
            Err(RunError::TooExpensive { budget: 100_000 })
        );
        assert_eq!(query(&db, correlated, 2_000_000).unwrap().rows, [["10"]]);
    }

    #[test]
    fn a_refused_script_changes_nothing_and_queries_never_write() {
        let mut db = numbers(100);
        let script = "DELETE FROM t WHERE b = 1; SELECT COUNT(*) FROM t x WHERE EXISTS (SELECT a FROM t y WHERE y.a = x.b)";
        let refused = run(&mut db, script, 1_000);
        assert!(
            matches!(refused, Err(RunError::TooExpensive { .. })),
            "{refused:?}"
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .starts_with("query too expensive")
        );
        let count = |db: &Image| query(db, "SELECT COUNT(*) FROM t", 1_000).unwrap().rows;
        assert_eq!(count(&db), [["100"]]);
        let write = query(&db, "DELETE FROM t WHERE b = 1", 1_000);
        assert!(matches!(write, Err(RunError::Sql(_))), "{write:?}");
        assert_eq!(count(&db), [["100"]]);
        run(&mut db, "DELETE FROM t WHERE b = 1", 1_000).unwrap();
        assert_eq!(count(&db), [["90"]]);
    }

    #[test]
    fn engine_runs_queries_and_compares_results() {
        let mut db = build("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'y');").unwrap();
        let all = run(
            &mut db,
            "SELECT a FROM t ORDER BY a DESC",
            DEFAULT_MAX_ROWS_READ,
        )
        .unwrap();
        let any = run(&mut db, "SELECT a FROM t", DEFAULT_MAX_ROWS_READ).unwrap();
        assert!(same_rows(&all, &any, false));
        assert!(!same_rows(&all, &any, true));
        let avg = run(&mut db, "SELECT AVG(a) FROM t", DEFAULT_MAX_ROWS_READ).unwrap();
        assert_eq!(avg.rows, vec![vec!["2".to_owned()]]);
        assert!(same_value("2.0", &avg));
        let names = run(&mut db, "SELECT DISTINCT b FROM t", DEFAULT_MAX_ROWS_READ).unwrap();
        assert!(same_value("y, x", &names));
        assert!(run(&mut db, "SELECT nope FROM t", DEFAULT_MAX_ROWS_READ).is_err());
        let deleted = run(&mut db, "DELETE FROM t WHERE a = 1", DEFAULT_MAX_ROWS_READ).unwrap();
        assert_eq!(deleted.summary.as_deref(), Some("1 rows deleted"));
    }
}

#[cfg(test)]
mod sqlite_dump {
    use std::collections::BTreeMap;

    use super::*;

    /// The real-size fixtures: the music store (`scripts/make_music_db.py`, a SQLite dump of
    /// ~7,400 rows) with its 12 tasks and 63 hand-written held-out questions
    /// (`scripts/music_questions.py`), and the film service (`scripts/make_films_db.py`,
    /// ~8,800 rows) with its 62 — each gold query giving the rows SQLite gives.
    #[test]
    fn a_sqlite_dump_builds_and_answers_as_sqlite_does() {
        let mut music = build(include_str!("../tests/data/music.sql")).unwrap();
        let mut films = build(include_str!("../tests/data/films.sql")).unwrap();
        answers_as_sqlite(
            &mut music,
            include_str!("../tests/data/music_tasks.jsonl"),
            include_str!("../tests/data/music_expected.json"),
        );
        answers_as_sqlite(
            &mut music,
            include_str!("../tests/data/music_questions.jsonl"),
            include_str!("../tests/data/music_questions_expected.json"),
        );
        answers_as_sqlite(
            &mut films,
            include_str!("../tests/data/films_questions.jsonl"),
            include_str!("../tests/data/films_questions_expected.json"),
        );
        let rows = run(
            &mut music,
            "SELECT COUNT(*) FROM tracks",
            DEFAULT_MAX_ROWS_READ,
        )
        .unwrap();
        assert_eq!(rows.rows, [["3000"]]);
    }

    /// Each task of `tasks` (JSONL) gives on `db` the rows `expected` holds for its id, and
    /// every id of `expected` is a task.
    fn answers_as_sqlite(db: &mut Image, tasks: &str, expected: &str) {
        let expected: BTreeMap<String, Vec<Vec<String>>> = serde_json::from_str(expected).unwrap();
        let mut checked = 0;
        for line in tasks.lines() {
            let task: crate::Task = serde_json::from_str(line).unwrap();
            let got = run(db, &task.gold_sql, DEFAULT_MAX_ROWS_READ).unwrap();
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
    }
}
