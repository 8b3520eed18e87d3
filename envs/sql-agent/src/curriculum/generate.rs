//! One database of the curriculum: a domain's entities under names drawn for it, their rows,
//! and how people say each table and column.

use std::collections::BTreeSet;
use std::fmt::Write;

use sandgym_env_api::SplitMix64;

use super::domains::{self, Column, DOMAINS, Entity, FIRM, FIRST, Gen, LAST};
use crate::self_tasks::Vocabulary;

/// A generated database: its name, the script that builds it, and the words people use for
/// its tables and columns.
#[derive(Clone, Debug)]
pub struct CurriculumDb {
    /// `cur{index}_{domain}`.
    pub name: String,
    /// Its domain's name.
    pub domain: &'static str,
    /// `CREATE TABLE` statements (with `REFERENCES`) and multi-row `INSERT`s.
    pub script: String,
    /// How its tables and columns are said, for the questions written over it.
    pub vocabulary: Vocabulary,
}

/// A table as drawn: the entity and the names chosen for it.
struct Drawn {
    entity: &'static Entity,
    table: String,
    singular: String,
    key: String,
    rows: usize,
}

/// Database `index` of the curriculum of `seed`: its domain is the `index`-th in turn, the
/// rest (which entities, their names, which columns, the rows) drawn from `seed` and `index`.
pub fn curriculum_db(seed: u64, index: usize) -> CurriculumDb {
    let mut rng = SplitMix64::new(seed ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let domain = &DOMAINS[index % DOMAINS.len()];
    let all: Vec<&'static Entity> = domain
        .entities
        .iter()
        .filter_map(|k| domains::entity(k))
        .collect();
    // At least three tables and half the domain's (all of a three-entity domain); a parent of
    // a kept table is kept four times in five, so most databases join.
    let least = (all.len() / 2).max(3).min(all.len());
    let want = least + rng.below((all.len() + 1 - least) as u64) as usize;
    let mut kept: BTreeSet<usize> = BTreeSet::new();
    let mut order: Vec<usize> = (0..all.len()).collect();
    rng.shuffle(&mut order);
    for &i in &order {
        if kept.len() >= want.min(all.len()) {
            break;
        }
        kept.insert(i);
        for p in all[i].parents {
            if let Some(j) = all.iter().position(|e| e.key == *p)
                && rng.below(5) < 4
            {
                kept.insert(j);
            }
        }
    }
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let drawn: Vec<Drawn> = kept
        .iter()
        .map(|&i| {
            let entity = all[i];
            let free: Vec<&(&str, &str)> = entity
                .names
                .iter()
                .filter(|(t, _)| !taken.contains(*t))
                .collect();
            let (table, singular) = match free.is_empty() {
                true => (
                    format!("{}_{i}", entity.names[0].0),
                    entity.names[0].1.to_owned(),
                ),
                false => {
                    let (t, s) = free[rng.below(free.len() as u64) as usize];
                    ((*t).to_owned(), (*s).to_owned())
                }
            };
            taken.insert(table.clone());
            let key = if rng.below(2) == 0 {
                "id".to_owned()
            } else {
                format!("{singular}_id")
            };
            let (lo, hi) = entity.rows;
            let rows = (lo + rng.below(u64::from(hi - lo + 1)) as u32) as usize;
            Drawn {
                entity,
                table,
                singular,
                key,
                rows,
            }
        })
        .collect();
    let mut script = String::new();
    let mut vocabulary = Vocabulary::default();
    for d in &drawn {
        let mut said: Vec<String> = d.entity.said.iter().map(|s| (*s).to_owned()).collect();
        said.push(crate::self_tasks::spoken(&d.table));
        vocabulary.tables.insert(d.table.clone(), dedup(said));
        write_table(d, &drawn, &mut rng, &mut script, &mut vocabulary);
    }
    CurriculumDb {
        name: format!("cur{index}_{}", domain.name),
        domain: domain.name,
        script,
        vocabulary,
    }
}

fn dedup(mut words: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    words.retain(|w| seen.insert(w.clone()));
    words
}

/// A column as written: its name, SQL type and values.
struct Written {
    name: String,
    sql_type: &'static str,
    values: Vec<String>,
}

fn write_table(
    d: &Drawn,
    all: &[Drawn],
    rng: &mut SplitMix64,
    script: &mut String,
    vocabulary: &mut Vocabulary,
) {
    let mut names: BTreeSet<String> = BTreeSet::from([d.key.clone()]);
    let mut cols: Vec<Written> = Vec::new();
    let mut add = |c: &Column, rng: &mut SplitMix64, cols: &mut Vec<Written>| {
        let free: Vec<&&str> = c.names.iter().filter(|n| !names.contains(**n)).collect();
        if free.is_empty() {
            return;
        }
        let name = (*free[rng.below(free.len() as u64) as usize]).to_owned();
        names.insert(name.clone());
        let mut said: Vec<String> = c.said.iter().map(|s| (*s).to_owned()).collect();
        said.push(crate::self_tasks::spoken(&name));
        vocabulary
            .columns
            .insert(format!("{}.{name}", d.table), dedup(said));
        let values = (0..d.rows)
            .map(|_| {
                if c.nulls > 0 && rng.below(100) < u64::from(c.nulls) {
                    "NULL".to_owned()
                } else {
                    value(c.values, rng)
                }
            })
            .collect();
        cols.push(Written {
            name,
            sql_type: sql_type(c.values),
            values,
        });
    };
    add(&d.entity.label, rng, &mut cols);
    // Four columns in five, at least one besides the label.
    let mut extra: Vec<&Column> = d
        .entity
        .columns
        .iter()
        .filter(|_| rng.below(5) < 4)
        .collect();
    if extra.is_empty() && !d.entity.columns.is_empty() {
        extra.push(&d.entity.columns[rng.below(d.entity.columns.len() as u64) as usize]);
    }
    for c in extra {
        add(c, rng, &mut cols);
    }
    let mut ddl: Vec<String> = vec![format!("{} INTEGER PRIMARY KEY", d.key)];
    ddl.extend(cols.iter().map(|c| format!("{} {}", c.name, c.sql_type)));
    // A `…_id` column for each parent present, each row naming one of the parent's rows.
    let mut refs: Vec<(String, usize)> = Vec::new();
    for p in d.entity.parents {
        if let Some(parent) = all.iter().find(|a| a.entity.key == *p) {
            let name = format!("{}_id", parent.singular);
            if names.insert(name.clone()) {
                ddl.push(format!(
                    "{name} INTEGER REFERENCES {}({})",
                    parent.table, parent.key
                ));
                refs.push((name, parent.rows));
            }
        }
    }
    let _ = writeln!(script, "CREATE TABLE {} ({});", d.table, ddl.join(", "));
    let ref_values: Vec<Vec<usize>> = refs
        .iter()
        .map(|(_, n)| (0..d.rows).map(|_| skewed(*n, rng)).collect::<Vec<usize>>())
        .collect();
    let mut header: Vec<&str> = vec![d.key.as_str()];
    header.extend(cols.iter().map(|c| c.name.as_str()));
    header.extend(refs.iter().map(|(n, _)| n.as_str()));
    for start in (0..d.rows).step_by(200) {
        let rows: Vec<String> = (start..(start + 200).min(d.rows))
            .map(|r| {
                let mut fields = vec![(r + 1).to_string()];
                fields.extend(cols.iter().map(|c| c.values[r].clone()));
                fields.extend(ref_values.iter().map(|v| (v[r] + 1).to_string()));
                format!("({})", fields.join(", "))
            })
            .collect();
        let _ = writeln!(
            script,
            "INSERT INTO {} ({}) VALUES {};",
            d.table,
            header.join(", "),
            rows.join(", ")
        );
    }
}

/// A row index below `n`, the first rows chosen more often (some parents have many children,
/// some none, as in real data).
fn skewed(n: usize, rng: &mut SplitMix64) -> usize {
    let u = rng.next_f64();
    ((u * u * n as f64) as usize).min(n.saturating_sub(1))
}

fn sql_type(g: Gen) -> &'static str {
    match g {
        Gen::Int(..) => "INTEGER",
        Gen::Money(..) => "FLOAT",
        Gen::Date(..) => "DATE",
        _ => "TEXT",
    }
}

/// One value as a SQL literal.
fn value(g: Gen, rng: &mut SplitMix64) -> String {
    let mut one = |list: &[&str]| list[rng.below(list.len() as u64) as usize].to_owned();
    let text = match g {
        Gen::Person => format!("{} {}", one(FIRST), one(LAST)),
        Gen::Company => format!("{} {}", one(LAST), one(FIRM)),
        Gen::Words(a, b) => format!("{} {}", one(a), one(b)),
        Gen::Pick(list) => one(list),
        Gen::Int(lo, hi) => return (lo + rng.below((hi - lo + 1) as u64) as i64).to_string(),
        Gen::Money(lo, hi) => {
            let cents = lo * 100 + rng.below(((hi - lo) * 100 + 1) as u64) as i64;
            return format!("{}.{:02}", cents / 100, cents % 100);
        }
        Gen::Date(lo, hi) => {
            let year = lo + rng.below((hi - lo + 1) as u64) as i32;
            return format!("'{year}-{:02}-{:02}'", 1 + rng.below(12), 1 + rng.below(28));
        }
    };
    format!("'{}'", text.replace('\'', "''"))
}
