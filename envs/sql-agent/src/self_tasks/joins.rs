//! The question shapes that join: along a `…_id` column to the table it names
//! ([`Writer::links`]), and through that table to a third.

use sandgym_env_api::SplitMix64;

use super::{Writer, Written, pick};

/// A reference whose other side is filtered on a category: `{link.table}.{col} = '{value}'`,
/// with the words for that table's rows (`things`) and for the column (`said`).
struct Linked<'a> {
    link: &'a super::Link,
    col: String,
    value: String,
    things: String,
    said: String,
}

/// The first reference of this table (from a drawn start) whose other side has a category
/// column, with that column and one of its values.
fn linked_category<'a>(
    w: &Writer<'_>,
    links: &'a [super::Link],
    rng: &mut SplitMix64,
) -> Option<Linked<'a>> {
    if links.is_empty() {
        return None;
    }
    let start = rng.below(links.len() as u64) as usize;
    for i in 0..links.len() {
        let link = &links[(start + i) % links.len()];
        let o = w.other(&link.table, &link.cols);
        if let Some((col, value)) = o.category(rng) {
            let said = o.said(&col.name, rng);
            let things = o.things(rng);
            return Some(Linked {
                link,
                col: col.name.clone(),
                value,
                things,
                said,
            });
        }
    }
    None
}

/// `{t} JOIN {o} ON {t}.{fk} = {o}.{key}`.
pub(super) fn join(w: &Writer<'_>, link: &super::Link) -> String {
    format!(
        "{t} JOIN {o} ON {t}.{fk} = {o}.{key}",
        t = w.table,
        o = link.table,
        fk = link.fk,
        key = link.key
    )
}

/// A count over a join, filtered on a category of the other table.
pub(super) fn join_count(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let links = w.links();
    let Linked {
        link,
        col,
        value,
        things: ot,
        said: c,
    } = linked_category(w, &links, rng)?;
    let t = w.things(rng);
    let q = match pick(rng, &["a", "b", "c", "d"]) {
        // The value said as a kind of this table's rows: "How many Rock tracks are there?"
        "d" => format!("How many {value} {t} are there?"),
        "a" => format!("How many {t} belong to {ot} whose {c} is {value}?"),
        "b" => format!("Count the {t} of {ot} with {c} {value}."),
        _ => format!("How many {t} are linked to {ot} that have {c} {value}?"),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} WHERE {}.{col} = '{value}'",
        join(w, link),
        link.table
    );
    Some((q, sql, false))
}

