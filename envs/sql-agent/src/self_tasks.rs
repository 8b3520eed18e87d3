//! Tasks written from a database itself: questions with gold queries made from its schema and
//! values, so an agent can be trained for a user's own database that comes without questions
//! (or with only a few, kept for evaluation).
//!
//! For each table the generator reads its columns and types and a sample of its values, and
//! writes questions of several shapes — counting rows, a filter on a categorical text column,
//! the rows' name-like column under such a filter, an aggregate of a numeric column, a
//! threshold on it, grouping, the top rows by a number, and a join along an `…_id` column to
//! the table it names — each phrased one of several ways, chosen by a seeded draw. Every
//! literal of a gold query is written in its question (a value of the database, or a number
//! of the question), so the env's narrowing admits every gold answer. Tables and columns are
//! named as a person would say them (`unit_price` → "unit price"). Everything is
//! deterministic in the seed and the database's content: the same tasks natively and in the
//! guest.

use gluesql::core::ast::DataType;
use sandgym_env_api::{Split, SplitMix64};
use serde::{Deserialize, Serialize};

use crate::engine::{self, Image};
use crate::tasks::Task;

/// How many tasks to write and how (`"self_tasks"` in the env configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfTasks {
    /// The most tasks written per table.
    pub per_table: usize,
    /// The seed of the draws (values, phrasings).
    pub seed: u64,
    /// One task in this many goes to the test split when the configuration has no task file
    /// of its own (0: every generated task is a train task). With a task file, every
    /// generated task is a train task and the file's own tasks keep their splits.
    pub test_every: usize,
}

impl Default for SelfTasks {
    fn default() -> Self {
        Self {
            per_table: 12,
            seed: 0,
            test_every: 5,
        }
    }
}

/// What the generator knows about one column.
#[derive(Clone, Debug)]
struct Col {
    name: String,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Other,
}

/// The columns of `table` in `image`, with their kinds.
fn columns(image: &Image, table: &str) -> Vec<Col> {
    image.items[table]
        .schema
        .column_defs
        .iter()
        .flatten()
        .map(|c| Col {
            name: c.name.clone(),
            kind: kind(&c.data_type),
        })
        .collect()
}

fn kind(t: &DataType) -> Kind {
    use DataType::*;
    match t {
        Text | Uuid => Kind::Text,
        Int8 | Int16 | Int32 | Int | Int128 | Uint8 | Uint16 | Uint32 | Uint64 | Uint128
        | Float32 | Float | Decimal => Kind::Number,
        _ => Kind::Other,
    }
}

/// The tasks `config` writes for database `database` (built as `image`), validated: every
/// gold query runs under `max_rows_read` and returns rows. Ids are
/// `{database}-self-{table}-{n}`.
pub fn self_tasks(
    database: &str,
    image: &Image,
    config: &SelfTasks,
    max_rows_read: u64,
    test_split: bool,
) -> Vec<Task> {
    let mut tables: Vec<&String> = image.items.keys().collect();
    tables.sort();
    let mut out = Vec::new();
    for (t_index, table) in tables.iter().enumerate() {
        let cols = columns(image, table);
        let mut rng = SplitMix64::new(config.seed ^ (t_index as u64).wrapping_mul(0x9E37_79B9));
        let writer = Writer {
            image,
            table,
            cols: &cols,
            tables: &tables,
            budget: max_rows_read,
        };
        let mut written: Vec<(String, String, bool, &'static str)> = Vec::new();
        // Rounds over the shapes, each drawing other values and phrasings, until the table
        // has its tasks or a round adds none.
        for _round in 0..ROUNDS {
            let before = written.len();
            for shape in SHAPES {
                if written.len() >= config.per_table {
                    break;
                }
                if let Some((q, sql, ordered)) = shape.1(&writer, &mut rng) {
                    let ok = matches!(engine::query(image, &sql, max_rows_read), Ok(o) if !o.rows.is_empty());
                    if ok && !written.iter().any(|w| w.1 == sql) {
                        written.push((q, sql, ordered, shape.0));
                    }
                }
            }
            if written.len() == before || written.len() >= config.per_table {
                break;
            }
        }
        for (n, (question, gold_sql, ordered, intent)) in written.into_iter().enumerate() {
            let index = out.len();
            out.push(Task {
                id: format!("{database}-self-{table}-{n}"),
                database: database.to_owned(),
                question,
                gold_sql,
                ordered,
                split: if test_split && config.test_every > 0 && index % config.test_every == 0 {
                    Split::Test
                } else {
                    Split::Train
                },
                intent: Some(format!("self-{intent}")),
            });
        }
    }
    out
}

/// A question writer for one table.
struct Writer<'a> {
    image: &'a Image,
    table: &'a str,
    cols: &'a [Col],
    tables: &'a [&'a String],
    budget: u64,
}

