//! The shape of the SQL this env expects, as a regular expression over its own tables and
//! columns. It is declared on `run_sql`'s query and on the final response so a constrained
//! decoder chooses among valid queries over *these* identifiers instead of spelling SQL one
//! character at a time; the env itself still runs whatever text arrives.

/// Escapes regex metacharacters in an identifier.
fn escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let meta = "\\.+*?()|[]{}^$".contains(c);
            meta.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

fn alternatives(words: &[String]) -> String {
    let mut sorted: Vec<String> = words.iter().map(|w| escape(w)).collect();
    // Longest first, so no alternative is a prefix that hides a longer one.
    sorted.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    sorted.dedup();
    format!("({})", sorted.join("|"))
}

/// The query pattern over `tables` and `columns`: one `SELECT` with optional `DISTINCT`, up to
/// four items (columns, `*`, numbers, aggregates), `FROM` a table with up to two `JOIN … ON`,
/// up to two `WHERE` conditions joined by `AND` (against a number, a quoted string or a
/// scalar subquery), `GROUP BY`, `ORDER BY … ASC|DESC` and `LIMIT`. Every gold query of the
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

/// [`sql_pattern`] for one episode: its database's `tables` and `columns`, and string literals
/// limited to `strings` (the spans of the question, [`question_literals`]).
///
/// ```
/// use sandgym_env_sql::{question_literals, sql_pattern_for};
/// let strings = question_literals("How many customers live in New York?");
/// assert!(strings.contains(&"New York".to_owned()));
/// let p = sql_pattern_for(&["customers".into()], &["city".into()], &strings);
/// assert!(p.contains("|New York|"));
/// ```
pub fn sql_pattern_for(tables: &[String], columns: &[String], strings: &[String]) -> String {
    pattern(tables, columns, &format!("'{}'", alternatives(strings)))
}

/// Every run of one to four consecutive words of `question` (punctuation around words
/// dropped), the candidates for the string literals of its query.
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
    out.sort();
    out.dedup();
    out
}

fn pattern(tables: &[String], columns: &[String], string: &str) -> String {
    let t = alternatives(tables);
    let c = format!("({t}\\.)?{}", alternatives(columns));
    let agg = format!("(COUNT|SUM|AVG|MIN|MAX)\\((\\*|{c})\\)");
    let item = format!("({agg}|{c}|\\*|[0-9]{{1,6}})");
    let number = "-?[0-9]{1,9}(\\.[0-9]{1,6})?";
    let value = format!("({number}|{string}|\\(SELECT {agg} FROM {t}\\))");
    let cond = format!("{c} (=|!=|<>|<|>|<=|>=) {value}");
    format!(
        "^SELECT (DISTINCT )?{item}(, {item}){{0,3}} FROM {t}( JOIN {t} ON {c} = {c}){{0,2}}( WHERE {cond}( AND {cond})?)?( GROUP BY {c})?( ORDER BY ({agg}|{c})( ASC| DESC)?)?( LIMIT [0-9]{{1,4}})?$"
    )
}
