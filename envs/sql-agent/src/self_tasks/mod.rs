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

use std::collections::BTreeMap;

use crate::engine::{self, Image};
use crate::links::{is_key, names_table};
use crate::tasks::Task;

mod dates;
mod joins;
mod keys;
mod shapes;

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
    /// `BOOLEAN`: "paid", "unpaid".
    Flag,
    /// `DATE`, `TIMESTAMP`: "released on or after 2021-01-01", "the oldest".
    Date,
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
        Boolean => Kind::Flag,
        Date | Timestamp => Kind::Date,
        _ => Kind::Other,
    }
}

/// How people say a database's tables and columns, when it differs from their names: a
/// question says "clients" or "people" for table `customers`, "cost" for column `price`.
/// Empty for a user's database (names are then said as written: `unit_price` as "unit
/// price"); the curriculum's databases bring theirs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vocabulary {
    /// Words for a table's rows, by table name.
    pub tables: BTreeMap<String, Vec<String>>,
    /// Words for a column, by `table.column`.
    pub columns: BTreeMap<String, Vec<String>>,
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
    write(
        database,
        image,
        config,
        max_rows_read,
        test_split,
        &Vocabulary::default(),
        Shapes::All,
    )
}

/// [`self_tasks`] with the words of `vocabulary` for tables and columns, of `shapes`.
pub(crate) fn write(
    database: &str,
    image: &Image,
    config: &SelfTasks,
    max_rows_read: u64,
    test_split: bool,
    vocabulary: &Vocabulary,
    shapes: Shapes,
) -> Vec<Task> {
    let shapes: &[Shape] = match shapes {
        Shapes::All => &SHAPES,
        Shapes::Schema => &SHAPES[..SCHEMA_SHAPES],
    };
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
            vocabulary,
        };
        let mut written: Vec<(String, String, bool, &'static str)> = Vec::new();
        // Rounds over the shapes (in an order drawn per round, so a table with few tasks
        // still gets a mix), each drawing other values and phrasings, until the table has its
        // tasks or a round adds none.
        for _round in 0..ROUNDS {
            let before = written.len();
            let mut order: Vec<usize> = (0..shapes.len()).collect();
            rng.shuffle(&mut order);
            for shape in order.into_iter().map(|i| &shapes[i]) {
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
    vocabulary: &'a Vocabulary,
}

/// A question, its gold query, and whether the rows' order counts.
type Written = (String, String, bool);

type Shape = (
    &'static str,
    fn(&Writer<'_>, &mut SplitMix64) -> Option<Written>,
);

/// Rounds over the shapes per table.
const ROUNDS: usize = 3;

/// The shapes (each at most once per table and round): the first [`SCHEMA_SHAPES`] over a
/// table's own columns and its references, then those that name one row (by its number or
/// name), a yes/no or date column, or every row of a small table.
const SHAPES: [Shape; 30] = [
    ("count", shapes::count),
    ("count-where", shapes::count_where),
    ("count-two", shapes::count_two),
    ("list-where", shapes::list_where),
    ("distinct", shapes::distinct),
    ("aggregate", shapes::aggregate),
    ("max-of", shapes::max_of),
    ("threshold", shapes::threshold),
    ("above-average", shapes::above_average),
    ("null-count", shapes::null_count),
    ("group-count", shapes::group_count),
    ("group-aggregate", shapes::group_aggregate),
    ("having", shapes::having),
    ("top", shapes::top),
    ("product-sum", shapes::product_sum),
    ("join-count", joins::join_count),
    ("join-list", joins::join_list),
    ("join-group", joins::join_group),
    ("join-aggregate", joins::join_aggregate),
    ("two-joins", joins::two_joins),
    ("flag", shapes::flag),
    ("list-all", shapes::list_all),
    ("count-equal", shapes::count_equal),
    ("by-name", shapes::by_name),
    ("date-from", dates::date_from),
    ("date-extreme", dates::date_extreme),
    ("by-key", keys::by_key),
    ("child-count", keys::child_count),
    ("parent-of", keys::parent_of),
    ("join-named", joins::join_named),
];

/// How many of [`SHAPES`] the curriculum writes ([`Shapes::Schema`]).
const SCHEMA_SHAPES: usize = 20;

/// Which of the writer's shapes one call writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shapes {
    /// Every shape: a user's own database, whose rows, names and numbers its questions name.
    All,
    /// The shapes over a table's columns and references, without those that name a row by
    /// its number or name: the curriculum's, which teach reading a schema. Measured with
    /// the lookups in it (one run of the main command each way), the main command's agent
    /// fell from 0.858 to 0.806 on the bundled test split and from 0.429 to 0.302 on the
    /// hand-written music questions, writing `…_id = …` where a join was needed.
    Schema,
}

/// A name as a person says it: `unit_price` → "unit price", `firstName` → "first name".
pub(crate) fn spoken(name: &str) -> String {
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

/// A plural noun phrase as one thing: "invoice items" → "invoice item", "categories" →
/// "category", "addresses" → "address" (English's regular plurals; the last word only).
pub(crate) fn singular(phrase: &str) -> String {
    let (head, last) = match phrase.rsplit_once(' ') {
        Some((h, l)) => (format!("{h} "), l),
        None => (String::new(), phrase),
    };
    let one = if let Some(stem) = last.strip_suffix("ies") {
        format!("{stem}y")
    } else if ["sses", "xes", "ches", "shes"]
        .iter()
        .any(|e| last.ends_with(e))
    {
        last[..last.len() - 2].to_owned()
    } else if last.ends_with('s') && !last.ends_with("ss") && last.len() > 1 {
        last[..last.len() - 1].to_owned()
    } else {
        last.to_owned()
    };
    format!("{head}{one}")
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

    /// The table's own key: `id`, or `{stem}_id` where the stem names this table
    /// (`invoice_id` in `invoices`); a whole-number column.
    fn key(&self) -> Option<&Col> {
        self.cols.iter().find(|c| {
            let lower = c.name.to_lowercase();
            c.kind == Kind::Number
                && (lower == "id"
                    || lower
                        .strip_suffix("_id")
                        .is_some_and(|stem| names_table(stem, self.table)))
        })
    }

    /// One of this table's rows as a person names it before its number: "invoice" (for
    /// "invoice 25").
    fn one(&self) -> String {
        singular(&spoken(self.table))
    }

    /// The table's row count.
    fn rows(&self) -> usize {
        self.image.items[self.table].rows.len()
    }

    fn number(&self, rng: &mut SplitMix64) -> Option<&Col> {
        let numbers = self.of_kind(Kind::Number);
        (!numbers.is_empty()).then(|| numbers[rng.below(numbers.len() as u64) as usize])
    }

    /// How the question names this table's rows: a word of the vocabulary, or its name as
    /// said.
    fn things(&self, rng: &mut SplitMix64) -> String {
        match self.vocabulary.tables.get(self.table) {
            Some(words) if !words.is_empty() => {
                words[rng.below(words.len() as u64) as usize].clone()
            }
            _ => spoken(self.table),
        }
    }

    /// How the question names column `col` of this table.
    fn said(&self, col: &str, rng: &mut SplitMix64) -> String {
        match self
            .vocabulary
            .columns
            .get(&format!("{}.{col}", self.table))
        {
            Some(words) if !words.is_empty() => {
                words[rng.below(words.len() as u64) as usize].clone()
            }
            _ => spoken(col),
        }
    }

    /// The writer for another table of the same database.
    fn other<'b>(&'b self, table: &'b str, cols: &'b [Col]) -> Writer<'b> {
        Writer {
            image: self.image,
            table,
            cols,
            tables: self.tables,
            budget: self.budget,
            vocabulary: self.vocabulary,
        }
    }

    /// This table's references: each `…_id` column that names another table, with that
    /// table's key of the same name or its `id`.
    fn links(&self) -> Vec<Link> {
        let mut out = Vec::new();
        for col in self
            .cols
            .iter()
            .filter(|c| c.name.to_lowercase().ends_with("_id"))
        {
            let Some(stem) = col.name.get(..col.name.len().saturating_sub(3)) else {
                continue;
            };
            for other in self.tables.iter().filter(|o| o.as_str() != self.table) {
                if !names_table(stem, other) {
                    continue;
                }
                let other_cols = columns(self.image, other);
                let key = if other_cols.iter().any(|c| c.name == col.name) {
                    col.name.clone()
                } else if other_cols.iter().any(|c| c.name == "id") {
                    "id".to_owned()
                } else {
                    continue;
                };
                out.push(Link {
                    fk: col.name.clone(),
                    table: (*other).clone(),
                    key,
                    cols: other_cols,
                });
            }
        }
        out
    }
}

/// A reference from one table to another: `{this}.{fk} = {table}.{key}`.
struct Link {
    fk: String,
    table: String,
    key: String,
    cols: Vec<Col>,
}

/// A date or time (`1993-02-08`, `2015-01-01 09:00:00`): not a category a person filters by
/// as written.
pub(crate) fn looks_like_date(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() >= 10 && b[4] == b'-' && b[7] == b'-' && b[..4].iter().all(u8::is_ascii_digit)
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
        assert_eq!(singular("invoice items"), "invoice item");
        assert_eq!(singular("categories"), "category");
        assert_eq!(singular("addresses"), "address");
        assert_eq!(singular("staff"), "staff");
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

    #[test]
    fn rows_named_by_number_or_by_name_and_yes_no_columns_get_their_questions() {
        let image = engine::build(include_str!("../../tests/data/music.sql")).unwrap();
        let config = SelfTasks {
            per_table: 24,
            ..SelfTasks::default()
        };
        let tasks = self_tasks("music", &image, &config, 1_000_000, false);
        let of = |intent: &str| -> Vec<&Task> {
            tasks
                .iter()
                .filter(|t| t.intent.as_deref() == Some(intent))
                .collect()
        };
        for intent in [
            "self-by-key",
            "self-child-count",
            "self-parent-of",
            "self-join-named",
            "self-flag",
            "self-list-all",
            "self-count-equal",
            "self-by-name",
            "self-date-from",
            "self-date-extreme",
        ] {
            assert!(!of(intent).is_empty(), "no {intent} task");
        }
        // A row named by its number: the number is in the question, and the gold query
        // filters on the table's own key or a reference.
        for t in of("self-by-key").into_iter().chain(of("self-child-count")) {
            let n = t.gold_sql.rsplit(' ').next().unwrap();
            assert!(n.parse::<i64>().is_ok(), "{}", t.gold_sql);
            assert!(t.question.contains(&format!(" {n}")), "{}", t.question);
            assert!(t.gold_sql.contains("_id = "), "{}", t.gold_sql);
        }
        // A row named by its name: a join filtered on the other table's name-like column.
        for t in of("self-join-named") {
            assert!(t.gold_sql.contains(" JOIN "), "{}", t.gold_sql);
        }
        assert!(
            of("self-flag")
                .iter()
                .all(|t| t.gold_sql.ends_with("= TRUE") || t.gold_sql.ends_with("= FALSE"))
        );
        for t in &tasks {
            let o = engine::query(&image, &t.gold_sql, 1_000_000).unwrap();
            assert!(!o.rows.is_empty(), "{}", t.gold_sql);
        }
    }
}
