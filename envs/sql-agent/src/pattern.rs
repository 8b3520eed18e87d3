//! The shape of the SQL this env expects, as a regular expression over its own tables and
//! columns. It is declared on `run_sql`'s query and on the final response so a constrained
//! decoder chooses among valid queries over *these* identifiers instead of spelling SQL one
//! character at a time; the env itself still runs whatever text arrives.

use crate::links::JoinOn;

/// Escapes regex metacharacters in an identifier.
pub(crate) fn escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let meta = "\\.+*?()|[]{}^$".contains(c);
            meta.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

/// The alternation of `words`, escaped, longest first.
pub(crate) fn alternatives(words: &[String]) -> String {
    let mut sorted: Vec<String> = words.iter().map(|w| escape(w)).collect();
    // Longest first, so no alternative is a prefix that hides a longer one.
    sorted.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    sorted.dedup();
    format!("({})", sorted.join("|"))
}

/// The query pattern over `tables` and `columns`: one `SELECT` with optional `DISTINCT`, up to
/// four items (columns, `*`, numbers, aggregates of a column or of two columns' product,
/// sum, difference or ratio), `FROM` a table with up to two `JOIN … ON`, up to two `WHERE`
/// conditions joined by `AND` (against a number, a quoted string, `TRUE`/`FALSE` or a scalar
/// subquery, or `IS [NOT] NULL`), `GROUP BY` one or two columns with an optional `HAVING` on
/// an aggregate, `ORDER BY … ASC|DESC` and `LIMIT`. Every gold query of the
/// bundled tasks and every query of the scripted baseline has this shape. The pattern is
/// anchored (`^…$`): JSON-schema patterns otherwise match anywhere in the string.
///
/// ```
/// let p = sandgym_env_sql::sql_pattern(&["users".into()], &["id".into(), "name".into()]);
/// assert!(p.starts_with("^SELECT ") && p.ends_with('$'));
/// ```
pub fn sql_pattern(tables: &[String], columns: &[String]) -> String {
    pattern(tables, columns, "'([^']|''){0,48}'")
}

/// One table of a database and its columns, as [`sql_pattern_for`] takes them.
pub type TableColumns = (String, Vec<String>);

/// What a `WHERE` condition may compare a column with, in [`sql_pattern_typed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compared {
    /// A number column: the question's numbers and scalar subqueries over itself.
    Number,
    /// A yes/no column: `TRUE` or `FALSE`.
    Flag,
    /// A text or date column: these string literals (the question's values this column
    /// holds, and its dates) and its own `MIN`/`MAX`.
    Text(Vec<String>),
    /// Any literal, or a subquery over itself (a column whose kind is not known).
    Any,
}

/// One column and what a condition may compare it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypedColumn {
    /// Its name.
    pub name: String,
    /// What it may be compared with.
    pub compared: Compared,
    /// Whether it may be tested with `IS NULL`: the env passes whether the column holds a NULL
    /// (on one that holds none no row is). `IS NOT NULL`, a guard before ordering by it, may
    /// test any column.
    pub nulls: bool,
}

/// One table and its typed columns, as [`sql_pattern_typed`] takes them.
pub type TypedTable = (String, Vec<TypedColumn>);

/// Which columns an alternation keeps.
type Keep<'a> = &'a dyn Fn(&TypedColumn) -> bool;

