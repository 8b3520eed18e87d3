//! The tables one query may join, and every way of writing the `FROM … JOIN … ON …` that
//! joins them: each `JOIN` adds a table linked ([`crate::join_links`]) to one already in the
//! query, on that link. The episode's query shape ([`crate::sql_pattern_typed`]) writes one
//! branch per set, naming only that set's columns, so `FROM films JOIN members ON
//! films.film_id = reviews.film_id` (a link of a table not joined) or `WHERE studios.country =
//! 'JP'` without `studios` in the query cannot be written.

use crate::links::JoinOn;
use crate::pattern::{alternatives, escape};

/// Two or three tables one query may join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JoinSet {
    /// Their indices in the schema, ascending.
    pub tables: Vec<usize>,
    /// The regular expression of what follows `FROM`: every order of the set's tables in which
    /// each `JOIN` is on a link to a table before it.
    pub from: String,
}

/// The most sets a schema gets one branch each; a schema whose links would give more (many
/// tables that no link reaches, each joining any other) keeps the looser shape of one join
/// branch per `FROM` table, any table's column after a `JOIN`.
pub(crate) const MAX_JOIN_SETS: usize = 160;

/// The sets of two and three tables of `tables` that `links` connect (a table no link reaches
/// joins any other, on any two columns), each with its `FROM` clauses; `None` when there are
/// no links, or more than [`MAX_JOIN_SETS`] sets.
///
/// Written by hand: the set of tables a query names must be known before its first column
/// (the `SELECT` list comes first), so the regular expression spells each set out.
pub(crate) fn join_sets(
    tables: &[(String, Vec<String>)],
    links: &[JoinOn],
) -> Option<Vec<JoinSet>> {
    if links.is_empty() {
        return None;
    }
    let n = tables.len();
    // The `ON` alternatives joining tables i and j, either way round; `None` when they may not
    // join.
    let linked = |t: &str| links.iter().flatten().any(|(name, _)| name == t);
    let on: Vec<Vec<Option<String>>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    (i != j)
                        .then(|| on_clause(tables, links, i, j, &linked))
                        .flatten()
                })
                .collect()
        })
        .collect();
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if on[i][j].is_some() {
                sets.push(vec![i, j]);
            }
            for k in j + 1..n {
                let edges = [on[i][j].is_some(), on[i][k].is_some(), on[j][k].is_some()];
                if edges.iter().filter(|e| **e).count() >= 2 {
                    sets.push(vec![i, j, k]);
                }
            }
            if sets.len() > MAX_JOIN_SETS {
                return None;
            }
        }
    }
    let sets = sets
        .into_iter()
        .map(|set| {
            let from = orders(&set)
                .into_iter()
                .filter_map(|order| {
                    let mut text = escape(&tables[order[0]].0);
                    for (k, &t) in order.iter().enumerate().skip(1) {
                        let ons: Vec<&str> = order[..k]
                            .iter()
                            .filter_map(|&e| on[e][t].as_deref())
                            .collect();
                        if ons.is_empty() {
                            return None;
                        }
                        text.push_str(&format!(
                            " JOIN {} ON ({})",
                            escape(&tables[t].0),
                            ons.join("|")
                        ));
                    }
                    Some(text)
                })
                .collect::<Vec<_>>()
                .join("|");
            JoinSet {
                tables: set,
                from: format!("({from})"),
            }
        })
        .collect();
    Some(sets)
}

/// The `ON` alternatives joining tables `i` and `j`: their links, either way round; with none,
/// and one of them in no link, any column of each.
fn on_clause(
    tables: &[(String, Vec<String>)],
    links: &[JoinOn],
    i: usize,
    j: usize,
    linked: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let (a, b) = (&tables[i].0, &tables[j].0);
    let pairs: Vec<String> = links
        .iter()
        .filter(|[(x, _), (y, _)]| (x == a && y == b) || (x == b && y == a))
        .flat_map(|[(x, c), (y, d)]| [format!("{x}.{c} = {y}.{d}"), format!("{y}.{d} = {x}.{c}")])
        .collect();
    if !pairs.is_empty() {
        return Some(alternatives(&pairs));
    }
    if linked(a) && linked(b) {
        return None;
    }
    let cols = |t: usize| {
        (!tables[t].1.is_empty())
            .then(|| format!("{}\\.{}", escape(&tables[t].0), alternatives(&tables[t].1)))
    };
    let (l, r) = (cols(i)?, cols(j)?);
    Some(format!("{l} = {r}|{r} = {l}"))
}

/// Every order of `set`'s two or three tables.
fn orders(set: &[usize]) -> Vec<Vec<usize>> {
    match set {
        [a, b] => vec![vec![*a, *b], vec![*b, *a]],
        [a, b, c] => [
            [a, b, c],
            [a, c, b],
            [b, a, c],
            [b, c, a],
            [c, a, b],
            [c, b, a],
        ]
        .iter()
        .map(|o| o.iter().map(|t| **t).collect())
        .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, cols: &[&str]) -> (String, Vec<String>) {
        (
            name.to_owned(),
            cols.iter().map(|c| c.to_string()).collect(),
        )
    }

    #[test]
    fn a_chain_joins_each_table_on_a_link_to_one_before_it() {
        let tables = [
            t("studios", &["studio_id", "country"]),
            t("films", &["film_id", "studio_id"]),
            t("reviews", &["review_id", "film_id", "member_id"]),
            t("members", &["member_id", "name"]),
        ];
        let links = crate::join_links(&tables);
        let sets = join_sets(&tables, &links).expect("linked");
        let names = |s: &JoinSet| {
            s.tables
                .iter()
                .map(|&i| tables[i].0.as_str())
                .collect::<Vec<_>>()
        };
        let all: Vec<Vec<&str>> = sets.iter().map(names).collect();
        assert!(all.contains(&vec!["studios", "films"]));
        assert!(all.contains(&vec!["films", "reviews", "members"]));
        // Studios and members share no link, and no table links both to a third of the pair.
        assert!(!all.contains(&vec!["studios", "members"]));
        assert!(!all.contains(&vec!["studios", "reviews", "members"]));
        let chain = sets
            .iter()
            .find(|s| names(s) == ["films", "reviews", "members"])
            .expect("set");
        let re = regex::Regex::new(&format!("^{}$", chain.from)).expect("regex");
        assert!(re.is_match(
            "films JOIN reviews ON films.film_id = reviews.film_id JOIN members ON reviews.member_id = members.member_id"
        ));
        assert!(re.is_match(
            "members JOIN reviews ON members.member_id = reviews.member_id JOIN films ON reviews.film_id = films.film_id"
        ));
        // `members` is not linked to `films`, so it cannot come second after it.
        assert!(!re.is_match(
            "films JOIN members ON reviews.member_id = members.member_id JOIN reviews ON films.film_id = reviews.film_id"
        ));
    }

    #[test]
    fn no_links_or_too_many_sets_keep_the_loose_shape() {
        let tables = [t("a", &["x"]), t("b", &["y"])];
        assert_eq!(join_sets(&tables, &[]), None);
        // Twenty-one tables, one pair linked: the nineteen others join any table, too many sets.
        let mut many: Vec<(String, Vec<String>)> = (0..20)
            .map(|i| t(&format!("t{i}"), &[format!("v{i}").as_str()]))
            .collect();
        many[0].1 = vec!["a_id".into()];
        many.push(t("as", &["a_id", "w"]));
        let links = crate::join_links(&many);
        assert!(!links.is_empty());
        assert_eq!(join_sets(&many, &links), None);
    }
}
