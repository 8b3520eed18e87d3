//! A multi-schema curriculum: generated databases over many domains, each with questions
//! written from its own schema and values, so a policy learns to read the schema in its
//! prompt instead of remembering three.
//!
//! Database `i` of a curriculum takes the `i`-th domain of the catalogue in turn
//! ([`domains`]: retail, clinic, school, library, company, travel, dining, bank, events,
//! logistics, league, property, and three mixed ones of 9–12 tables), keeps three or more of
//! its entities, spells each table and column one of several ways (`customers`, `clients`,
//! `buyers`; `price`, `unit_price`), keeps four in five of each entity's columns (text,
//! numbers, money, dates, some with NULLs), links child rows to parents through `…_id`
//! columns (skewed: some parents have many children, some none), and draws 5–500 rows per
//! table. Its questions are written by the same generator as a user's database's
//! ([`crate::self_tasks`]), naming tables and columns the way people say them ("how many
//! people" for `customers`, "cost" for `price`). Deterministic in the seed.
//!
//! ```
//! use sandgym_env_sql::{Curriculum, curriculum_db};
//! let db = curriculum_db(0, 0);
//! assert!(db.name.starts_with("cur0_"));
//! assert!(db.script.contains("CREATE TABLE"));
//! assert_eq!(Curriculum::default().databases, 60);
//! ```

use serde::{Deserialize, Serialize};

mod domains;
mod generate;

pub use generate::{CurriculumDb, curriculum_db};

/// The largest curriculum a configuration may ask for.
pub const MAX_CURRICULUM_DATABASES: usize = 2000;

/// A curriculum (`"curriculum"` in the env configuration): its databases and their tasks are
/// added to the configuration's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Curriculum {
    /// How many databases (at most [`MAX_CURRICULUM_DATABASES`]).
    pub databases: usize,
    /// The seed of the databases and their questions.
    pub seed: u64,
    /// The most questions written per table.
    pub per_table: usize,
    /// The last this many databases' tasks are test tasks (schemas never trained on); the
    /// others' are train tasks.
    pub test_databases: usize,
    /// The curriculum's tasks alone: without the bundled tasks beside them (when the
    /// configuration has no task file and no `databases` of its own). With
    /// [`Curriculum::test_databases`], the test split is then the unseen schemas' tasks and
    /// nothing else — a measure of an agent on databases it never saw.
    pub alone: bool,
}

impl Default for Curriculum {
    fn default() -> Self {
        Self {
            databases: 60,
            seed: 0,
            per_table: 6,
            test_databases: 0,
            alone: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::domains::{DOMAINS, ENTITIES, entity};
    use super::*;
    use crate::engine;
    use crate::self_tasks::{SelfTasks, write};

    #[test]
    fn every_domain_names_entities_of_the_catalogue() {
        for d in DOMAINS {
            assert!(d.entities.len() >= 3, "{}", d.name);
            for k in d.entities {
                let e = entity(k).unwrap_or_else(|| panic!("{}: {k}", d.name));
                for p in e.parents {
                    assert!(entity(p).is_some(), "{k} → {p}");
                }
            }
        }
        let keys: std::collections::BTreeSet<_> = ENTITIES.iter().map(|e| e.key).collect();
        assert_eq!(keys.len(), ENTITIES.len());
    }

    #[test]
    fn curriculum_databases_build_differ_and_get_valid_tasks_that_join() {
        let mut schemas = std::collections::BTreeSet::new();
        let mut intents = std::collections::BTreeSet::new();
        let mut tables_seen = (usize::MAX, 0);
        for i in 0..30 {
            let db = curriculum_db(7, i);
            assert_eq!(db.script, curriculum_db(7, i).script, "deterministic");
            let image = engine::build(&db.script).unwrap_or_else(|e| panic!("{}: {e}", db.name));
            let n = image.items.len();
            tables_seen = (tables_seen.0.min(n), tables_seen.1.max(n));
            assert!((3..=12).contains(&n), "{}: {n} tables", db.name);
            schemas.insert(
                db.script
                    .lines()
                    .filter(|l| l.starts_with("CREATE"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            let settings = SelfTasks {
                per_table: 6,
                seed: 7,
                test_every: 0,
            };
            let tasks = write(
                &db.name,
                &image,
                &settings,
                1_000_000,
                false,
                &db.vocabulary,
                crate::self_tasks::Shapes::Schema,
            );
            assert!(
                tasks.len() >= 3 * n.min(4),
                "{}: {} tasks",
                db.name,
                tasks.len()
            );
            for t in &tasks {
                let o = engine::query(&image, &t.gold_sql, 1_000_000).unwrap();
                assert!(!o.rows.is_empty(), "{}", t.gold_sql);
                for lit in t.gold_sql.split('\'').skip(1).step_by(2) {
                    assert!(t.question.contains(lit), "{}: {}", t.question, t.gold_sql);
                }
                intents.extend(t.intent.clone());
            }
        }
        assert_eq!(schemas.len(), 30, "every database has its own schema");
        assert!(tables_seen.1 >= 8, "{tables_seen:?}");
        for shape in [
            "self-two-joins",
            "self-having",
            "self-null-count",
            "self-join-group",
            "self-above-average",
            "self-distinct",
        ] {
            assert!(intents.contains(shape), "{shape} missing from {intents:?}");
        }
    }
}
