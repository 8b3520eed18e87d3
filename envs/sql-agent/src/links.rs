//! The column pairs a query may join two tables on, read from the database's names: a
//! reference column (`artist_id`, `ArtistId`, `CustomerID`, `SupportRepId`) to the key of
//! the table it names, or of every table with a key-like key (`id`, `…_id`) when its name
//! names none; and two columns of the same key-like name. A table no pair reaches joins on
//! any of its columns ([`crate::sql_pattern_typed`] writes that without listing the pairs).
//! The episode's query shape ([`crate::sql_pattern_typed`]) joins only on these, so
//! `films.film_id = studios.studio_id` or `plans.monthly_fee = members.member_id` cannot be
//! written while every reference a schema spells in the usual ways can.

/// Two columns a `JOIN … ON` may equate, `(table, column)` each; written either way round.
pub type JoinOn = [(String, String); 2];

/// A column that is a key: `id`, `…_id`, `…Id`, `…ID` after a lower-case letter
/// (`CustomerID`, not `PAID`).
pub(crate) fn is_key(name: &str) -> bool {
    let lower = name.to_lowercase();
    let before_id = |suffix: &str| {
        name.strip_suffix(suffix)
            .and_then(|rest| rest.chars().last())
            .is_some_and(char::is_lowercase)
    };
    lower == "id" || lower.ends_with("_id") || before_id("Id") || before_id("ID")
}

/// Whether `stem` (of a `stem_id` column) names `table`: equal, or its plural.
pub(crate) fn names_table(stem: &str, table: &str) -> bool {
    let (s, t) = (stem.to_lowercase(), table.to_lowercase());
    t == s
        || t == format!("{s}s")
        || t == format!("{s}es")
        || (s.ends_with('y') && t == format!("{}ies", &s[..s.len() - 1]))
}

/// The stem of a reference column: `artist` of `artist_id`, `Artist` of `ArtistId`; `None`
/// for `id` and for a column that is no key.
fn stem(name: &str) -> Option<&str> {
    let lower = name.to_lowercase();
    if lower == "id" || !is_key(name) {
        return None;
    }
    let cut = if lower.ends_with("_id") { 3 } else { 2 };
    name.get(..name.len() - cut).filter(|s| !s.is_empty())
}

/// A table's own key: `id`, a key whose stem names the table (`invoice_id` in `invoices`),
/// or else its first column unless that is a reference (`isbn` in `books(isbn, title)`, none
/// in `enrollments(student_id, course_id)`).
fn own_key<'a>(table: &str, cols: &'a [String]) -> Option<&'a str> {
    cols.iter()
        .find(|c| c.eq_ignore_ascii_case("id") || stem(c).is_some_and(|s| names_table(s, table)))
        .or_else(|| cols.first().filter(|c| !is_key(c)))
        .map(String::as_str)
}

/// The pairs a query over `tables` (each with its column names) may join on (see the module
/// docs), each once; a table in none of them joins on any column. A reference whose name
/// names no table reaches every table with a key-like key ([`join_links_fitting`] narrows
/// that by the database's values).
///
/// ```
/// use sandgym_env_sql::join_links;
/// let t = |name: &str, cols: &[&str]| (name.to_owned(), cols.iter().map(|c| c.to_string()).collect());
/// let links = join_links(&[
///     t("albums", &["album_id", "title", "artist_id"]),
///     t("artists", &["artist_id", "name"]),
/// ]);
/// let on = |a: &str, x: &str, b: &str, y: &str| [(a.to_owned(), x.to_owned()), (b.to_owned(), y.to_owned())];
/// assert_eq!(links, [on("albums", "artist_id", "artists", "artist_id")]);
/// ```
pub fn join_links(tables: &[(String, Vec<String>)]) -> Vec<JoinOn> {
    join_links_fitting(tables, &|_, _, _, _| Some(1.0))
}

/// How a reference column `a.x` fits a key `b.y`, called as `fit(a, x, b, y)`: `None` where
/// some value of `a.x` is not a value of `b.y`, else the share of `b.y`'s values that `a.x`
/// uses (its coverage, in `0..=1`).
pub type Fit<'a> = &'a dyn Fn(&str, &str, &str, &str) -> Option<f64>;

