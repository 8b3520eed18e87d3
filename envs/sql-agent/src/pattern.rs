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

/// [`sql_pattern`] narrowed to one episode: a query over `tables` where a column without a
/// table name belongs to the `FROM` table (with a `JOIN`, a qualified `table.column` may name
/// any table's own column; without one, only the `FROM` table's), every string literal is one
/// of `strings` (with none, no string literal) and every number one of `numbers` (with none,
/// no numeric literal and no `HAVING`; `LIMIT` takes one of them or 1). The env passes the question's
/// spans that are values of its database ([`question_literals`], falling back to every span
/// when none is) and the question's numbers ([`question_numbers`]): literals are copied, not
/// spelled.
///
/// ```
/// use sandgym_env_sql::{question_literals, question_numbers, sql_pattern_for};
/// let tables = [("customers".to_owned(), vec!["city".to_owned(), "name".to_owned()])];
/// let question = "List 3 customers who live in New York.";
/// let p = sql_pattern_for(&tables, &question_literals(question), &question_numbers(question));
/// assert!(p.contains("|New York|") && p.contains("(3)"));
/// ```
pub fn sql_pattern_for(tables: &[TableColumns], strings: &[String], numbers: &[String]) -> String {
    let names: Vec<String> = tables.iter().map(|(t, _)| t.clone()).collect();
    let t = alternatives(&names);
    let qualified = tables
        .iter()
        .map(|(table, cols)| format!("{}\\.{}", escape(table), alternatives(cols)))
        .collect::<Vec<_>>()
        .join("|");
    let qualified = format!("({qualified})");
    // An aggregate over a column or a product/difference of two (`SUM(price * quantity)`).
    let agg_of = |c: &str| format!("(COUNT|SUM|AVG|MIN|MAX)\\((\\*|{c}( [-+*/] {c})?)\\)");
    let subqueries = tables
        .iter()
        .map(|(table, cols)| {
            format!(
                "\\(SELECT {} FROM {}\\)",
                agg_of(&alternatives(cols)),
                escape(table)
            )
        })
        .collect::<Vec<_>>()
        .join("|");
    // A question naming no value of the database gets no string literal at all.
    let mut values: Vec<String> = Vec::new();
    if !numbers.is_empty() {
        values.push(alternatives(numbers));
    }
    if !strings.is_empty() {
        values.push(format!("'{}'", alternatives(strings)));
    }
    values.extend(["TRUE".to_owned(), "FALSE".to_owned(), subqueries]);
    let value = format!("({})", values.join("|"));
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
    // One query shape over columns `c`, from `from` and the joins `joins`.
    let shape = |from: &str, c: &str, joins: &str| {
        let agg = agg_of(c);
        let item = format!("({agg}|{c}|\\*)");
        let cond = format!("{c} ((=|!=|<>|<|>|<=|>=) {value}|IS (NOT )?NULL)");
        let having = having_numbers
            .as_ref()
            .map(|n| format!("( HAVING {agg} (=|!=|<>|<|>|<=|>=) {n})?"))
            .unwrap_or_default();
        format!(
            "SELECT (DISTINCT )?{item}(, {item}){{0,3}} FROM {from}{joins}( WHERE {cond}( AND {cond})?)?( GROUP BY {c}(, {c})?{having})?( ORDER BY ({agg}|{c})( ASC| DESC)?)?{limit}"
        )
    };
    // Without a join, a query names only its own table's columns (qualified or not); with
    // one or two, a qualified column may be any table's.
    let branches = tables
        .iter()
        .flat_map(|(table, cols)| {
            let from = escape(table);
            let own = format!("({from}\\.)?{}", alternatives(cols));
            let any = format!("({qualified}|{})", alternatives(cols));
            let joins = format!("( JOIN {t} ON {qualified} = {qualified}){{1,2}}");
            [shape(&from, &own, ""), shape(&from, &any, &joins)]
        })
        .collect::<Vec<_>>()
        .join("|");
    format!("^({branches})$")
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
}