type Shape = (
    &'static str,
    fn(&Writer<'_>, &mut SplitMix64) -> Option<(String, String, bool)>,
);

/// Rounds over [`SHAPES`] per table.
const ROUNDS: usize = 3;

/// The shapes, in the order they are tried (each at most once per table).
const SHAPES: [Shape; 9] = [
    ("count", count),
    ("count-where", count_where),
    ("list-where", list_where),
    ("aggregate", aggregate),
    ("threshold", threshold),
    ("group-count", group_count),
    ("top", top),
    ("join-count", join_count),
    ("max-of", max_of),
];

/// A name as a person says it: `unit_price` → "unit price", `firstName` → "first name".
fn spoken(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if ch == '_' || ch == '-' {
            out.push(' ');
            prev_lower = false;
        } else if ch.is_uppercase() && prev_lower {
            out.push(' ');
            out.extend(ch.to_lowercase());
            prev_lower = false;
        } else {
            out.extend(ch.to_lowercase());
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        }
    }
    out.trim().to_owned()
}

fn pick<'s>(rng: &mut SplitMix64, options: &[&'s str]) -> &'s str {
    options[rng.below(options.len() as u64) as usize]
}

impl Writer<'_> {
    fn of_kind(&self, kind: Kind) -> Vec<&Col> {
        self.cols
            .iter()
            .filter(|c| c.kind == kind && !is_key(&c.name))
            .collect()
    }

    /// The name-like column: `name`, `title`, `…_name`, else the first text column.
    fn label(&self) -> Option<&Col> {
        let texts = self.of_kind(Kind::Text);
        texts
            .iter()
            .find(|c| matches!(c.name.to_lowercase().as_str(), "name" | "title"))
            .or_else(|| {
                texts
                    .iter()
                    .find(|c| c.name.to_lowercase().ends_with("name"))
            })
            .or(texts.first())
            .copied()
    }

    /// The distinct values of a column (non-null, quote-free, short), in the order stored.
    fn values(&self, col: &str) -> Vec<String> {
        let sql = format!("SELECT DISTINCT {col} FROM {}", self.table);
        engine::query(self.image, &sql, self.budget)
            .map(|o| {
                o.rows
                    .into_iter()
                    .filter_map(|r| r.into_iter().next())
                    .filter(|v| {
                        v != "NULL"
                            && !v.is_empty()
                            && v.len() <= 40
                            && !v.contains(['\'', '"', '\\'])
                            && v.trim() == v
                            && !looks_like_date(v)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A categorical text column (2 to 60 distinct values) and one of its values.
    fn category(&self, rng: &mut SplitMix64) -> Option<(&Col, String)> {
        let label = self.label().map(|c| c.name.clone());
        let texts = self.of_kind(Kind::Text);
        let only = texts.len() == 1;
        let mut candidates: Vec<(&Col, Vec<String>)> = texts
            .into_iter()
            .filter(|c| only || Some(&c.name) != label.as_ref())
            .map(|c| (c, self.values(&c.name)))
            .filter(|(_, v)| (2..=60).contains(&v.len()) && 2 * v.len() <= self.rows())
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let (col, values) = candidates.swap_remove(rng.below(candidates.len() as u64) as usize);
        let value = values[rng.below(values.len() as u64) as usize].clone();
        Some((col, value))
    }

    /// The table's row count.
    fn rows(&self) -> usize {
        self.image.items[self.table].rows.len()
    }

    fn number(&self, rng: &mut SplitMix64) -> Option<&Col> {
        let numbers = self.of_kind(Kind::Number);
        (!numbers.is_empty()).then(|| numbers[rng.below(numbers.len() as u64) as usize])
    }

    fn things(&self) -> String {
        spoken(self.table)
    }
}

/// A date or time (`1993-02-08`, `2015-01-01 09:00:00`): not a category a person filters by
/// as written.
fn looks_like_date(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 10 && b[4] == b'-' && b[7] == b'-' && b[..4].iter().all(u8::is_ascii_digit)
}

/// A column that is a key: `id`, `…_id`, `…Id`.
fn is_key(name: &str) -> bool {
    let lower = name.to_lowercase();
    lower == "id" || lower.ends_with("_id") || (name.ends_with("Id") && name.len() > 2)
}

fn count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let t = w.things();
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} are there?"),
        "b" => format!("Count the {t}."),
        _ => format!("What is the number of {t}?"),
    };
    Some((q, format!("SELECT COUNT(*) FROM {}", w.table), false))
}

fn count_where(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let (col, value) = w.category(rng)?;
    let (t, c) = (w.things(), spoken(&col.name));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} have {c} {value}?"),
        "b" => format!("Count the {t} whose {c} is {value}."),
        _ => format!("Number of {t} with {c} {value}?"),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} = '{value}'",
        w.table, col.name
    );
    Some((q, sql, false))
}

