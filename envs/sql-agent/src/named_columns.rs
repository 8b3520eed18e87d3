//! The columns a question names by their words (schema linking by name): "the lowest price of
//! a track" names `tracks.unit_price`, "the sum of all invoice totals" `invoices.total`. The
//! instruction lists them beside the values the question names, so the agent reads which
//! column a word means instead of guessing among the schema's numbers.
//!
//! A column's words are its name split at `_` and case changes (`unit_price`, `UnitPrice`:
//! `unit`, `price`), compared with the question's words in the singular. A key (`id`,
//! `…_id`) is never listed (the rows a question names by number are, see
//! [`crate::numbered_rows`]), nor a column whose last word is shorter than three letters
//! (`reports_to`). A column is named when the question has its name of two or more words as
//! consecutive words ("unit price", "invoice date"), or has its table's word and its last
//! word ("price" beside "track"); where one of a table's columns is named by all its words, that
//! table's columns named by the last word alone are left out ("last name" names
//! `last_name`, not `first_name`). In the order the question names them.

/// The most columns an instruction lists.
pub const MAX_NAMED_COLUMNS: usize = 6;

/// The words of an identifier or a question, lower-case and in the singular: `UnitPrices`
/// gives `unit`, `price`; `invoice_items` gives `invoice`, `item` (split as
/// [`crate::self_tasks::spoken`] says an identifier, any other character a break).
fn words(text: &str) -> Vec<String> {
    let plain: String = text
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    crate::self_tasks::spoken(&plain)
        .split_whitespace()
        .map(singular)
        .collect()
}

/// A word in the singular ([`crate::self_tasks::singular`]): `categories` → `category`,
/// `boxes` → `box`; a word of three letters or fewer, or ending in `us`, stays (`is`, `has`,
/// `status`: a question's words are mostly singular already).
fn singular(word: &str) -> String {
    if word.len() <= 3 || word.ends_with("us") {
        word.to_owned()
    } else {
        crate::self_tasks::singular(word)
    }
}

/// The columns of `tables` (each with its column names) that `question` names (see the
/// module docs), as `(table, column)`, at most [`MAX_NAMED_COLUMNS`].
///
/// ```
/// use sandgym_env_sql::named_columns;
/// let t = |name: &str, cols: &[&str]| (name.to_owned(), cols.iter().map(|c| c.to_string()).collect());
/// let tables = [
///     t("tracks", &["track_id", "name", "unit_price", "milliseconds"]),
///     t("invoice_items", &["invoice_id", "unit_price", "quantity"]),
///     t("customers", &["customer_id", "first_name", "last_name"]),
/// ];
/// let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
/// assert_eq!(named_columns("What is the lowest price of a track?", &tables), [pair("tracks", "unit_price")]);
/// assert_eq!(named_columns("What is the last name of customer 4?", &tables), [pair("customers", "last_name")]);
/// assert!(named_columns("How many customers are there?", &tables).is_empty());
/// ```
pub fn named_columns(question: &str, tables: &[(String, Vec<String>)]) -> Vec<(String, String)> {
    let asked = words(question);
    let at = |w: &str| asked.iter().position(|a| a == w);
    // (position in the question, table, column) of each named column.
    let mut found: Vec<(usize, String, String)> = Vec::new();
    for (table, cols) in tables {
        let table_named = words(table).last().is_some_and(|w| at(w).is_some());
        let mut full: Vec<(usize, &String, String)> = Vec::new();
        let mut by_last: Vec<(usize, &String, String)> = Vec::new();
        for col in cols.iter().filter(|c| !crate::links::is_key(c)) {
            let ws = words(col);
            let Some(last) = ws.last().filter(|w| w.len() >= 3) else {
                continue;
            };
            let Some(pos) = at(last) else { continue };
            let every = ws.iter().all(|w| at(w).is_some());
            let together = ws.len() >= 2 && asked.windows(ws.len()).any(|run| run == ws);
            if together || (every && table_named) {
                full.push((pos, col, last.clone()));
            } else if table_named {
                by_last.push((pos, col, last.clone()));
            }
        }
        by_last.retain(|(_, _, last)| !full.iter().any(|(_, _, l)| l == last));
        for (pos, col, _) in full.into_iter().chain(by_last) {
            found.push((pos, table.clone(), col.clone()));
        }
    }
    found.sort();
    found
        .into_iter()
        .map(|(_, t, c)| (t, c))
        .take(MAX_NAMED_COLUMNS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, cols: &[&str]) -> (String, Vec<String>) {
        (
            name.to_owned(),
            cols.iter().map(ToString::to_string).collect(),
        )
    }

    fn named(question: &str, tables: &[(String, Vec<String>)]) -> Vec<String> {
        named_columns(question, tables)
            .into_iter()
            .map(|(t, c)| format!("{t}.{c}"))
            .collect()
    }

    #[test]
    fn words_split_identifiers_and_take_the_singular() {
        assert_eq!(words("UnitPrices"), ["unit", "price"]);
        assert_eq!(words("invoice_items"), ["invoice", "item"]);
        assert_eq!(
            words("Which categories, boxes and classes?"),
            ["which", "category", "box", "and", "class"]
        );
        assert_eq!(words("status is"), ["status", "is"]);
    }

    #[test]
    fn a_column_is_named_by_its_words_beside_its_table() {
        let tables = [
            t(
                "invoices",
                &["invoice_id", "customer_id", "invoice_date", "total"],
            ),
            t(
                "employees",
                &["employee_id", "name", "reports_to", "salary"],
            ),
            t("genres", &["genre_id", "name"]),
            t("tracks", &["track_id", "name", "genre_id", "milliseconds"]),
        ];
        assert_eq!(
            named("What is the sum of all invoice totals?", &tables),
            ["invoices.total"]
        );
        // A one-word name needs its table: "total" alone names no invoice.
        assert_eq!(
            named(
                "What do all employees earn together (total salary)?",
                &tables
            ),
            ["employees.salary"]
        );
        // A name of two words said together needs no table; apart, it needs its table.
        assert_eq!(
            named("Which invoice date is the latest?", &tables),
            ["invoices.invoice_date"]
        );
        let people = [t("customers", &["customer_id", "first_name", "city"])];
        assert_eq!(
            named("Who lives in Oslo? Give the first name.", &people),
            ["customers.first_name"]
        );
        assert!(named("Name the 3 longest tracks, longest first.", &people).is_empty());
        assert_eq!(
            named("Give each customer's name, first.", &people),
            ["customers.first_name"]
        );
        // In the question's order; each table that is named.
        assert_eq!(
            named("Count the tracks per genre, by genre name.", &tables),
            ["genres.name", "tracks.name"]
        );
        assert_eq!(
            named("Name the 3 longest tracks in milliseconds.", &tables),
            ["tracks.name", "tracks.milliseconds"]
        );
        // Keys and short last words are never named; a question naming none gets none.
        assert!(named("Which employees report to employee 1?", &tables).is_empty());
        assert!(named("How many invoices are over 15?", &tables).is_empty());
    }
}
