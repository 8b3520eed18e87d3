//! The question shapes over one table: counts, filters, aggregates, thresholds, NULL checks,
//! distinct values, grouping with and without `HAVING`, the top rows, arithmetic.

use sandgym_env_api::SplitMix64;

use super::{Kind, Writer, Written, pick};
use crate::engine;

pub(super) fn count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let t = w.things(rng);
    let q = match pick(rng, &["a", "b", "c", "d"]) {
        "a" => format!("How many {t} are there?"),
        "b" => format!("Count the {t}."),
        "c" => format!("What is the number of {t}?"),
        _ => format!("How many {t} does the database hold?"),
    };
    Some((q, format!("SELECT COUNT(*) FROM {}", w.table), false))
}

pub(super) fn count_where(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (col, value) = w.category(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c", "d", "e", "f"]) {
        // The value said as a kind of row ("How many JP customers are there?") or, for a
        // place, where the rows are from.
        "e" => format!("How many {value} {t} are there?"),
        "f" if is_place(&c) => format!("How many {t} are from {value}?"),
        "a" => format!("How many {t} have {c} {value}?"),
        "b" => format!("Count the {t} whose {c} is {value}."),
        "c" => format!("Number of {t} with {c} {value}?"),
        _ => format!("How many of the {t} are {value} ({c})?"),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} = '{value}'",
        w.table, col.name
    );
    Some((q, sql, false))
}

/// A count under two category filters joined by `AND`.
pub(super) fn count_two(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (a, va) = w.category(rng)?;
    let (b, vb) = w.category(rng)?;
    if a.name == b.name {
        return None;
    }
    let t = w.things(rng);
    let (ca, cb) = (w.said(&a.name, rng), w.said(&b.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} have {ca} {va} and {cb} {vb}?"),
        "b" => format!("Count the {t} whose {ca} is {va} and whose {cb} is {vb}."),
        _ => format!("Among the {t} with {ca} {va}, how many have {cb} {vb}?"),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} = '{va}' AND {} = '{vb}'",
        w.table, a.name, b.name
    );
    Some((q, sql, false))
}

pub(super) fn list_where(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let label = w.label()?;
    let (col, value) = w.category(rng)?;
    if col.name == label.name {
        return None;
    }
    let t = w.things(rng);
    let (c, l) = (w.said(&col.name, rng), w.said(&label.name, rng));
    let q = match pick(rng, &["a", "b", "c", "d"]) {
        "a" => format!("List the {l} of the {t} whose {c} is {value}."),
        "b" => format!("Which {t} have {c} {value}? Give their {l}."),
        "c" => format!("What are the {l}s of {t} with {c} {value}?"),
        _ => format!("Show the {l} of every one of the {t} where {c} is {value}."),
    };
    let sql = format!(
        "SELECT {} FROM {} WHERE {} = '{value}'",
        label.name, w.table, col.name
    );
    Some((q, sql, false))
}

/// The distinct values of a category column.
pub(super) fn distinct(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (col, _) = w.category(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("Which different {c} values do the {t} have?"),
        "b" => format!("List each {c} that occurs among the {t}, once."),
        _ => format!("What distinct {c} values appear in the {t}?"),
    };
    let sql = format!("SELECT DISTINCT {} FROM {}", col.name, w.table);
    Some((q, sql, false))
}

pub(super) fn aggregate(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = w.number(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let (agg, q) = match pick(rng, &["avg", "avg2", "sum", "sum2", "min"]) {
        "avg" => ("AVG", format!("What is the average {c} of the {t}?")),
        "avg2" => ("AVG", format!("On average, what {c} do {t} have?")),
        "sum" => ("SUM", format!("What is the total {c} over all {t}?")),
        "sum2" => ("SUM", format!("Add up the {c} of all the {t}.")),
        _ => ("MIN", format!("What is the lowest {c} among the {t}?")),
    };
    Some((
        q,
        format!("SELECT {agg}({}) FROM {}", col.name, w.table),
        false,
    ))
}

pub(super) fn max_of(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = w.number(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("What is the highest {c} of any of the {t}?"),
        "b" => format!("Find the largest {c} among the {t}."),
        _ => format!("What is the maximum {c} in {t}?"),
    };
    Some((
        q,
        format!("SELECT MAX({}) FROM {}", col.name, w.table),
        false,
    ))
}

/// A count above or below a whole number taken from the column's own values (their median,
/// rounded down).
pub(super) fn threshold(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = w.number(rng)?;
    let n = median(w, &col.name)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let (op, q) = match pick(rng, &["gt", "gt2", "lt", "lt2"]) {
        "gt" => (">", format!("How many {t} have a {c} greater than {n}?")),
        "gt2" => (">", format!("Count the {t} with {c} over {n}.")),
        "lt" => ("<", format!("How many {t} have a {c} below {n}?")),
        _ => ("<", format!("How many {t} have less than {n} {c}?")),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} {op} {n}",
        w.table, col.name
    );
    Some((q, sql, false))
}