fn list_where(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let label = w.label()?;
    let (col, value) = w.category(rng)?;
    if col.name == label.name {
        return None;
    }
    let (t, c, l) = (w.things(), spoken(&col.name), spoken(&label.name));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("List the {l} of the {t} whose {c} is {value}."),
        "b" => format!("Which {t} have {c} {value}? Give their {l}."),
        _ => format!("What are the {l}s of {t} with {c} {value}?"),
    };
    let sql = format!(
        "SELECT {} FROM {} WHERE {} = '{value}'",
        label.name, w.table, col.name
    );
    Some((q, sql, false))
}

fn aggregate(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let col = w.number(rng)?;
    let (t, c) = (w.things(), spoken(&col.name));
    let (agg, q) = match pick(rng, &["avg", "sum", "min"]) {
        "avg" => ("AVG", format!("What is the average {c} of the {t}?")),
        "sum" => ("SUM", format!("What is the total {c} over all {t}?")),
        _ => ("MIN", format!("What is the lowest {c} among the {t}?")),
    };
    Some((
        q,
        format!("SELECT {agg}({}) FROM {}", col.name, w.table),
        false,
    ))
}

fn max_of(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let col = w.number(rng)?;
    let (t, c) = (w.things(), spoken(&col.name));
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("What is the highest {c} of any of the {t}?"),
        _ => format!("Find the largest {c} among the {t}."),
    };
    Some((
        q,
        format!("SELECT MAX({}) FROM {}", col.name, w.table),
        false,
    ))
}

fn threshold(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let col = w.number(rng)?;
    // A whole number from the column's own values (their median, rounded down).
    let sql = format!(
        "SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c}",
        c = col.name,
        t = w.table
    );
    let values = engine::query(w.image, &sql, w.budget).ok()?.rows;
    let middle = values.get(values.len() / 2)?.first()?;
    let n = middle.parse::<f64>().ok()?.floor();
    if !n.is_finite() || n.abs() > 1e12 {
        return None;
    }
    let n = n as i64;
    let (t, c) = (w.things(), spoken(&col.name));
    let (op, q) = match pick(rng, &["gt", "lt"]) {
        "gt" => (">", format!("How many {t} have a {c} greater than {n}?")),
        _ => ("<", format!("How many {t} have a {c} below {n}?")),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} {op} {n}",
        w.table, col.name
    );
    Some((q, sql, false))
}

fn group_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let (col, _) = w.category(rng)?;
    let (t, c) = (w.things(), spoken(&col.name));
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("How many {t} are there for each {c}?"),
        _ => format!("Count the {t} per {c}."),
    };
    let sql = format!(
        "SELECT {c}, COUNT(*) FROM {t} GROUP BY {c}",
        c = col.name,
        t = w.table
    );
    Some((q, sql, false))
}