/// The alternation of a branch's column references that a [`Keep`] keeps, or `None` when it
/// keeps none.
type Refs<'a> = &'a dyn Fn(Keep<'_>) -> Option<String>;

/// [`sql_pattern`] narrowed to one episode: a query over `tables` where a column without a
/// table name belongs to the `FROM` table (with a `JOIN`, a qualified `table.column` may name
/// any table's own column; without one, only the `FROM` table's), every string literal is one
/// of `strings` (with none, no string literal) and every number one of `numbers` (with none,
/// no numeric literal and no `HAVING`; `LIMIT` takes one of them or 1). The env passes the question's
/// spans that are values of its database ([`question_literals`], falling back to every span
/// when none is) and the question's numbers ([`question_numbers`]): literals are copied, not
/// spelled. A condition may compare any column with any of them; [`sql_pattern_typed`] is
/// the narrower form the env uses.
///
/// ```
/// use sandgym_env_sql::{question_literals, question_numbers, sql_pattern_for};
/// let tables = [("customers".to_owned(), vec!["city".to_owned(), "name".to_owned()])];
/// let question = "List 3 customers who live in New York.";
/// let p = sql_pattern_for(&tables, &question_literals(question), &question_numbers(question));
/// assert!(p.contains("|New York|") && p.contains("(3)"));
/// ```
pub fn sql_pattern_for(tables: &[TableColumns], strings: &[String], numbers: &[String]) -> String {
    let typed: Vec<TypedTable> = tables
        .iter()
        .map(|(t, cols)| {
            let cols = cols
                .iter()
                .map(|c| TypedColumn {
                    name: c.clone(),
                    compared: Compared::Any,
                    nulls: true,
                })
                .collect();
            (t.clone(), cols)
        })
        .collect();
    sql_pattern_typed(&typed, &[], strings, numbers)
}

/// [`sql_pattern_for`] with each `WHERE` condition typed by its column: a number column is
/// compared with a number, a yes/no column with `TRUE`/`FALSE`, a text or date column with
/// the string literals it holds (its [`Compared::Text`]) — so `artist_id = 'Artist 7'`,
/// `country = TRUE` or `city = 'JP'` (when `JP` is a country, not a city) cannot be written,
/// and a value held only by another table's column needs that table joined. A number, text or
/// date column may also be compared with a scalar subquery over itself (`AVG`, `MIN` or
/// `MAX` of a number, `MIN` or `MAX` of a text or date: `runtime_min > (SELECT
/// AVG(runtime_min) FROM films)`), never over another column or a key (`id`, `…_id`), and
/// every column may be tested with `IS NOT NULL`, one whose [`TypedColumn::nulls`] is set
/// with `IS NULL`. A `JOIN … ON` equates one of `links`
/// ([`crate::join_links`]), either way round, between the table it adds and one already in
/// the query, and a query with joins names only its tables' columns (with no links, or a
/// schema whose links connect more than 160 sets of two or three tables: any two columns,
/// any table's). Aggregates are typed: `SUM` and `AVG` of a number, `MIN` and `MAX` of a
/// number, text or date, never of a key; `COUNT` of anything.
///
/// ```
/// use sandgym_env_sql::{Compared, TypedColumn, sql_pattern_typed};
/// let col = |name: &str, compared| TypedColumn { name: name.into(), compared, nulls: true };
/// let tables = [
///     ("albums".to_owned(), vec![col("title", Compared::Text(vec![])), col("artist_id", Compared::Number)]),
///     ("artists".to_owned(), vec![col("artist_id", Compared::Number), col("name", Compared::Text(vec!["Ann Lee".into()]))]),
/// ];
/// let on = [("albums".to_owned(), "artist_id".to_owned()), ("artists".to_owned(), "artist_id".to_owned())];
/// let p = regex::Regex::new(&sql_pattern_typed(&tables, &[on], &["Ann Lee".into()], &[])).unwrap();
/// assert!(!p.is_match("SELECT COUNT(*) FROM albums WHERE artist_id = 'Ann Lee'"));
/// assert!(p.is_match("SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee'"));
/// assert!(!p.is_match("SELECT COUNT(*) FROM albums JOIN artists ON albums.title = artists.name"));
/// assert!(!p.is_match("SELECT COUNT(*) FROM albums WHERE artist_id = (SELECT COUNT(*) FROM artists)"));
/// ```
pub fn sql_pattern_typed(
    tables: &[TypedTable],
    links: &[JoinOn],
    strings: &[String],
    numbers: &[String],
) -> String {
    sql_pattern_naming(tables, links, strings, numbers, &[])
}

/// [`sql_pattern_typed`] for a question that names values of the database (`must_name`, the
/// spans of it a text column holds): the query's `WHERE` compares a column holding one of them
/// with it — "How many films did Maya Tanaka direct?" cannot be answered `WHERE director_id
/// IS NOT NULL`, nor without the table of directors. With `must_name` empty, the same as
/// [`sql_pattern_typed`].
///
/// ```
/// use sandgym_env_sql::{Compared, TypedColumn, sql_pattern_naming};
/// let col = |name: &str, compared| TypedColumn { name: name.into(), compared, nulls: true };
/// let tables = [("plans".to_owned(), vec![
///     col("name", Compared::Text(vec!["Premium".into()])),
///     col("monthly_fee", Compared::Number),
/// ])];
/// let named = ["Premium".to_owned()];
/// let p = regex::Regex::new(&sql_pattern_naming(&tables, &[], &named, &[], &named)).unwrap();
/// assert!(p.is_match("SELECT monthly_fee FROM plans WHERE name = 'Premium'"));
/// assert!(p.is_match("SELECT COUNT(*) FROM plans WHERE monthly_fee IS NOT NULL AND name != 'Premium'"));
/// assert!(!p.is_match("SELECT MIN(monthly_fee) FROM plans"));
/// assert!(!p.is_match("SELECT monthly_fee FROM plans WHERE name IS NOT NULL"));
/// ```
pub fn sql_pattern_naming(
    tables: &[TypedTable],
    links: &[JoinOn],
    strings: &[String],
    numbers: &[String],
    must_name: &[String],
) -> String {
    let names: Vec<String> = tables.iter().map(|(t, _)| t.clone()).collect();
    let t = alternatives(&names);
    // The qualified references `table.column` of the tables `within` keeps, to the columns
    // `pick` keeps.
    let qualified_in = |within: &dyn Fn(usize) -> bool, pick: Keep<'_>| -> Vec<String> {
        tables
            .iter()
            .enumerate()
            .filter(|(i, _)| within(*i))
            .filter_map(|(_, (table, cols))| {
                let cols: Vec<String> = cols
                    .iter()
                    .filter(|c| pick(c))
                    .map(|c| c.name.clone())
                    .collect();
                (!cols.is_empty()).then(|| format!("{}\\.{}", escape(table), alternatives(&cols)))
            })
            .collect()
    };
    let qualified_of = |pick: Keep<'_>| qualified_in(&|_| true, pick);
    let qualified = format!("({})", qualified_of(&|_| true).join("|"));
    // An aggregate, typed by its column: `COUNT` of a row or any column, `SUM`, `AVG`, `MIN`
    // or `MAX` of a number (or a product, difference, sum or ratio of two: `SUM(price *
    // quantity)`), `MIN` or `MAX` of a text or date — never of a key (`MAX(track_id)` is no
    // "longest track") or a yes/no, and no `AVG` of a name.
    let agg_of = |c: &str, refs: Refs<'_>| {
        let key = |c: &TypedColumn| crate::links::is_key(&c.name);
        let mut aggs = vec![format!("COUNT\\((\\*|{c})\\)")];
        if let Some(n) =
            refs(&|c| matches!(c.compared, Compared::Number | Compared::Any) && !key(c))
        {
            aggs.push(format!("(SUM|AVG|MIN|MAX)\\({n}( [-+*/] {n})?\\)"));
        }
        if let Some(t) = refs(&|c| matches!(c.compared, Compared::Text(_)) && !key(c)) {
            aggs.push(format!("(MIN|MAX)\\({t}\\)"));
        }
        format!("({})", aggs.join("|"))
    };
    // A scalar subquery over the column a condition tests, from a table that has it:
    // `runtime_min > (SELECT AVG(runtime_min) FROM films)`, `released = (SELECT MIN(released)
    // FROM albums)` — never another column's (`film_id = (SELECT COUNT(*) FROM directors)`).
    let holding = |name: &str| -> String {
        let with: Vec<String> = tables
            .iter()
            .filter(|(_, cols)| cols.iter().any(|c| c.name == name))
            .map(|(t, _)| t.clone())
            .collect();
        alternatives(&with)
    };
    let subquery = |name: &str, aggs: &str| {
        format!(
            "\\(SELECT ({aggs})\\({}\\) FROM {}\\)",
            escape(name),
            holding(name)
        )
    };
    let ops = "(=|!=|<>|<|>|<=|>=)";
    // A question naming no value of the database gets no string literal at all.
    let mut any_values: Vec<String> = Vec::new();
    if !numbers.is_empty() {
        any_values.push(alternatives(numbers));
    }
    if !strings.is_empty() {
        any_values.push(format!("'{}'", alternatives(strings)));
    }
    any_values.extend(["TRUE".to_owned(), "FALSE".to_owned()]);
    let any_value = format!("({})", any_values.join("|"));
    // The text columns grouped by the literals they hold, so each group is one alternative.
    let mut text_groups: Vec<Vec<String>> = Vec::new();
    // Every column name, once, with whether a column of that name is a number or text (the
    // kinds compared with a subquery of the same column).
    let mut named: Vec<(String, &str)> = Vec::new();
    for (_, cols) in tables {
        for c in cols {
            if let Compared::Text(held) = &c.compared
                && !held.is_empty()
                && !text_groups.contains(held)
            {
                text_groups.push(held.clone());
            }
            // A key's average or extreme is no answer to a question (`director_id = (SELECT
            // AVG(director_id) FROM directors)` in place of a director's name).
            if crate::links::is_key(&c.name) {
                continue;
            }
            let Some(aggs) = subquery_aggregates(c) else {
                continue;
            };
            if !named.iter().any(|(n, a)| *n == c.name && *a == aggs) {
                named.push((c.name.clone(), aggs));
            }
        }
    }
    // The condition over the columns a branch may name: `own(pick)` gives that alternation for
    // the columns `pick` keeps, or `None` when it keeps none.
    let cond_for = |own: Refs<'_>| -> String {
        let mut alts: Vec<String> = Vec::new();
        if let Some(c) = own(&|_| true) {
            alts.push(format!("{c} IS NOT NULL"));
        }
        if let Some(c) = own(&|c| c.nulls) {
            alts.push(format!("{c} IS NULL"));
        }
        if !numbers.is_empty()
            && let Some(c) = own(&|c| c.compared == Compared::Number)
        {
            alts.push(format!("{c} {ops} {}", alternatives(numbers)));
        }
        if let Some(c) = own(&|c| c.compared == Compared::Flag) {
            alts.push(format!("{c} (=|!=|<>) (TRUE|FALSE)"));
        }
        if let Some(c) = own(&|c| c.compared == Compared::Any) {
            alts.push(format!("{c} {ops} {any_value}"));
        }
        for held in &text_groups {
            if let Some(c) = own(&|c| matches!(&c.compared, Compared::Text(h) if h == held)) {
                alts.push(format!("{c} {ops} '{}'", alternatives(held)));
            }
        }
        for (name, aggs) in &named {
            if let Some(c) = own(&|c| c.name == *name && subquery_aggregates(c) == Some(aggs)) {
                alts.push(format!("{c} {ops} {}", subquery(name, aggs)));
            }
        }
        format!("({})", alts.join("|"))
    };
    // The conditions naming one of `must_name` over the columns a branch may name (`None`
    // when none of them holds one), and the `WHERE` clause: optional when the question names
    // no value, else one condition naming a value, before or after one other.
    let naming_for = |own: Refs<'_>| -> Option<String> {
        let alts: Vec<String> = text_groups
            .iter()
            .filter_map(|held| {
                let named: Vec<String> = held
                    .iter()
                    .filter(|v| must_name.contains(v))
                    .cloned()
                    .collect();
                if named.is_empty() {
                    return None;
                }
                let c = own(&|c| matches!(&c.compared, Compared::Text(h) if h == held))?;
                Some(format!("{c} {ops} '{}'", alternatives(&named)))
            })
            .collect();
        (!alts.is_empty()).then(|| format!("({})", alts.join("|")))
    };
    let where_for = |own: Refs<'_>| -> Option<String> {
        let cond = cond_for(own);
        if must_name.is_empty() {
            return Some(format!("( WHERE {cond}( AND {cond})?)?"));
        }
        let naming = naming_for(own)?;
        Some(format!(
            " WHERE ({naming}( AND {cond})?|{cond} AND {naming})"
        ))
    };
    // What a `JOIN … ON` equates: one of `links`, either way round, or any two columns; a
    // table in no link, any of its columns with another table's (written as one alternation
    // per such table, not as its pairs: a schema of unlinked tables would list thousands).
    let on = if links.is_empty() {
        format!("{qualified} = {qualified}")
    } else {
        let pairs: Vec<String> = links
            .iter()
            .flat_map(|[(a, x), (b, y)]| {
                let l = format!("{a}.{x}");
                let r = format!("{b}.{y}");
                [format!("{l} = {r}"), format!("{r} = {l}")]
            })
            .collect();
        let mut alts = vec![alternatives(&pairs)];
        for (table, cols) in tables {
            if links.iter().flatten().any(|(t, _)| t == table) {
                continue;
            }
            let own = format!(
                "{}\\.{}",
                escape(table),
                alternatives(&cols.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
            );
            let others: Vec<String> = tables
                .iter()
                .filter(|(t, cols)| t != table && !cols.is_empty())
                .map(|(t, cols)| {
                    let names: Vec<String> = cols.iter().map(|c| c.name.clone()).collect();
                    format!("{}\\.{}", escape(t), alternatives(&names))
                })
                .collect();
            if others.is_empty() || cols.is_empty() {
                continue;
            }
            let others = format!("({})", others.join("|"));
            alts.push(format!("{own} = {others}|{others} = {own}"));
        }
        format!("({})", alts.join("|"))
    };
    // `LIMIT` takes one of the question's whole numbers, or 1: a superlative ("the oldest
    // album", "the best-paid employee") writes no number.
    let mut integers: Vec<String> = numbers
        .iter()
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .cloned()
        .collect();
    integers.push("1".to_owned());
    // `HAVING` compares an aggregate with one of the question's numbers.
    let having_numbers = (!numbers.is_empty()).then(|| alternatives(numbers));
    let limit = format!("( LIMIT {})?", alternatives(&integers));
    // One query shape over columns `c` with the `WHERE` clause `filter`, from `from` and the
    // joins `joins`.
    let shape = |from: &str, c: &str, refs: Refs<'_>, filter: &str, joins: &str| {
        let agg = agg_of(c, refs);
        let item = format!("({agg}|{c}|\\*)");
        let having = having_numbers
            .as_ref()
            .map(|n| format!("( HAVING {agg} {ops} {n})?"))
            .unwrap_or_default();
        format!(
            "SELECT (DISTINCT )?{item}(, {item}){{0,3}} FROM {from}{joins}{filter}( GROUP BY {c}(, {c})?{having})?( ORDER BY ({agg}|{c})( ASC| DESC)?)?{limit}"
        )
    };
    // Without a join, a query names only its own table's columns (qualified or not); with
    // one or two, only the joined tables' columns: qualified, or unqualified where one table
    // of the set has that name ([`crate::join_sets`]). A schema with no links (or too many
    // sets) keeps the looser shape: after a `JOIN`, any table's qualified column.
    let join_sets = crate::join_sets::join_sets(
        &tables
            .iter()
            .map(|(t, cols)| (t.clone(), cols.iter().map(|c| c.name.clone()).collect()))
            .collect::<Vec<_>>(),
        links,
    );
    let set_branches = join_sets.iter().flatten().filter_map(|set| {
        let within = |i: usize| set.tables.contains(&i);
        // The set's column names that only one of its tables has.
        let unique = |pick: Keep<'_>| -> Vec<String> {
            set.tables
                .iter()
                .flat_map(|&i| tables[i].1.iter().filter(|c| pick(c)))
                .filter(|c| {
                    set.tables
                        .iter()
                        .filter(|&&i| tables[i].1.iter().any(|d| d.name == c.name))
                        .count()
                        == 1
                })
                .map(|c| c.name.clone())
                .collect()
        };
        let refs = |pick: Keep<'_>| -> Option<String> {
            let mut alts = qualified_in(&within, pick);
            let names = unique(pick);
            if !names.is_empty() {
                alts.push(alternatives(&names));
            }
            (!alts.is_empty()).then(|| format!("({})", alts.join("|")))
        };
        let any = refs(&|_| true).unwrap_or_default();
        Some(shape(&set.from, &any, &refs, &where_for(&refs)?, ""))
    });
    let branches = tables
        .iter()
        .flat_map(|(table, cols)| {
            let from = escape(table);
            let own_names = |pick: Keep<'_>| -> Vec<String> {
                cols.iter()
                    .filter(|c| pick(c))
                    .map(|c| c.name.clone())
                    .collect()
            };
            let own = format!("({from}\\.)?{}", alternatives(&own_names(&|_| true)));
            let any = format!("({qualified}|{})", alternatives(&own_names(&|_| true)));
            let own_refs = |pick: Keep<'_>| {
                let names = own_names(pick);
                (!names.is_empty()).then(|| format!("({from}\\.)?{}", alternatives(&names)))
            };
            let any_refs = |pick: Keep<'_>| {
                let mut alts = qualified_of(pick);
                let names = own_names(pick);
                if !names.is_empty() {
                    alts.push(alternatives(&names));
                }
                (!alts.is_empty()).then(|| format!("({})", alts.join("|")))
            };
            let mut out: Vec<String> = where_for(&own_refs)
                .map(|w| shape(&from, &own, &own_refs, &w, ""))
                .into_iter()
                .collect();
            if join_sets.is_none()
                && let Some(w) = where_for(&any_refs)
            {
                let joins = format!("( JOIN {t} ON {on}){{1,2}}");
                out.push(shape(&from, &any, &any_refs, &w, &joins));
            }
            out
        })
        .chain(set_branches)
        .collect::<Vec<_>>();
    if branches.is_empty() && !must_name.is_empty() {
        // No column holds a value the question names: nothing to require.
        return sql_pattern_naming(tables, links, strings, numbers, &[]);
    }
    // Still none (a database without tables): a pattern no query matches but the empty one,
    // not another call with the same arguments (that recursed until the stack overflowed).
    format!("^({})$", branches.join("|"))
}