/// This table's name-like column over a join, filtered on a category of the other table.
pub(super) fn join_list(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let label = w.label()?;
    let links = w.links();
    let Linked {
        link,
        col,
        value,
        things: ot,
        said: c,
    } = linked_category(w, &links, rng)?;
    let (t, l) = (w.things(rng), w.said(&label.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("List the {l} of the {t} whose {ot} have {c} {value}."),
        "b" => format!("Which {t} belong to {ot} with {c} {value}? Give their {l}."),
        _ => format!("Show the {l} of {t} linked to {ot} where {c} is {value}."),
    };
    let sql = format!(
        "SELECT {}.{} FROM {} WHERE {}.{col} = '{value}'",
        w.table,
        label.name,
        join(w, link),
        link.table
    );
    Some((q, sql, false))
}

/// How many rows of this table each row of the other table has, by the other's name.
pub(super) fn join_group(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let links = w.links();
    if links.is_empty() {
        return None;
    }
    let link = &links[rng.below(links.len() as u64) as usize];
    let o = w.other(&link.table, &link.cols);
    let label = o.label()?;
    let (t, ot, l) = (w.things(rng), o.things(rng), o.said(&label.name, rng));
    let q = match pick(rng, &["a", "b", "c"]) {
        "a" => format!("How many {t} does each of the {ot} have? Give the {l} and the count."),
        "b" => format!("For each of the {ot} (by {l}), count their {t}."),
        _ => format!("Number of {t} per {ot}, with the {l}."),
    };
    let sql = format!(
        "SELECT {o}.{l}, COUNT(*) FROM {j} GROUP BY {o}.{l}",
        o = link.table,
        l = label.name,
        j = join(w, link)
    );
    Some((q, sql, false))
}

/// An aggregate of this table's number over a join, filtered on the other table.
pub(super) fn join_aggregate(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let num = w.number(rng)?;
    let links = w.links();
    let Linked {
        link,
        col,
        value,
        things: ot,
        said: c,
    } = linked_category(w, &links, rng)?;
    let (t, n) = (w.things(rng), w.said(&num.name, rng));
    let (agg, q) = match pick(rng, &["avg", "avg2", "sum", "max"]) {
        "avg" => (
            "AVG",
            format!("What is the average {n} of {t} whose {ot} have {c} {value}?"),
        ),
        "avg2" => ("AVG", format!("What is the average {n} of {value} {t}?")),
        "sum" => (
            "SUM",
            format!("What is the total {n} of the {t} of {ot} with {c} {value}?"),
        ),
        _ => (
            "MAX",
            format!("Among {t} linked to {ot} with {c} {value}, what is the highest {n}?"),
        ),
    };
    let sql = format!(
        "SELECT {agg}({}.{}) FROM {} WHERE {}.{col} = '{value}'",
        w.table,
        num.name,
        join(w, link),
        link.table
    );
    Some((q, sql, false))
}

/// A count through two joins: this table, the table it names, and one that table names.
pub(super) fn two_joins(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let links = w.links();
    if links.is_empty() {
        return None;
    }
    let first = &links[rng.below(links.len() as u64) as usize];
    let middle = w.other(&first.table, &first.cols);
    let further: Vec<super::Link> = middle
        .links()
        .into_iter()
        .filter(|l| l.table != w.table)
        .collect();
    let Linked {
        link: second,
        col,
        value,
        things: gt,
        said: c,
    } = linked_category(&middle, &further, rng)?;
    let t = w.things(rng);
    let q = match pick(rng, &["a", "b"]) {
        "a" => format!("How many {t} are there whose {gt} have {c} {value}?"),
        _ => format!(
            "Count the {t} connected (through their {}) to {gt} with {c} {value}.",
            middle.things(rng)
        ),
    };
    let sql = format!(
        "SELECT COUNT(*) FROM {} JOIN {g} ON {m}.{fk} = {g}.{key} WHERE {g}.{col} = '{value}'",
        join(w, first),
        g = second.table,
        m = first.table,
        fk = second.fk,
        key = second.key
    );
    Some((q, sql, false))
}

/// Rows of this table that belong to one row of the other, named by its name-like value, the
/// way people name it ("How many tracks are on Album 5?", "the albums by Artist 12"): a
/// count, the rows' names or an aggregate of a number, over the join.
pub(super) fn join_named(w: &Writer<'_>, rng: &mut SplitMix64) -> Option<Written> {
    let links = w.links();
    if links.is_empty() {
        return None;
    }
    let link = &links[rng.below(links.len() as u64) as usize];
    let o = w.other(&link.table, &link.cols);
    let named = o.label()?;
    let values = o.values(&named.name);
    if values.is_empty() {
        return None;
    }
    let value = values[rng.below(values.len() as u64) as usize].clone();
    let t = w.things(rng);
    let by = pick(rng, &["of", "by", "for", "on", "from", "under"]);
    let filter = format!("WHERE {}.{} = '{value}'", link.table, named.name);
    let (q, select) = match (rng.below(3), w.label(), w.number(rng)) {
        (1, Some(label), _) => {
            let l = w.said(&label.name, rng);
            let q = match pick(rng, &["a", "b", "c"]) {
                "a" => format!("What are the {l}s of the {t} {by} {value}?"),
                "b" => format!("List the {l} of the {t} {by} {value}."),
                _ => format!("Which {t} are {by} {value}? Give their {l}."),
            };
            (q, format!("{}.{}", w.table, label.name))
        }
        (2, _, Some(num)) => {
            let n = w.said(&num.name, rng);
            let (agg, q) = match pick(rng, &["avg", "sum", "max"]) {
                "avg" => (
                    "AVG",
                    format!("What is the average {n} of the {t} {by} {value}?"),
                ),
                "sum" => (
                    "SUM",
                    format!("What is the total {n} of the {t} {by} {value}?"),
                ),
                _ => (
                    "MAX",
                    format!("What is the highest {n} among the {t} {by} {value}?"),
                ),
            };
            (q, format!("{agg}({}.{})", w.table, num.name))
        }
        _ => {
            let q = match pick(rng, &["a", "b", "c", "d"]) {
                "d" => format!("How many {value} {t} are there?"),
                "a" => format!("How many {t} does {value} have?"),
                "b" => format!("How many {t} are {by} {value}?"),
                _ => format!("Count the {t} {by} {value}."),
            };
            (q, "COUNT(*)".to_owned())
        }
    };
    let sql = format!("SELECT {select} FROM {} {filter}", join(w, link));
    Some((q, sql, false))
}
