//! Figures the README states about the bundled envs, computed from the code, so a change to
//! the task sets or the env sources that makes the README wrong fails here.

use std::collections::BTreeSet;

use sandgym::env_api::Split;

const README: &str = include_str!("../README.md");

fn says(text: &str) {
    assert!(README.contains(text), "the README should say `{text}`");
}

#[test]
fn the_sql_task_set_is_described_as_it_is() {
    let set = sandgym_env_sql::bundled_tasks();
    let test = set.split(Split::Test);
    says(&format!("{} over 3 databases", set.tasks.len()));
    says(&format!("the test split ({})", test.len()));
    let intents: BTreeSet<_> = set
        .tasks
        .iter()
        .map(|t| (t.database.clone(), t.intent.clone()))
        .collect();
    says(&format!("{} intents × 4 phrasings", intents.len()));
    let joins = test
        .iter()
        .filter(|t| t.gold_sql.contains(" JOIN "))
        .count();
    let percent = (100.0 * joins as f64 / test.len() as f64).round();
    says(&format!(
        "{percent}% of the test split ({joins} of {}) needs one",
        test.len()
    ));
}

#[test]
fn the_support_task_set_is_described_as_it_is() {
    let tasks = sandgym_env_support::bundled_tasks();
    let test = tasks.iter().filter(|t| t.split == Split::Test).count();
    let intents: BTreeSet<String> = tasks.iter().map(|t| format!("{:?}", t.intent)).collect();
    says(&format!(
        "{} generated from seeds, {} intents",
        tasks.len(),
        intents.len()
    ));
    says(&format!("the test split ({test})"));
}

#[test]
fn the_integration_cost_is_the_envs_source_today() {
    for (env, name) in [
        ("sql-agent-v0", "sql-agent"),
        ("customer-service-v0", "customer-service"),
    ] {
        let lines = sandgym::approach::integration_lines(env).unwrap();
        says(&format!("`{name}`: {lines} lines"));
    }
}

/// The baselines' row of the env table is what the baselines score today, every test task
/// once (the figures `sandgym run --agent baseline --split test --every-task` prints).
#[test]
fn the_baselines_scores_are_the_readmes() {
    use sandgym::env_api::{ResetOptions, Split};
    for env in ["sql-agent-v0", "customer-service-v0"] {
        let target = sandgym::EnvTarget::new(env);
        let n = target.spec().unwrap().tasks.unwrap().test;
        let episodes = sandgym::play::baseline_episodes(
            &target,
            0..n,
            &ResetOptions::split(Split::Test).cycling(),
        )
        .unwrap();
        let r = sandgym::play::eval_report(&episodes);
        let row = format!(
            "| `{env}` | {:.3} [{:.3}, {:.3}] of {n} | {:.3} |",
            r.success_rate, r.success_ci95.0, r.success_ci95.1, r.mean_reward
        );
        says(&row);
    }
}

/// The README's comparison tables are what `sandgym compare` prints for the reports kept in
/// `docs/compare/` (each the `compare.json` of the run the README names), so a number typed
/// into the README, or a report changed without its table, fails here.
#[test]
fn the_comparison_tables_are_the_kept_reports() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compare");
    let mut reports = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let report: sandgym::comparison::Report = serde_json::from_str(&text).unwrap();
            says(sandgym::comparison::markdown(&report).trim_end());
            reports += 1;
        }
    }
    assert!(reports >= 1, "no comparison report in {}", dir.display());
}
