//! The question shapes that name a row by its number, as people do when they have one in
//! front of them: "What is the total of invoice 25?", "How many lines does invoice 10
//! have?", "Who is the customer of invoice 100?". The number is written in the question, so
//! the narrowing admits it.

use sandgym_env_api::SplitMix64;

use super::{Kind, Writer, Written, pick};
use crate::engine;

/// One value of column `col` of `w`'s table: that of a drawn row (non-null, a whole number).
fn drawn_number(w: &Writer<'_>, col: &str, rng: &mut SplitMix64) -> Option<i64> {
    let sql = format!("SELECT {col} FROM {} WHERE {col} IS NOT NULL", w.table);
    let rows = engine::query(w.image, &sql, w.budget).ok()?.rows;
    if rows.is_empty() {
        return None;
    }
    let cell = rows[rng.below(rows.len() as u64) as usize].first()?;
    cell.parse::<i64>().ok()
}

/// A column of one row, the row named by its key: `SELECT c FROM t WHERE key = n`.
pub(super) fn by_key(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let key = w.key()?;
    let shown: Vec<_> = w
        .cols
        .iter()
        .filter(|c| matches!(c.kind, Kind::Text | Kind::Number) && !super::is_key(&c.name))
        .collect();
    if shown.is_empty() {
        return None;
    }
    let col = shown[rng.below(shown.len() as u64) as usize];
    let n = drawn_number(w, &key.name, rng)?;
    let (one, c) = (w.one(), w.said(&col.name, rng));
    let q = match pick(rng, &["a", "b", "c", "d"]) {
        "a" => format!("What is the {c} of {one} {n}?"),
        "b" => format!("Give the {c} of {one} number {n}."),
        "c" => format!("{one} {n}: what is its {c}?"),
        _ => format!("What {c} does {one} {n} have?"),
    };
    let sql = format!(
        "SELECT {} FROM {} WHERE {} = {n}",
        col.name, w.table, key.name
    );
    Some((capitalised(&q), sql, false))
}

/// This table's rows that reference one row of another table, named by its number:
/// `SELECT COUNT(*) FROM t WHERE fk = n`.
pub(super) fn child_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let links = w.links();
    if links.is_empty() {
        return None;
    }
    let link = &links[rng.below(links.len() as u64) as usize];
    let n = drawn_number(w, &link.fk, rng)?;
    let other = super::singular(&super::spoken(&link.table));
    let t = w.things(rng);
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} does {other} {n} have?"),
        "b" => format!("Count the {t} of {other} {n}."),
        _ => format!("How many {t} belong to {other} number {n}?"),
    };
    let sql = format!("SELECT COUNT(*) FROM {} WHERE {} = {n}", w.table, link.fk);
    Some((q, sql, false))
}

/// The name-like column of the row another table's row references, that row named by its
/// number: `SELECT o.label FROM t JOIN o ON … WHERE t.key = n`.
pub(super) fn parent_of(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let key = w.key()?;
    let links = w.links();
    if links.is_empty() {
        return None;
    }
    let link = &links[rng.below(links.len() as u64) as usize];
    let o = w.other(&link.table, &link.cols);
    let label = o.label()?;
    let n = drawn_number(w, &key.name, rng)?;
    let (one, other, l) = (w.one(), o.one(), o.said(&label.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("What is the {l} of the {other} of {one} {n}?"),
        "b" => format!("Which {other} does {one} {n} belong to? Give the {l}."),
        _ => format!("For {one} {n}, give its {other}'s {l}."),
    };
    let sql = format!(
        "SELECT {}.{} FROM {} WHERE {}.{} = {n}",
        link.table,
        label.name,
        super::joins::join(w, link),
        w.table,
        key.name
    );
    Some((q, sql, false))
}

/// `s` with its first letter in upper case.
fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