fn median(w: &Writer<'_>, col: &str) -> Option<i64> {
    let sql = format!(
        "SELECT {col} FROM {t} WHERE {col} IS NOT NULL ORDER BY {col}",
        t = w.table
    );
    let values = engine::query(w.image, &sql, w.budget).ok()?.rows;
    let middle = values.get(values.len() / 2)?.first()?;
    let n = middle.parse::<f64>().ok()?.floor();
    (n.is_finite() && n.abs() <= 1e12).then_some(n as i64)
}

/// Rows above the column's average: a scalar subquery.
pub(super) fn above_average(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = w.number(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let sub = format!("(SELECT AVG({}) FROM {})", col.name, w.table);
    if let Some(label) = w.label()
        && rng.below(2) == 0
    {
        let l = w.said(&label.name, rng);
        let q = match pick(rng, &["a", "b"]) {
            "a" => format!("Which {t} have a {c} above the average? Give their {l}."),
            _ => format!("List the {l} of {t} whose {c} is higher than the average {c}."),
        };
        let sql = format!(
            "SELECT {} FROM {} WHERE {} > {sub}",
            label.name, w.table, col.name
        );
        return Some((q, sql, false));
    }
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("How many {t} have a {c} above the average?"),
        _ => format!("Count the {t} whose {c} is below the average {c}."),
    };
    let op = if q.contains("below") { "<" } else { ">" };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} {op} {sub}",
        w.table, col.name
    );
    Some((q, sql, false))
}

/// Rows where a column is NULL (or is not), for a column that has NULLs.
pub(super) fn null_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let nullable: Vec<&super::Col> = w
        .cols
        .iter()
        .filter(|c| !super::is_key(&c.name))
        .filter(|c| {
            let sql = format!(
                "SELECT COUNT(*) FROM {} WHERE {} IS NULL",
                w.table, c.name
            );
            matches!(engine::query(w.image, &sql, w.budget), Ok(o) if o.rows.first().and_then(|r| r.first()).is_some_and(|n| n != "0"))
        })
        .collect();
    if nullable.is_empty() {
        return None;
    }
    let col = nullable[rng.below(nullable.len() as u64) as usize];
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let (not, q) = match pick(rng, &["a", "b", "c", "d"]) {
        "a" => ("", format!("How many {t} have no {c} recorded?")),
        "b" => ("", format!("Count the {t} whose {c} is missing.")),
        "c" => ("NOT ", format!("How many {t} have a {c} recorded?")),
        _ => ("NOT ", format!("Count the {t} with a known {c}.")),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} IS {not}NULL",
        w.table, col.name
    );
    Some((q, sql, false))
}

pub(super) fn group_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (col, _) = w.category(rng)?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} are there for each {c}?"),
        "b" => format!("Count the {t} per {c}."),
        _ => format!("For every {c}, give the number of {t}."),
    };
    let sql = format!(
        "SELECT {c}, COUNT(*) FROM {t} GROUP BY {c}",
        c = col.name,
        t = w.table
    );
    Some((q, sql, false))
}