/// [`join_links`], with a reference whose name names no table (`support_rep_id`) linked only
/// to the key-like keys its values fit best: of the keys holding every value it has, those
/// it covers most (the 8 employees its values 1–8 all name, not the 275 artists whose ids
/// also include 1–8). Where no key holds all its values (or no fit is known), it reaches
/// every key-like key as in [`join_links`]. References that name their table are linked by
/// name alone. Inclusion and coverage are the usual evidence for an undeclared foreign key.
///
/// ```
/// use sandgym_env_sql::join_links_fitting;
/// let t = |name: &str, cols: &[&str]| (name.to_owned(), cols.iter().map(|c| c.to_string()).collect());
/// let tables = [
///     t("customers", &["customer_id", "support_rep_id"]),
///     t("employees", &["employee_id", "name"]),
///     t("artists", &["artist_id", "name"]),
/// ];
/// // The reps' values are ids 1-8: all 8 employees, 8 of 275 artists.
/// let fit = |_: &str, _: &str, b: &str, _: &str| Some(if b == "employees" { 1.0 } else { 8.0 / 275.0 });
/// let links = join_links_fitting(&tables, &fit);
/// let on = |a: &str, x: &str, b: &str, y: &str| [(a.to_owned(), x.to_owned()), (b.to_owned(), y.to_owned())];
/// assert_eq!(links, [on("customers", "support_rep_id", "employees", "employee_id")]);
/// ```
pub fn join_links_fitting(tables: &[(String, Vec<String>)], fit: Fit) -> Vec<JoinOn> {
    let mut links: Vec<JoinOn> = Vec::new();
    for (a, cols) in tables {
        let key = own_key(a, cols);
        for x in cols.iter().filter(|x| Some(x.as_str()) != key) {
            let Some(s) = stem(x) else { continue };
            let named: Vec<&(String, Vec<String>)> = tables
                .iter()
                .filter(|(b, _)| b != a && names_table(s, b))
                .collect();
            let fallback = named.is_empty();
            let targets = if fallback {
                tables
                    .iter()
                    .filter(|(b, bcols)| b != a && own_key(b, bcols).is_some_and(is_key))
                    .collect()
            } else {
                named
            };
            let mut pairs: Vec<(&str, &str)> = targets
                .into_iter()
                .filter_map(|(b, bcols)| {
                    let y = if bcols.contains(x) {
                        Some(x.as_str())
                    } else {
                        own_key(b, bcols)
                    };
                    y.map(|y| (b.as_str(), y))
                })
                .collect();
            if fallback {
                pairs = best_fits(pairs, |b, y| fit(a, x, b, y));
            }
            for (b, y) in pairs {
                push(&mut links, a, x, b, y);
            }
        }
    }
    // Two tables' columns of one name, where it is a key of either or key-like.
    for (i, (a, cols)) in tables.iter().enumerate() {
        for (b, bcols) in &tables[i + 1..] {
            for x in cols.iter().filter(|x| bcols.contains(x)) {
                if is_key(x) || own_key(a, cols) == Some(x) || own_key(b, bcols) == Some(x) {
                    push(&mut links, a, x, b, x);
                }
            }
        }
    }
    links
}

/// The rows a question names by table and number ("film 42", "member 120", "order 7"): for
/// each word that names a table (itself or its plural) followed by a whole number, that
/// table's key-like own key and the number, as `(table, key, number)` in the question's
/// order. A table whose own key is not key-like (`isbn`) gives none, and neither does a pair
/// that is itself a value (`is_value`): "albums by Artist 7" names the artist called
/// `Artist 7`, not the one numbered 7.
///
/// ```
/// let t = |name: &str, cols: &[&str]| (name.to_owned(), cols.iter().map(|c| c.to_string()).collect());
/// let tables = [t("films", &["film_id", "title"]), t("studios", &["studio_id", "name"])];
/// let none = |_: &str| false;
/// let rows = sandgym_env_sql::numbered_rows("Which studio made film 77?", &tables, &none);
/// assert_eq!(rows, [("films".to_owned(), "film_id".to_owned(), "77".to_owned())]);
/// let titled = |s: &str| s == "Film 77";
/// assert!(sandgym_env_sql::numbered_rows("Who made Film 77?", &tables, &titled).is_empty());
/// ```
pub fn numbered_rows(
    question: &str,
    tables: &[(String, Vec<String>)],
    is_value: &dyn Fn(&str) -> bool,
) -> Vec<(String, String, String)> {
    let words: Vec<&str> = question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .collect();
    let mut out = Vec::new();
    for pair in words.windows(2) {
        let (word, number) = (pair[0], pair[1]);
        if number.is_empty()
            || !number.chars().all(|c| c.is_ascii_digit())
            || number.len() > 9
            || is_value(&format!("{word} {number}"))
        {
            continue;
        }
        for (table, cols) in tables.iter().filter(|(t, _)| names_table(word, t)) {
            if let Some(key) = own_key(table, cols).filter(|k| is_key(k)) {
                let row = (table.clone(), key.to_owned(), number.to_owned());
                if !out.contains(&row) {
                    out.push(row);
                }
            }
        }
    }
    out
}

/// Of `pairs` (`(table, key)`), those whose `fit` is highest, within a relative 1e-9; all of
/// them where none fits (a value no key holds, or nothing known).
fn best_fits<'a>(
    pairs: Vec<(&'a str, &'a str)>,
    fit: impl Fn(&str, &str) -> Option<f64>,
) -> Vec<(&'a str, &'a str)> {
    let fits: Vec<Option<f64>> = pairs.iter().map(|(b, y)| fit(b, y)).collect();
    let Some(best) = fits.iter().flatten().copied().reduce(f64::max) else {
        return pairs;
    };
    pairs
        .into_iter()
        .zip(fits)
        .filter(|(_, f)| f.is_some_and(|f| f >= best - best.abs() * 1e-9))
        .map(|(p, _)| p)
        .collect()
}

