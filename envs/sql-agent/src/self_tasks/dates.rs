//! The question shapes over a date column: rows before or from a day ("How many albums came
//! out on or after 2021-01-01?") and the row with the earliest or latest date ("the title of
//! the oldest album"). The day is written in the question as `YYYY-MM-DD`, which the
//! narrowing admits as a string literal.

use sandgym_env_api::SplitMix64;

use super::{Kind, Writer, Written, pick};
use crate::engine;

/// A date column of the table, drawn.
fn date_col<'w>(w: &'w Writer<'_>, rng: &mut SplitMix64) -> Option<&'w super::Col> {
    let dates = w.of_kind(Kind::Date);
    (!dates.is_empty()).then(|| dates[rng.below(dates.len() as u64) as usize])
}

/// Rows before, or on and after, the first of January of the year of the column's median
/// value.
pub(super) fn date_from(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = date_col(w, rng)?;
    let sql = format!(
        "SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c}",
        c = col.name,
        t = w.table
    );
    let values = engine::query(w.image, &sql, w.budget).ok()?.rows;
    let middle = values.get(values.len() / 2)?.first()?;
    let year = middle
        .get(..4)
        .filter(|y| y.bytes().all(|b| b.is_ascii_digit()))?;
    let day = format!("{year}-01-01");
    let (t, c) = (w.things(rng), w.said(&col.name, rng));
    let (op, q) = match pick(rng, &["from", "from2", "before", "before2"]) {
        "from" => (">=", format!("How many {t} have a {c} on or after {day}?")),
        "from2" => (">=", format!("Count the {t} whose {c} is {day} or later.")),
        "before" => ("<", format!("How many {t} have a {c} before {day}?")),
        _ => ("<", format!("Count the {t} with a {c} earlier than {day}.")),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {} {op} '{day}'",
        w.table, col.name
    );
    Some((q, sql, false))
}

/// The name of the row with the earliest or latest date, when no other row shares it: a
/// scalar subquery.
pub(super) fn date_extreme(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let col = date_col(w, rng)?;
    let label = w.label()?;
    let (agg, most) = if rng.below(2) == 0 {
        ("MIN", pick(rng, &["earliest", "oldest", "first"]))
    } else {
        ("MAX", pick(rng, &["latest", "newest", "most recent"]))
    };
    let sub = format!("(SELECT {agg}({}) FROM {})", col.name, w.table);
    let ties = format!(
        "SELECT COUNT(*) FROM {} WHERE {} = {sub}",
        w.table, col.name
    );
    let one_row = engine::query(w.image, &ties, w.budget)
        .ok()?
        .rows
        .first()
        .and_then(|r| r.first())
        .is_some_and(|n| n == "1");
    if !one_row {
        return None;
    }
    let (one, c, l) = (w.one(), w.said(&col.name, rng), w.said(&label.name, rng));
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("What is the {l} of the {one} with the {most} {c}?"),
        _ => format!("Which {one} has the {most} {c}? Give its {l}."),
    };
    let sql = format!(
        "SELECT {} FROM {} WHERE {} = {sub}",
        label.name, w.table, col.name
    );
    Some((q, sql, false))
}