/// An aggregate of a number per category.
pub(super) fn group_aggregate(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (cat, _) = w.category(rng)?;
    let num = w.number(rng)?;
    let t = w.things(rng);
    let (c, n) = (w.said(&cat.name, rng), w.said(&num.name, rng));
    let (agg, q) = match pick(rng, &["avg", "sum", "max"]) {
        "avg" => (
            "AVG",
            format!("What is the average {n} of the {t} for each {c}?"),
        ),
        "sum" => ("SUM", format!("Give the total {n} of the {t} per {c}.")),
        _ => (
            "MAX",
            format!("For each {c}, what is the highest {n} among the {t}?"),
        ),
    };
    let sql = format!(
        "SELECT {c}, {agg}({n}) FROM {t} GROUP BY {c}",
        c = cat.name,
        n = num.name,
        t = w.table
    );
    Some((q, sql, false))
}

/// The categories with more rows than a number written in the question.
pub(super) fn having(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let (cat, _) = w.category(rng)?;
    let sql = format!(
        "SELECT COUNT(*) FROM {} GROUP BY {} ORDER BY COUNT(*)",
        w.table, cat.name
    );
    let counts: Vec<i64> = engine::query(w.image, &sql, w.budget)
        .ok()?
        .rows
        .iter()
        .filter_map(|r| r.first()?.parse().ok())
        .collect();
    // A number some groups pass and some do not.
    let n = *counts.get(counts.len() / 2)?;
    if counts.last().is_none_or(|m| *m <= n) || n < 1 {
        return None;
    }
    let (t, c) = (w.things(rng), w.said(&cat.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("Which {c} values have more than {n} {t}?"),
        "b" => format!("List every {c} shared by over {n} of the {t}."),
        _ => format!("For which {c} are there more than {n} {t}?"),
    };
    let sql = format!(
        "SELECT {c} FROM {t} GROUP BY {c} HAVING COUNT(*) > {n}",
        c = cat.name,
        t = w.table
    );
    Some((q, sql, false))
}

/// The top row (a superlative) or the top 3 or 5 rows by a number, when they are not tied
/// with the next one.
pub(super) fn top(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let label = w.label()?;
    let col = w.number(rng)?;
    let k = *[1usize, 3, 5].get(rng.below(3) as usize)?;
    let desc = rng.below(3) > 0;
    let dir = if desc { "DESC" } else { "ASC" };
    let check = format!(
        "SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c} {dir} LIMIT {n}",
        c = col.name,
        t = w.table,
        n = k + 1
    );
    let rows = engine::query(w.image, &check, w.budget).ok()?.rows;
    if rows.len() <= k || rows[k - 1] == rows[k] {
        return None;
    }
    let t = w.things(rng);
    let (c, l) = (w.said(&col.name, rng), w.said(&label.name, rng));
    let (most, first) = if desc {
        ("highest", "largest first")
    } else {
        ("lowest", "smallest first")
    };
    let q = match pick(rng, &["a", "b", "c"]) {
        // The single top row: a superlative, no number written (`LIMIT 1`).
        _ if k == 1 => match pick(rng, &["a", "b"]) {
            "a" => format!("Which of the {t} has the {most} {c}? Give its {l}."),
            _ => format!("What is the {l} of the one with the {most} {c} among the {t}?"),
        },
        "a" => format!("Which {k} {t} have the {most} {c}? Give their {l}."),
        "b" => format!("List the {l} of the {k} {t} with the {most} {c}, {first}."),
        _ => format!("Top {k} {t} by {c} ({first}): their {l}?"),
    };
    let sql = format!(
        "SELECT {l} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c} {dir} LIMIT {k}",
        l = label.name,
        t = w.table,
        c = col.name
    );
    Some((q, sql, true))
}

/// The sum of the product of two numeric columns (`quantity × price`).
pub(super) fn product_sum(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let numbers = w.of_kind(Kind::Number);
    if numbers.len() < 2 {
        return None;
    }
    let i = rng.below(numbers.len() as u64) as usize;
    let j = (i + 1 + rng.below(numbers.len() as u64 - 1) as usize) % numbers.len();
    let (a, b) = (numbers[i], numbers[j]);
    let t = w.things(rng);
    let (ca, cb) = (w.said(&a.name, rng), w.said(&b.name, rng));
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("What is the sum of {ca} times {cb} over all {t}?"),
        _ => format!("For each of the {t}, multiply its {ca} by its {cb}; what is the total?"),
    };
    let sql = format!("SELECT SUM({} * {}) FROM {}", a.name, b.name, w.table);
    Some((q, sql, false))
}

