//! The scripted baseline: the template-matching logic of a typical hand-written SQL agent.

use sandgym_env_api::{Action, Agent, Observation};
use serde_json::json;

/// A rule-based SQL agent: it parses the question with keyword templates ("how many" →
/// `COUNT(*)`, "highest" → `MAX(col)`, "per" → `GROUP BY`, "above the average" → a nested
/// query, …), runs its query once to check it, and answers with it. It knows nothing about
/// joins, so questions that need one are beyond it — the gap a learned policy can close.
///
/// ```
/// use sandgym_env_api::{Agent, Env, ResetOptions};
/// use sandgym_env_sql::{SqlAgentEnv, SqlBaseline};
/// let mut env = SqlAgentEnv::new()?;
/// let mut agent = SqlBaseline::default();
/// let mut obs = env.reset(3, &ResetOptions::default())?;
/// while !env.done().is_done() {
///     obs = env.step(&agent.act(&obs))?;
/// }
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct SqlBaseline {
    planned: Option<String>,
}

impl Agent for SqlBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        if observation.content.contains("\nQuestion: ") {
            let query = plan(&observation.content);
            self.planned = Some(query.clone());
            return Action::tool("run_sql", json!({"query": query}))
                .with_thought("Check the templated query before answering.");
        }
        let query = self.planned.take().unwrap_or_else(|| "SELECT 1".into());
        Action::respond(query).with_thought("The query ran; answer with it.")
    }
}

struct Table {
    name: String,
    columns: Vec<String>,
}

fn parse(instruction: &str) -> (Vec<Table>, String, String) {
    let mut lines = instruction.lines();
    let header = lines.next().unwrap_or_default();
    let tables = header
        .split_once(": ")
        .map(|(_, t)| t.trim_end_matches('.'))
        .unwrap_or_default()
        .split("; ")
        .filter_map(|t| {
            let (name, cols) = t.split_once('(')?;
            Some(Table {
                name: name.to_owned(),
                columns: cols
                    .trim_end_matches(')')
                    .split(", ")
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect();
    let question = lines
        .find_map(|l| l.strip_prefix("Question: "))
        .unwrap_or_default()
        .to_owned();
    let lower = question.to_lowercase();
    (tables, question, lower)
}

fn mentioned<'a>(q: &str, columns: &'a [String]) -> Option<&'a String> {
    columns
        .iter()
        .filter(|c| q.contains(&c.replace('_', " ")))
        .max_by_key(|c| c.len())
}

const NUMERIC_HINTS: [&str; 8] = [
    "price", "stock", "salary", "budget", "gpa", "credits", "grade", "year",
];

/// The template-matched query for the question in `instruction`.
fn plan(instruction: &str) -> String {
    let (tables, question, q) = parse(instruction);
    let Some(table) = tables
        .iter()
        .filter_map(|t| {
            let singular = t.name.trim_end_matches('s');
            q.find(&t.name)
                .or_else(|| q.find(singular))
                .map(|at| (at, t))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, t)| t)
        .or(tables.first())
    else {
        return "SELECT 1".into();
    };
    let name = &table.name;
    let label = if table.columns.iter().any(|c| c == "name") {
        "name"
    } else {
        table.columns.get(1).map_or("id", String::as_str)
    };
    let col = mentioned(&q, &table.columns);
    let numeric = col
        .filter(|c| NUMERIC_HINTS.iter().any(|h| c.contains(h)))
        .cloned()
        .or_else(|| {
            table
                .columns
                .iter()
                .find(|c| NUMERIC_HINTS.iter().any(|h| c.contains(h)))
                .cloned()
        })
        .unwrap_or_else(|| "id".into());
    let number = question
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| !w.is_empty() && w.chars().any(|c| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches('.').to_owned());

    let agg = [
        ("highest", "MAX"),
        ("maximum", "MAX"),
        ("largest", "MAX"),
        ("lowest", "MIN"),
        ("minimum", "MIN"),
        ("smallest", "MIN"),
        ("average", "AVG"),
        ("total", "SUM"),
    ]
    .iter()
    .find(|(w, _)| q.contains(w))
    .map(|(_, a)| *a);
    let grouped = ["per ", "for each", "for every", "grouped by"]
        .iter()
        .any(|w| q.contains(w));
    let counting = q.starts_with("how many") || q.contains("count") || q.contains("number of");

    if grouped {
        let by = col
            .filter(|c| c.as_str() != name.as_str())
            .cloned()
            .unwrap_or_else(|| label.to_owned());
        return format!("SELECT {by}, COUNT(*) FROM {name} GROUP BY {by}");
    }
    if q.contains("average") && (q.contains("above") || q.contains("higher") || q.contains("over"))
    {
        return format!(
            "SELECT {label} FROM {name} WHERE {numeric} > (SELECT AVG({numeric}) FROM {name})"
        );
    }
    if let Some(agg) = agg.filter(|_| !counting) {
        return format!("SELECT {agg}({numeric}) FROM {name}");
    }
    if q.contains("order") {
        let target = col.cloned().unwrap_or_else(|| label.to_owned());
        let dir = if q.contains("reverse") { "DESC" } else { "ASC" };
        return format!("SELECT {target} FROM {name} ORDER BY {target} {dir}");
    }
    if let Some(n) = &number {
        if q.contains("expensive") || q.contains("cheapest") || q.contains("top") {
            let dir = if q.contains("cheapest") {
                "ASC"
            } else {
                "DESC"
            };
            return format!("SELECT {label} FROM {name} ORDER BY {numeric} {dir} LIMIT {n}");
        }
        if ["more than", "above", "over", "greater than", "higher than"]
            .iter()
            .any(|w| q.contains(w))
        {
            return format!("SELECT {label} FROM {name} WHERE {numeric} > {n}");
        }
    }
    // An equality filter: the words after the last preposition, against the mentioned column
    // or the table's first descriptive column.
    let value = [
        "title ",
        " in the ",
        " in ",
        " from the ",
        " from ",
        " as ",
        " by the ",
    ]
    .iter()
    .filter_map(|p| question.rfind(p).map(|at| &question[at + p.len()..]))
    .min_by_key(|rest| rest.len())
    .map(|rest| {
        rest.trim_end_matches(['?', '.'])
            .trim_end_matches(" category")
            .trim_end_matches(" department")
            .trim_end_matches(" students")
            .to_owned()
    });
    let filter_col = col
        .filter(|c| !NUMERIC_HINTS.iter().any(|h| c.contains(h)) && c.as_str() != "name")
        .cloned()
        .or_else(|| table.columns.get(2).cloned())
        .unwrap_or_else(|| label.to_owned());
    let filter = value.map(|v| format!(" WHERE {filter_col} = '{}'", v.replace('\'', "''")));
    if counting {
        return format!(
            "SELECT COUNT(*) FROM {name}{}",
            if q.contains(" in ") || q.contains(" from ") || q.contains("title") {
                filter.unwrap_or_default()
            } else {
                String::new()
            }
        );
    }
    format!("SELECT {label} FROM {name}{}", filter.unwrap_or_default())
}