/// The aggregates a scalar subquery over column `c` may take: `AVG`, `MIN` or `MAX` of a
/// number (or a column of unknown kind), `MIN` or `MAX` of a text or date; none of a yes/no.
fn subquery_aggregates(c: &TypedColumn) -> Option<&'static str> {
    match c.compared {
        Compared::Number | Compared::Any => Some("AVG|MIN|MAX"),
        Compared::Text(_) => Some("MIN|MAX"),
        Compared::Flag => None,
    }
}

/// The numbers written in `question` (integers and decimals, as written, and the numbers one
/// to twelve spelled as words: "the three longest"), the candidates for the numeric literals
/// of its query.
///
/// ```
/// let n = sandgym_env_sql::question_numbers("Which 3 students have a gpa above 3.5?");
/// assert_eq!(n, ["3", "3.5"]);
/// let n = sandgym_env_sql::question_numbers("Name the three longest films.");
/// assert_eq!(n, ["3"]);
/// ```
pub fn question_numbers(question: &str) -> Vec<String> {
    let mut out: Vec<String> = question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_digit()))
        .filter(|w| {
            !w.is_empty()
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                && w.matches('.').count() <= 1
        })
        .map(str::to_owned)
        .collect();
    for word in question.split_whitespace() {
        let word = word
            .trim_matches(|c: char| !c.is_alphabetic())
            .to_lowercase();
        if let Some(n) = SPELLED.iter().position(|s| *s == word) {
            out.push((n + 1).to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The numbers a question may spell out instead of writing digits, one to twelve.
const SPELLED: [&str; 12] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve",
];

/// Every run of one to four consecutive words of `question` (punctuation around words
/// dropped), and each part of a hyphenated word ("R" and "rated" of "R-rated"), the
/// candidates for the string literals of its query.
pub fn question_literals(question: &str) -> Vec<String> {
    let words: Vec<&str> = question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty() && !w.contains('\''))
        .collect();
    let mut out: Vec<String> = (0..words.len())
        .flat_map(|i| (i + 1..=(i + 4).min(words.len())).map(move |j| (i, j)))
        .map(|(i, j)| words[i..j].join(" "))
        .collect();
    out.extend(
        words
            .iter()
            .filter(|w| w.contains('-'))
            .flat_map(|w| w.split('-'))
            .filter(|part| !part.is_empty())
            .map(str::to_owned),
    );
    out.sort();
    out.dedup();
    out
}

/// The days a question names by its year alone ("released in 2020 or later"): for each
/// four-digit year from 1000 to 2999 written in it, the first day of that year and of the
/// next (`2020-01-01`, `2021-01-01`), the bounds a query compares a date column with.
///
/// ```
/// let d = sandgym_env_sql::question_year_days("Films from 2020 or later?");
/// assert_eq!(d, ["2020-01-01", "2021-01-01"]);
/// ```
pub fn question_year_days(question: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in question.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_ascii_digit());
        if word.len() == 4
            && let Ok(year) = word.parse::<u32>()
            && (1000..3000).contains(&year)
        {
            out.push(format!("{year}-01-01"));
            out.push(format!("{}-01-01", year + 1));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn pattern(tables: &[String], columns: &[String], string: &str) -> String {
    let t = alternatives(tables);
    let c = format!("({t}\\.)?{}", alternatives(columns));
    let agg = format!("(COUNT|SUM|AVG|MIN|MAX)\\((\\*|{c}( [-+*/] {c})?)\\)");
    let item = format!("({agg}|{c}|\\*|[0-9]{{1,6}})");
    let number = "-?[0-9]{1,9}(\\.[0-9]{1,6})?";
    let value = format!("({number}|{string}|TRUE|FALSE|\\(SELECT {agg} FROM {t}\\))");
    let cond = format!("{c} ((=|!=|<>|<|>|<=|>=) {value}|IS (NOT )?NULL)");
    format!(
        "^SELECT (DISTINCT )?{item}(, {item}){{0,3}} FROM {t}( JOIN {t} ON {c} = {c}){{0,2}}( WHERE {cond}( AND {cond})?)?( GROUP BY {c}(, {c})?( HAVING {agg} (=|!=|<>|<|>|<=|>=) {number})?)?( ORDER BY ({agg}|{c})( ASC| DESC)?)?( LIMIT [0-9]{{1,4}})?$"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(strings: &[&str], numbers: &[&str]) -> regex::Regex {
        let tables = [
            (
                "pets".to_owned(),
                vec!["name".to_owned(), "kind".to_owned()],
            ),
            (
                "owners".to_owned(),
                vec!["name".to_owned(), "city".to_owned()],
            ),
        ];
        let strings: Vec<String> = strings.iter().map(|s| (*s).to_owned()).collect();
        let numbers: Vec<String> = numbers.iter().map(|s| (*s).to_owned()).collect();
        regex::Regex::new(&sql_pattern_for(&tables, &strings, &numbers)).unwrap()
    }

    #[test]
    fn a_database_without_tables_gets_a_pattern_of_no_query() {
        // A schema of only a comment: no table, so no shape, with or without a named value
        // (this recursed until the stack overflowed).
        for must in [&[][..], &["Rex".to_owned()][..]] {
            let named = vec!["Rex".to_owned()];
            let p = regex::Regex::new(&sql_pattern_naming(&[], &[], &named, &[], must)).unwrap();
            assert!(!p.is_match("SELECT 'x'"));
        }
    }

    #[test]
    fn without_a_join_only_the_from_tables_columns_and_only_linked_literals() {
        let p = matcher(&["dog"], &["3"]);
        for ok in [
            "SELECT COUNT(*) FROM pets WHERE kind = 'dog'",
            "SELECT pets.name FROM pets WHERE pets.kind = 'dog' LIMIT 3",
            "SELECT pets.name FROM pets JOIN owners ON pets.name = owners.name WHERE owners.city = 'dog'",
            "SELECT kind FROM pets GROUP BY kind HAVING COUNT(*) > 3",
            "SELECT name FROM pets WHERE kind IS NULL",
        ] {
            assert!(p.is_match(ok), "{ok}");
        }
        for bad in [
            // Another table's column without joining it.
            "SELECT COUNT(*) FROM pets WHERE owners.city = 'dog'",
            "SELECT owners.name FROM pets",
            // A literal the question does not name as a value, or a number it does not write.
            "SELECT name FROM pets WHERE kind = 'cat'",
            "SELECT name FROM pets LIMIT 4",
        ] {
            assert!(!p.is_match(bad), "{bad}");
        }
        // No linked value: no string literal at all, not even an empty one.
        let none = matcher(&[], &[]);
        assert!(none.is_match("SELECT COUNT(*) FROM pets WHERE kind IS NOT NULL"));
        // A superlative: the top row, though the question writes no number.
        assert!(none.is_match("SELECT name FROM pets ORDER BY name DESC LIMIT 1"));
        assert!(!none.is_match("SELECT name FROM pets ORDER BY name DESC LIMIT 2"));
        assert!(!none.is_match("SELECT COUNT(*) FROM pets WHERE kind = ''"));
    }

    #[test]
    fn typed_conditions_compare_each_column_only_with_what_it_can_hold() {
        let col = |name: &str, compared| TypedColumn {
            name: name.to_owned(),
            compared,
            nulls: true,
        };
        let dates = || vec!["2020-01-01".to_owned()];
        let tables = [
            (
                "pets".to_owned(),
                vec![
                    col("owner_id", Compared::Number),
                    col("kind", Compared::Text(vec!["dog".to_owned()])),
                    col("name", Compared::Text(dates())),
                    col("born", Compared::Text(dates())),
                    col("age", Compared::Number),
                    col("vaccinated", Compared::Flag),
                ],
            ),
            (
                "owners".to_owned(),
                vec![
                    col("owner_id", Compared::Number),
                    col("city", Compared::Text(vec!["Oslo".to_owned()])),
                ],
            ),
        ];
        // No age is missing: `age IS NULL` holds for no row (`IS NOT NULL` stays, a guard).
        let mut tables = tables;
        tables[0].1[4].nulls = false;
        let strings = ["2020-01-01".to_owned(), "Oslo".to_owned(), "dog".to_owned()];
        let p = regex::Regex::new(&sql_pattern_typed(
            &tables,
            &[],
            &strings,
            &["3".to_owned()],
        ))
        .unwrap();
        for ok in [
            "SELECT COUNT(*) FROM pets WHERE kind = 'dog'",
            "SELECT COUNT(*) FROM pets WHERE age > 3 AND vaccinated = FALSE",
            "SELECT name FROM pets WHERE age > (SELECT AVG(age) FROM pets)",
            "SELECT name FROM pets WHERE born = (SELECT MIN(born) FROM pets)",
            "SELECT COUNT(*) FROM pets WHERE born < '2020-01-01'",
            "SELECT COUNT(*) FROM pets WHERE kind IS NULL",
            "SELECT name FROM pets WHERE age IS NOT NULL ORDER BY age DESC LIMIT 3",
            "SELECT COUNT(*) FROM pets JOIN owners ON pets.owner_id = owners.owner_id WHERE owners.city = 'Oslo'",
        ] {
            assert!(p.is_match(ok), "{ok}");
        }
        for bad in [
            // A value held only by another table's column: that table must be joined.
            "SELECT COUNT(*) FROM pets WHERE owner_id = 'Oslo'",
            "SELECT COUNT(*) FROM pets WHERE kind = 'Oslo'",
            // A value of another column of the same table.
            "SELECT COUNT(*) FROM pets WHERE name = 'dog'",
            // A yes/no literal on a text column, a number on a text column, a string on a
            // number column, a count compared with a text column.
            "SELECT COUNT(*) FROM pets WHERE kind = TRUE",
            "SELECT COUNT(*) FROM pets WHERE kind = 3",
            "SELECT COUNT(*) FROM pets WHERE age = 'dog'",
            "SELECT COUNT(*) FROM pets WHERE kind = (SELECT COUNT(*) FROM pets)",
            "SELECT COUNT(*) FROM pets WHERE vaccinated = 3",
            "SELECT COUNT(*) FROM pets WHERE age IS NULL",
        ] {
            assert!(!p.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn subqueries_are_over_the_tested_column_and_joins_follow_the_links() {
        let col = |name: &str, compared| TypedColumn {
            name: name.to_owned(),
            compared,
            nulls: true,
        };
        let tables = [
            (
                "films".to_owned(),
                vec![
                    col("film_id", Compared::Number),
                    col("studio_id", Compared::Number),
                    col("runtime", Compared::Number),
                    col("released", Compared::Text(vec![])),
                ],
            ),
            (
                "studios".to_owned(),
                vec![
                    col("studio_id", Compared::Number),
                    col("name", Compared::Text(vec!["Summit".to_owned()])),
                ],
            ),
        ];
        let names: Vec<(String, Vec<String>)> = tables
            .iter()
            .map(|(t, cols)| (t.clone(), cols.iter().map(|c| c.name.clone()).collect()))
            .collect();
        let links = crate::join_links(&names);
        let p = regex::Regex::new(&sql_pattern_typed(
            &tables,
            &links,
            &["Summit".to_owned()],
            &[],
        ))
        .unwrap();
        for ok in [
            "SELECT COUNT(*) FROM films WHERE runtime > (SELECT AVG(runtime) FROM films)",
            "SELECT film_id FROM films WHERE released = (SELECT MAX(released) FROM films)",
            "SELECT COUNT(*) FROM films JOIN studios ON films.studio_id = studios.studio_id WHERE studios.name = 'Summit'",
            "SELECT COUNT(*) FROM studios JOIN films ON studios.studio_id = films.studio_id WHERE films.runtime > (SELECT AVG(runtime) FROM films)",
        ] {
            assert!(p.is_match(ok), "{ok}");
        }
        for bad in [
            // A subquery over another column, or a count.
            "SELECT COUNT(*) FROM films WHERE runtime > (SELECT AVG(film_id) FROM films)",
            "SELECT COUNT(*) FROM films WHERE studio_id = (SELECT COUNT(*) FROM studios)",
            "SELECT COUNT(*) FROM films WHERE runtime > (SELECT SUM(runtime) FROM films)",
            // A key's average or extreme.
            "SELECT COUNT(*) FROM films WHERE studio_id = (SELECT AVG(studio_id) FROM films)",
            // A join on columns that are no link.
            "SELECT COUNT(*) FROM films JOIN studios ON films.film_id = studios.studio_id",
            "SELECT COUNT(*) FROM films JOIN studios ON films.runtime = studios.studio_id",
            "SELECT COUNT(*) FROM films JOIN films ON films.film_id = films.film_id",
        ] {
            assert!(!p.is_match(bad), "{bad}");
        }
        // A table no link reaches joins on any of its columns with another table's.
        let mut open = tables.to_vec();
        open.push((
            "awards".to_owned(),
            vec![
                col("film", Compared::Number),
                col("prize", Compared::Text(vec![])),
            ],
        ));
        let p = regex::Regex::new(&sql_pattern_typed(&open, &links, &[], &[])).unwrap();
        for ok in [
            "SELECT COUNT(*) FROM films JOIN awards ON awards.film = films.film_id",
            "SELECT COUNT(*) FROM awards JOIN films ON films.runtime = awards.prize",
            "SELECT COUNT(*) FROM films JOIN studios ON films.studio_id = studios.studio_id",
        ] {
            assert!(p.is_match(ok), "{ok}");
        }
        for bad in [
            "SELECT COUNT(*) FROM films JOIN studios ON films.film_id = studios.studio_id",
            "SELECT COUNT(*) FROM awards JOIN awards ON awards.film = awards.prize",
        ] {
            assert!(!p.is_match(bad), "{bad}");
        }
    }
}