/// Whether a column, as said, names a place (a row is "from" its value).
fn is_place(said: &str) -> bool {
    ["country", "city", "state", "region", "town", "nation"]
        .iter()
        .any(|p| said.contains(p))
}

/// Rows where a yes/no column is true or false ("How many invoices are paid?", "… not
/// paid?").
pub(super) fn flag(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let flags = w.of_kind(Kind::Flag);
    if flags.is_empty() {
        return None;
    }
    let col = flags[rng.below(flags.len() as u64) as usize];
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let (value, q) = match pick(rng, &["a", "b", "c", "d"]) {
        "a" => ("TRUE", format!("How many {t} are {c}?")),
        "b" => ("TRUE", format!("Count the {t} whose {c} is true.")),
        "c" => ("FALSE", format!("How many {t} are not {c}?")),
        _ => ("FALSE", format!("Count the {t} whose {c} is false.")),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} = {value}",
        w.table, col.name
    );
    Some((q, sql, false))
}

/// The name-like column of every row, for a table small enough to list ("List the names of
/// all genres.").
pub(super) fn list_all(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let label = w.label()?;
    if w.rows() > LIST_ALL_ROWS {
        return None;
    }
    let (t, l) = (w.things(rng), w.said(&label.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("List the {l}s of all {t}."),
        "b" => format!("What are the {l}s of the {t}?"),
        _ => format!("Give the {l} of every one of the {t}."),
    };
    Some((q, format!("SELECT {} FROM {}", label.name, w.table), false))
}

/// The most rows a table may have for [`list_all`] to ask for all of them.
const LIST_ALL_ROWS: usize = 60;

/// Rows whose number equals one of a few values the column takes ("How many tracks cost
/// 1.99?", "rated 5").
pub(super) fn count_equal(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = w.number(rng)?;
    let sql = format!(
        "SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL",
        c = col.name,
        t = w.table
    );
    let values = engine::query(w.image, &sql, w.budget).ok()?.rows;
    // A few values, each shared by several rows on average.
    if !(2..=20).contains(&values.len()) || 3 * values.len() > w.rows() {
        return None;
    }
    let v = values[rng.below(values.len() as u64) as usize]
        .first()?
        .clone();
    v.parse::<f64>().ok()?;
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} have a {c} of {v}?"),
        "b" => format!("How many {t} are {c} {v}?"),
        _ => format!("Count the {t} with {c} equal to {v}."),
    };
    let sql = format!("SELECT COUNT(*) FROM {} WHERE {} = {v}", w.table, col.name);
    Some((q, sql, false))
}

/// Another column of the row that one text value names, from a column whose values are
/// (nearly) all different ("the email of the customer whose last name is Last15").
pub(super) fn by_name(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let rows = w.rows();
    let named: Vec<(&super::Col, Vec<String>)> = w
        .of_kind(Kind::Text)
        .into_iter()
        .map(|c| (c, w.values(&c.name)))
        .filter(|(_, v)| v.len() > 60 || (v.len() >= 2 && 10 * v.len() >= 9 * rows))
        .collect();
    if named.is_empty() {
        return None;
    }
    let (key, values) = &named[rng.below(named.len() as u64) as usize];
    let shown: Vec<&super::Col> = w
        .cols
        .iter()
        .filter(|c| c.name != key.name && matches!(c.kind, Kind::Text | Kind::Number))
        .filter(|c| !super::is_key(&c.name))
        .collect();
    if shown.is_empty() {
        return None;
    }
    let col = shown[rng.below(shown.len() as u64) as usize];
    let v = &values[rng.below(values.len() as u64) as usize];
    let (one, k, c) = (w.one(), w.said(&key.name, rng), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("What is the {c} of the {one} whose {k} is {v}?"),
        "b" => format!("Give the {c} of the {one} with {k} {v}."),
        _ => format!("The {one} with {k} {v}: what is its {c}?"),
    };
    let sql = format!(
        "SELECT {} FROM {} WHERE {} = '{v}'",
        col.name, w.table, key.name
    );
    Some((q, sql, false))
}