fn top(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    let label = w.label()?;
    let col = w.number(rng)?;
    let k = 3;
    // Only when the top k are not tied with the next one (else the answer is not unique).
    let check = format!(
        "SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c} DESC LIMIT {n}",
        c = col.name,
        t = w.table,
        n = k + 1
    );
    let rows = engine::query(w.image, &check, w.budget).ok()?.rows;
    if rows.len() <= k || rows[k - 1] == rows[k] {
        return None;
    }
    let (t, c, l) = (w.things(), spoken(&col.name), spoken(&label.name));
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("Which {k} {t} have the highest {c}? Give their {l}."),
        _ => format!("List the {l} of the {k} {t} with the largest {c}, largest first."),
    };
    let sql = format!(
        "SELECT {l} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c} DESC LIMIT {k}",
        l = label.name,
        t = w.table,
        c = col.name
    );
    Some((q, sql, true))
}

/// A count over a join along a `…_id` column of this table to the table it names (that
/// table's own key of the same name, or its `id`), filtered on a category of the other table.
fn join_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<(String, String, bool)> {
    for col in w
        .cols
        .iter()
        .filter(|c| c.name.to_lowercase().ends_with("_id"))
    {
        let Some(stem) = col.name.get(..col.name.len().saturating_sub(3)) else {
            continue;
        };
        for other in w.tables.iter().filter(|o| o.as_str() != w.table) {
            if !names_table(stem, other) {
                continue;
            }
            let other_cols = columns(w.image, other);
            let key = if other_cols.iter().any(|c| c.name == col.name) {
                col.name.clone()
            } else if other_cols.iter().any(|c| c.name == "id") {
                "id".to_owned()
            } else {
                continue;
            };
            let o = Writer {
                image: w.image,
                table: other,
                cols: &other_cols,
                tables: w.tables,
                budget: w.budget,
            };
            let (ocol, value) = o.category(rng)?;
            let (t, c, ot) = (w.things(), spoken(&ocol.name), o.things());
            let q = match pick(rng, &["a", "b"]) {
                "a" => format!("How many {t} belong to {ot} whose {c} is {value}?"),
                _ => format!("Count the {t} of {ot} with {c} {value}."),
            };
            let sql = format!(
                "SELECT COUNT(*) FROM {t} JOIN {o} ON {t}.{fk} = {o}.{key} WHERE {o}.{oc} = '{value}'",
                t = w.table,
                o = other,
                fk = col.name,
                oc = ocol.name
            );
            return Some((q, sql, false));
        }
    }
    None
}

/// Whether `stem` (of a `stem_id` column) names `table`: equal, or its plural.
fn names_table(stem: &str, table: &str) -> bool {
    let (s, t) = (stem.to_lowercase(), table.to_lowercase());
    t == s
        || t == format!("{s}s")
        || t == format!("{s}es")
        || (s.ends_with('y') && t == format!("{}ies", &s[..s.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spoken_and_stems_name_tables() {
        assert_eq!(spoken("unit_price"), "unit price");
        assert_eq!(spoken("firstName"), "first name");
        assert!(names_table("artist", "artists"));
        assert!(names_table("category", "categories"));
        assert!(!names_table("artist", "albums"));
    }

    #[test]
    fn a_database_without_tasks_gets_valid_ones_of_every_shape() {
        let db = crate::synthetic_db(200);
        let image = engine::build(&db.script).unwrap();
        let tasks = self_tasks("synthetic", &image, &SelfTasks::default(), 1_000_000, true);
        assert!(tasks.len() >= 10, "{}", tasks.len());
        for t in &tasks {
            let o = engine::query(&image, &t.gold_sql, 1_000_000).unwrap();
            assert!(!o.rows.is_empty(), "{}", t.gold_sql);
            // Every string literal of the gold query is written in the question.
            for lit in t.gold_sql.split('\'').skip(1).step_by(2) {
                assert!(t.question.contains(lit), "{}: {}", t.question, t.gold_sql);
            }
        }
        let intents: std::collections::BTreeSet<_> =
            tasks.iter().filter_map(|t| t.intent.clone()).collect();
        assert!(intents.len() >= 6, "{intents:?}");
        assert!(tasks.iter().any(|t| t.split == Split::Test));
        // Deterministic.
        let again = self_tasks("synthetic", &image, &SelfTasks::default(), 1_000_000, true);
        assert_eq!(tasks, again);
    }
}