/// Adds `a.x = b.y` to `links` unless it is there, either way round.
fn push(links: &mut Vec<JoinOn>, a: &str, x: &str, b: &str, y: &str) {
    let on = [(a.to_owned(), x.to_owned()), (b.to_owned(), y.to_owned())];
    let back = [on[1].clone(), on[0].clone()];
    if !links.contains(&on) && !links.contains(&back) {
        links.push(on);
    }
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

    fn has(links: &[JoinOn], a: &str, x: &str, b: &str, y: &str) -> bool {
        links.iter().any(|[(p, q), (r, s)]| {
            (p == a && q == x && r == b && s == y) || (p == b && q == y && r == a && s == x)
        })
    }

    #[test]
    fn references_reach_the_key_of_the_table_they_name_and_nothing_else() {
        let links = join_links(&[
            t("films", &["film_id", "title", "studio_id", "director_id"]),
            t("studios", &["studio_id", "name"]),
            t("directors", &["id", "full_name"]),
            t("viewings", &["viewing_id", "film_id", "member_id"]),
            t("members", &["member_id", "plan_id"]),
            t("plans", &["plan_id", "monthly_fee"]),
        ]);
        assert!(has(&links, "films", "studio_id", "studios", "studio_id"));
        assert!(has(&links, "films", "director_id", "directors", "id"));
        assert!(has(&links, "viewings", "film_id", "films", "film_id"));
        assert!(has(&links, "members", "plan_id", "plans", "plan_id"));
        assert!(!has(&links, "films", "film_id", "studios", "studio_id"));
        assert!(!has(&links, "viewings", "member_id", "directors", "id"));
        assert!(!has(&links, "plans", "monthly_fee", "members", "member_id"));
        assert_eq!(links.len(), 5, "{links:?}");
    }

    #[test]
    fn unusual_references_and_keys_still_join() {
        let links = join_links(&[
            t("Customer", &["CustomerId", "SupportRepId"]),
            t("Employee", &["EmployeeId", "LastName"]),
            t("books", &["isbn", "title"]),
            t("loans", &["loan_id", "isbn", "Customer_id"]),
            t("settings", &["name", "value"]),
            t("enrollments", &["Customer_id", "isbn"]),
        ]);
        // A reference naming no table reaches every table's key-like key.
        assert!(has(
            &links,
            "Customer",
            "SupportRepId",
            "Employee",
            "EmployeeId"
        ));
        assert!(has(&links, "Customer", "SupportRepId", "loans", "loan_id"));
        assert!(!has(&links, "Customer", "SupportRepId", "books", "isbn"));
        // A shared column that is one side's key; a stem in another case.
        assert!(has(&links, "loans", "isbn", "books", "isbn"));
        assert!(has(
            &links,
            "loans",
            "Customer_id",
            "Customer",
            "CustomerId"
        ));
        // A table keyed by its references only: each still reaches its table.
        assert!(has(
            &links,
            "enrollments",
            "Customer_id",
            "Customer",
            "CustomerId"
        ));
        assert!(has(&links, "enrollments", "isbn", "books", "isbn"));
        // A table nothing reaches is in no pair (the pattern joins it on any column).
        assert!(!links.iter().flatten().any(|(t, _)| t == "settings"));
        assert!(!has(&links, "books", "title", "loans", "loan_id"));
        // Keys spelled `…ID`: a reference and a table's own key.
        let upper = join_links(&[
            t("Orders", &["OrderID", "CustomerID", "PAID"]),
            t("Customers", &["CustomerID", "CompanyName"]),
        ]);
        assert_eq!(upper.len(), 1, "{upper:?}");
        assert!(has(
            &upper,
            "Orders",
            "CustomerID",
            "Customers",
            "CustomerID"
        ));
    }

    #[test]
    fn a_reference_naming_no_table_keeps_the_keys_its_values_fit_best() {
        let tables = [
            t("customers", &["customer_id", "rep_id"]),
            t("employees", &["employee_id", "name"]),
            t("artists", &["artist_id", "name"]),
            t("genres", &["genre_id", "name"]),
        ];
        let links_with = |fits: [Option<f64>; 3]| {
            join_links_fitting(&tables, &|_, _, b, _| match b {
                "employees" => fits[0],
                "artists" => fits[1],
                _ => fits[2],
            })
        };
        let reps = |links: &[JoinOn]| {
            ["employees", "artists", "genres"].map(|b| {
                let key = format!("{}_id", b.trim_end_matches('s'));
                has(links, "customers", "rep_id", b, &key)
            })
        };
        assert_eq!(
            reps(&links_with([Some(1.0), Some(0.1), None])),
            [true, false, false]
        );
        assert_eq!(
            reps(&links_with([Some(0.5), Some(0.5), None])),
            [true, true, false]
        );
        assert_eq!(reps(&links_with([None, None, None])), [true, true, true]);
        // A reference that names its table is linked by name, whatever its values.
        let named = join_links_fitting(
            &[
                t("albums", &["album_id", "artist_id"]),
                t("artists", &["artist_id"]),
            ],
            &|_, _, _, _| None,
        );
        assert!(has(&named, "albums", "artist_id", "artists", "artist_id"));
    }
}
