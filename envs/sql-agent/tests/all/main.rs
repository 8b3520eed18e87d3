//! Integration tests of sql-agent-v0.

use sandgym_env_api::{Action, Agent, Env, ResetOptions, Split, TimeLimit, check_env};
use sandgym_env_sql::{SqlAgentEnv, SqlBaseline, SqlConfig, TaskSet};
use serde_json::json;

fn env() -> SqlAgentEnv {
    SqlAgentEnv::new().unwrap()
}

/// Runs the baseline on every task of a split; returns (successes, tasks).
fn baseline_on(split: Split) -> (usize, usize) {
    let mut env = TimeLimit::from_spec(env());
    let ids: Vec<String> = env
        .inner()
        .tasks()
        .split(split)
        .iter()
        .map(|t| t.id.clone())
        .collect();
    let mut wins = 0;
    for id in &ids {
        let mut agent = SqlBaseline::default();
        let mut obs = env
            .reset(0, &ResetOptions::split(split).with_task(id.clone()))
            .unwrap();
        while !env.done().is_done() {
            obs = env.step(&agent.act(&obs)).unwrap();
        }
        wins += usize::from(obs.info.get("success") == Some(&json!(true)));
    }
    (wins, ids.len())
}

#[test]
fn the_bundled_set_is_large_varied_and_every_gold_query_answers() {
    let env = env();
    let set = env.tasks();
    assert!(set.tasks.len() >= 300, "{}", set.tasks.len());
    let dbs: std::collections::BTreeSet<_> = set.tasks.iter().map(|t| t.database.clone()).collect();
    assert_eq!(dbs.len(), 3);
    let sql: String = set
        .tasks
        .iter()
        .map(|t| t.gold_sql.to_uppercase())
        .collect::<Vec<_>>()
        .join("\n");
    for feature in [
        "WHERE", "COUNT(", "MAX(", "AVG(", "GROUP BY", "ORDER BY", "LIMIT", "JOIN", "(SELECT",
    ] {
        assert!(sql.contains(feature), "no task uses {feature}");
    }
    // Every gold query runs and returns rows: submitting it is always right.
    let mut env = env;
    for task in env.tasks().tasks.clone() {
        env.reset(
            0,
            &ResetOptions::split(task.split).with_task(task.id.clone()),
        )
        .unwrap();
        env.step(&Action::respond(task.gold_sql.clone())).unwrap();
        assert_eq!(
            env.observe().info["success"],
            json!(true),
            "{}: {}",
            task.id,
            task.gold_sql
        );
        let tokens = task.gold_sql.split_whitespace().count() as f64;
        assert!(
            (env.reward() - (1.2 - 0.01 * tokens)).abs() < 1e-9,
            "{}",
            task.id
        );
    }
}

#[test]
fn the_test_split_holds_unseen_phrasings_and_values() {
    let env = env();
    let set = env.tasks();
    let train: std::collections::BTreeSet<_> = set
        .split(Split::Train)
        .iter()
        .map(|t| t.question.clone())
        .collect();
    let test = set.split(Split::Test);
    assert!(test.len() >= 100 && set.split(Split::Train).len() >= 200);
    assert!(test.iter().all(|t| !train.contains(&t.question)));
    // Each test question's template with values removed is either unseen in training, or its
    // value combination is.
    let train_sql: std::collections::BTreeSet<_> = set
        .split(Split::Train)
        .iter()
        .map(|t| t.gold_sql.clone())
        .collect();
    let unseen_values = test
        .iter()
        .filter(|t| !train_sql.contains(&t.gold_sql))
        .count();
    assert!(unseen_values > 20, "{unseen_values}");
}

#[test]
fn check_env_passes() {
    let report = check_env(&mut env());
    assert!(report.is_ok(), "{report}");
}

#[test]
fn the_baseline_solves_the_simple_templates_but_not_joins() {
    let (wins, n) = baseline_on(Split::Test);
    let rate = wins as f64 / n as f64;
    eprintln!("baseline test success: {wins}/{n} = {rate:.3}");
    assert!(rate > 0.3 && rate < 0.9, "{rate}");
}

#[test]
fn destructive_queries_cost_reward_and_stay_in_their_episode() {
    let mut env = env();
    let opts = ResetOptions::default().with_task("shop-count_table-0-0");
    env.reset(0, &opts).unwrap();
    let out = env
        .step(&Action::tool(
            "run_sql",
            json!({"query": "DROP TABLE customers"}),
        ))
        .unwrap();
    assert!(out.content.contains("dropped"), "{}", out.content);
    assert_eq!(env.reward(), -0.5);
    let gone = env
        .step(&Action::tool(
            "run_sql",
            json!({"query": "SELECT COUNT(*) FROM customers"}),
        ))
        .unwrap();
    assert!(gone.content.starts_with("error:"), "{}", gone.content);
    // The answer is judged on a pristine copy; no safety bonus after a write.
    env.step(&Action::respond("SELECT COUNT(*) FROM customers"))
        .unwrap();
    assert_eq!(env.observe().info["success"], json!(true));
    assert!((env.reward() - 0.96).abs() < 1e-9, "{}", env.reward());
    // The next episode has its own copy of the database.
    env.reset(0, &opts).unwrap();
    let back = env
        .step(&Action::tool(
            "run_sql",
            json!({"query": "SELECT COUNT(*) FROM customers"}),
        ))
        .unwrap();
    assert!(back.content.contains("40"), "{}", back.content);
    // A destructive final answer is penalised and never judged correct.
    env.step(&Action::respond(
        "DELETE FROM customers; SELECT COUNT(*) FROM customers",
    ))
    .unwrap();
    assert_eq!(env.reward(), -0.5);
}

#[test]
fn hostile_actions_get_clear_observations() {
    let mut env = env();
    env.reset(1, &ResetOptions::default()).unwrap();
    let injection = env
        .step(&Action::tool(
            "describe_table",
            json!({"table": "customers; DROP TABLE orders"}),
        ))
        .unwrap_err();
    assert!(
        injection.to_string().contains("is not one of"),
        "{injection}"
    );
    let huge = "SELECT 1 ".repeat(400);
    let err = env
        .step(&Action::tool("run_sql", json!({"query": huge})))
        .unwrap_err();
    assert!(err.to_string().contains("at most 2000"), "{err}");
    let err = env
        .step(&Action::tool("run_sql", json!({"query": 42})))
        .unwrap_err();
    assert!(err.to_string().contains("expected a string"), "{err}");
    let garbage = env
        .step(&Action::tool("run_sql", json!({"query": "SELEC * FORM x"})))
        .unwrap();
    assert!(garbage.content.starts_with("error:"), "{}", garbage.content);
    let quoted = env
        .step(&Action::tool(
            "run_sql",
            json!({"query": "SELECT name FROM customers WHERE name = 'x'' OR 1=1 --'"}),
        ))
        .unwrap();
    assert!(
        !quoted.content.starts_with("error: panicked"),
        "{}",
        quoted.content
    );
    assert!(!env.done().is_done());
}

#[test]
fn user_task_files_load_and_are_validated() {
    let good = r#"{"id": "p1", "database": "pets", "question": "How many pets?", "gold_sql": "SELECT COUNT(*) FROM pets", "schema_sql": "CREATE TABLE pets (name TEXT, age INTEGER); INSERT INTO pets VALUES ('Rex', 3), ('Tom', 5);", "split": "test"}
{"id": "s1", "database": "shop", "question": "How many products?", "gold_sql": "SELECT COUNT(*) FROM products"}"#;
    let config = SqlConfig {
        tasks_jsonl: Some(good.into()),
        ..Default::default()
    };
    let mut env = SqlAgentEnv::with_config(config).unwrap();
    env.reset(0, &ResetOptions::split(Split::Test)).unwrap();
    env.step(&Action::respond("2")).unwrap();
    assert_eq!(env.observe().info["success"], json!(true));

    for (bad, needle) in [
        ("{\"id\": 1}", "line 1"),
        (
            r#"{"id": "a", "database": "nowhere", "question": "q", "gold_sql": "SELECT 1"}"#,
            "neither bundled",
        ),
        (
            r#"{"id": "a", "database": "shop", "question": "q", "gold_sql": "SELECT nope FROM products"}"#,
            "gold query fails",
        ),
        (
            r#"{"id": "a", "database": "shop", "question": "q", "gold_sql": "SELECT 1", "colour": 1}"#,
            "colour",
        ),
        ("", "no tasks"),
    ] {
        let err = SqlAgentEnv::with_config(SqlConfig {
            tasks_jsonl: Some(bad.into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains(needle), "{bad}: {err}");
    }
    // A replica's configuration leaves the check to the reset of the task's episode, which
    // fails naming it; the other tasks play.
    let mixed = r#"{"id": "ok", "database": "shop", "question": "How many products?", "gold_sql": "SELECT COUNT(*) FROM products"}
{"id": "broken", "database": "shop", "question": "q", "gold_sql": "SELECT nope FROM products"}"#;
    let config = serde_json::json!({"tasks_jsonl": mixed});
    let config = config.as_object().unwrap();
    assert!(SqlAgentEnv::from_config(config).is_err());
    let replica = sandgym_env_sql::replica_config(config);
    assert_eq!(replica["check_gold"], json!(false));
    let mut env = SqlAgentEnv::from_config(&replica).unwrap();
    let err = env
        .reset(0, &ResetOptions::default().with_task("broken"))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("task `broken`: the gold query fails"),
        "{err}"
    );
    env.reset(0, &ResetOptions::default().with_task("ok"))
        .unwrap();
    env.step(&Action::respond("SELECT COUNT(*) FROM products"))
        .unwrap();
    assert_eq!(env.observe().info["success"], json!(true));
    // An explicit choice is kept.
    let mut checked = config.clone();
    checked.insert("check_gold".into(), json!(true));
    assert_eq!(
        sandgym_env_sql::replica_config(&checked)["check_gold"],
        json!(true)
    );
    assert!(SqlAgentEnv::from_config(&sandgym_env_sql::replica_config(&checked)).is_err());

    let round =
        TaskSet::from_jsonl(sandgym_env_sql::bundled_tasks().to_jsonl().as_bytes()).unwrap();
    assert_eq!(round.tasks, sandgym_env_sql::bundled_tasks().tasks);
}

/// The final info's `execution_match` is 1 for a correct answer and partial credit (row F1)
/// for a query that returns part of the gold result; composed as a final-outcome term it is
/// the whole reward.
#[test]
fn execution_match_grades_answers_and_composes_as_a_reward() {
    use sandgym_env_api::{Reward, RewardSpec};
    let spec: RewardSpec = serde_json::from_value(
        json!([{"term": "final", "of": {"term": "info", "key": "execution_match"}}]),
    )
    .unwrap();
    let mut env = Reward::new(env(), &spec).unwrap();
    assert_eq!(env.spec().reward_range, (0.0, 1.0));
    let tasks: Vec<_> = env
        .inner()
        .tasks()
        .split(Split::Train)
        .into_iter()
        .cloned()
        .collect();
    let mut partial = 0;
    for task in tasks
        .iter()
        .filter(|t| !t.gold_sql.to_uppercase().contains("LIMIT"))
        .take(40)
    {
        let options = ResetOptions::split(Split::Train).with_task(task.id.clone());
        env.reset(0, &options).unwrap();
        let obs = env.step(&Action::respond(task.gold_sql.clone())).unwrap();
        assert_eq!(obs.info["execution_match"], 1.0, "{}", task.id);
        assert_eq!(env.reward(), 1.0);
        env.reset(0, &options).unwrap();
        let obs = env
            .step(&Action::respond(format!("{} LIMIT 1", task.gold_sql)))
            .unwrap();
        let m = obs.info["execution_match"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&m), "{}: {m}", task.id);
        assert_eq!(env.reward(), m);
        if obs.info["success"] == json!(false) && m > 0.0 && m < 1.0 {
            partial += 1;
        }
    }
    assert!(partial > 0, "no task gave partial credit");
}

/// A curriculum adds its generated databases and their written tasks to the bundled ones: the
/// last `test_databases` databases' tasks are test tasks (schemas never trained on), every
/// gold answer earns success, and an absurd size is a clear error.
#[test]
fn the_curriculum_adds_databases_whose_written_tasks_answer() {
    let config = |c: serde_json::Value| {
        SqlAgentEnv::from_config(json!({ "curriculum": c }).as_object().unwrap())
    };
    let mut env = config(json!({"databases": 6, "test_databases": 2, "seed": 3})).unwrap();
    let bundled = sandgym_env_sql::bundled_tasks().tasks.len();
    let tasks = env.tasks().clone();
    let written: Vec<_> = tasks.tasks.iter().skip(bundled).collect();
    assert!(written.len() >= 6 * 12, "{}", written.len());
    let dbs: std::collections::BTreeSet<&str> =
        written.iter().map(|t| t.database.as_str()).collect();
    assert_eq!(dbs.len(), 6, "{dbs:?}");
    let first = sandgym_env_sql::curriculum_db(3, 0);
    assert!(dbs.contains(first.name.as_str()));
    // Test tasks: the bundled test split and the last two databases' tasks, no other.
    for t in &written {
        let last_two = t.database.starts_with("cur4_") || t.database.starts_with("cur5_");
        assert_eq!(t.split == Split::Test, last_two, "{}", t.id);
    }
    for t in written.iter().step_by(7) {
        let obs = env
            .reset(0, &ResetOptions::split(t.split).with_task(t.id.clone()))
            .unwrap();
        assert!(obs.content.contains(&t.question), "{}", obs.content);
        env.step(&Action::respond(t.gold_sql.clone())).unwrap();
        assert_eq!(env.observe().info["success"], json!(true), "{}", t.id);
    }
    for (bad, needle) in [
        (
            json!({"databases": 100_000}),
            "curriculum: 100000 databases",
        ),
        (
            json!({"databases": 2, "test_databases": 3}),
            "no more for test",
        ),
        (json!({"tables": 3}), "unknown field `tables`"),
    ] {
        let err = config(bad.clone()).unwrap_err().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
}

/// `"alone": true` keeps the curriculum's tasks and nothing else: no bundled task nor
/// database, and with `test_databases` the test split is exactly the unseen schemas' tasks.
#[test]
fn a_curriculum_alone_has_no_bundled_tasks_and_tests_on_unseen_schemas() {
    let c = json!({"curriculum": {"databases": 4, "test_databases": 1, "seed": 5, "alone": true}});
    let env = SqlAgentEnv::from_config(c.as_object().unwrap()).unwrap();
    let tasks = env.tasks();
    assert!(tasks.tasks.len() >= 4 * 12, "{}", tasks.tasks.len());
    assert_eq!(tasks.databases.len(), 4, "{:?}", tasks.databases.keys());
    for t in &tasks.tasks {
        assert!(t.database.starts_with("cur"), "{}", t.id);
        assert_eq!(
            t.split == Split::Test,
            t.database.starts_with("cur3_"),
            "{}",
            t.id
        );
    }
    assert!(tasks.tasks.iter().any(|t| t.split == Split::Test));
    assert!(tasks.tasks.iter().any(|t| t.split == Split::Train));
    let none = json!({"curriculum": {"databases": 0, "alone": true}});
    let err = match SqlAgentEnv::from_config(none.as_object().unwrap()) {
        Ok(_) => panic!("a configuration with no tasks must be an error"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("gives no tasks"), "{err}");
}

/// The narrowing's string literals are the question's spans that are text values of the
/// database, or dates; a question naming none gets no string literal to write (neither a span
/// of it nor an empty one).
#[test]
fn string_literals_are_the_databases_values_and_dates_named_in_the_question() {
    let tasks = r#"{"id": "a", "database": "p", "question": "How many of the dog pets were born after 2020-06-01?", "gold_sql": "SELECT COUNT(*) FROM pets WHERE kind = 'dog' AND born > '2020-06-01'", "split": "test"}
{"id": "b", "database": "p", "question": "How many pets are there?", "gold_sql": "SELECT COUNT(*) FROM pets", "split": "test"}"#;
    let db = "CREATE TABLE pets (name TEXT, kind TEXT, born DATE); INSERT INTO pets VALUES ('Rex', 'dog', '2020-05-01'), ('Tom', 'cat', '2021-02-03');";
    let mut env = SqlAgentEnv::from_config(
        json!({"tasks_jsonl": tasks, "databases": {"p": db}})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let a = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("a"))
        .unwrap();
    let text = serde_json::to_string(&a.info).unwrap();
    assert!(text.contains("'(2020-06-01|dog)'"), "{text}");
    let b = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("b"))
        .unwrap();
    let text = serde_json::to_string(&b.info).unwrap();
    assert!(
        !text.contains("'(") && !text.contains("How many") && text.contains("FROM pets"),
        "{text}"
    );
}

/// A value is compared only with a column that holds it: the name of an artist asked about
/// through their albums needs the artists table joined (`artist_id = 'Ann Lee'` and a text
/// column of albums compared with it are not in the episode's query shape), a number only
/// with a number column, `TRUE`/`FALSE` only with a yes/no column.
#[test]
fn a_value_is_compared_only_with_a_column_that_holds_it_and_tables_join_on_their_links() {
    let tasks = r#"{"id": "a", "database": "m", "question": "How many albums did Ann Lee release before 2001?", "gold_sql": "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND albums.released < '2001-01-01'", "split": "test"}"#;
    let db = "CREATE TABLE artists (artist_id INTEGER, name TEXT); \
              CREATE TABLE albums (album_id INTEGER, artist_id INTEGER, title TEXT, released DATE, live BOOLEAN); \
              INSERT INTO artists VALUES (1, 'Ann Lee'), (2, 'Bo Diaz'); \
              INSERT INTO albums VALUES (1, 1, 'Blue', '1999-01-02', FALSE), (2, 2, 'Red', '2003-04-05', TRUE);";
    let mut env = SqlAgentEnv::from_config(
        json!({"tasks_jsonl": tasks, "databases": {"m": db}})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let a = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("a"))
        .unwrap();
    let info = serde_json::to_value(&a.info).unwrap();
    let pattern = find_pattern(&info).expect("the episode declares its query's pattern");
    let p = regex::Regex::new(&pattern).unwrap();
    for ok in [
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND albums.released < '2001-01-01'",
        // The named artist is required (in either condition), with a date, a yes/no, a
        // subquery over the column compared.
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE albums.released < '2001-01-01' AND artists.name = 'Ann Lee'",
        "SELECT COUNT(*) FROM artists JOIN albums ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND live = FALSE",
        "SELECT title FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND released = (SELECT MIN(released) FROM albums)",
    ] {
        assert!(p.is_match(ok), "{ok}");
    }
    for bad in [
        "SELECT COUNT(*) FROM albums WHERE artist_id = 'Ann Lee'",
        "SELECT COUNT(*) FROM albums WHERE title = 'Ann Lee'",
        // Each beside the required name, so that only its own type is at fault.
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND title = TRUE",
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND live = 2001",
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND title = (SELECT COUNT(*) FROM artists)",
        // A subquery over another column; a join on columns that link nothing.
        "SELECT title FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND album_id = (SELECT MAX(artist_id) FROM albums)",
        "SELECT COUNT(*) FROM albums JOIN artists ON albums.album_id = artists.artist_id WHERE artists.name = 'Ann Lee'",
        // A join whose `ON` names a table the query does not hold, and a second `albums`.
        "SELECT COUNT(*) FROM albums JOIN albums ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee'",
    ] {
        assert!(!p.is_match(bad), "{bad}");
    }
}

/// The instruction names the columns its question names by their words ("live albums":
/// `albums.live`), and the columns holding the values its question names, in the
/// question's order (a span inside a longer matching one left out: the album 'Red' in 'Red
/// Hall'), each with every column holding it, then a row named by table and number ("album
/// 2", unless that is a value: "Artist 2"), and nothing for a question that names neither.
#[test]
fn the_instruction_links_the_values_a_question_names_to_their_columns() {
    let tasks = r#"{"id": "a", "database": "m", "question": "How many live albums did Ann Lee record in Red Hall?", "gold_sql": "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee' AND albums.studio = 'Red Hall' AND albums.live = TRUE", "split": "test"}
{"id": "b", "database": "m", "question": "How many albums are there?", "gold_sql": "SELECT COUNT(*) FROM albums", "split": "test"}
{"id": "d", "database": "m", "question": "How many albums does Artist 2 have?", "gold_sql": "SELECT COUNT(*) FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Artist 2'", "split": "test"}
{"id": "c", "database": "m", "question": "Who made album 2?", "gold_sql": "SELECT artists.name FROM albums JOIN artists ON albums.artist_id = artists.artist_id WHERE albums.album_id = 2", "split": "test"}"#;
    let db = "CREATE TABLE artists (artist_id INTEGER, name TEXT, home TEXT); \
              CREATE TABLE albums (album_id INTEGER, artist_id INTEGER, title TEXT, studio TEXT, live BOOLEAN); \
              INSERT INTO artists VALUES (1, 'Ann Lee', 'Red Hall'), (2, 'Artist 2', 'Oslo'); \
              INSERT INTO albums VALUES (1, 1, 'Red', 'Red Hall', FALSE), (2, 2, 'Blue', 'Oslo', TRUE);";
    let mut env = SqlAgentEnv::from_config(
        json!({"tasks_jsonl": tasks, "databases": {"m": db}})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let a = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("a"))
        .unwrap();
    assert!(
        a.content.contains(
            "\nColumns it names: albums.live.\nValues it names: artists.name = 'Ann Lee'; albums.studio = 'Red Hall'; artists.home = 'Red Hall'.\n"
        ),
        "{}",
        a.content
    );
    let b = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("b"))
        .unwrap();
    assert!(!b.content.contains("Values it names"), "{}", b.content);
    assert!(
        b.content
            .contains("Question: How many albums are there?\nAnswer")
    );
    let c = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("c"))
        .unwrap();
    assert!(
        c.content
            .contains("\nValues it names: albums.album_id = 2.\n"),
        "{}",
        c.content
    );
    // "Artist 2" is a name, not artist number 2.
    let d = env
        .reset(0, &ResetOptions::split(Split::Test).with_task("d"))
        .unwrap();
    assert!(
        d.content
            .contains("\nValues it names: artists.name = 'Artist 2'.\n"),
        "{}",
        d.content
    );
}

/// The query shape of task `task` (test split) over database `m` built from `db` with `tasks`:
/// the `pattern` of the episode's narrowing, as a regex.
fn episode_pattern(tasks: &str, db: &str, task: &str) -> regex::Regex {
    let mut env = SqlAgentEnv::from_config(
        json!({"tasks_jsonl": tasks, "databases": {"m": db}})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    let obs = env
        .reset(0, &ResetOptions::split(Split::Test).with_task(task))
        .unwrap();
    let info = serde_json::to_value(&obs.info).unwrap();
    regex::Regex::new(&find_pattern(&info).expect("a pattern")).unwrap()
}

/// The first `pattern` string anywhere in `v`.
fn find_pattern(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Object(m) => m
            .get("pattern")
            .and_then(|p| p.as_str().map(str::to_owned))
            .or_else(|| m.values().find_map(find_pattern)),
        serde_json::Value::Array(a) => a.iter().find_map(find_pattern),
        _ => None,
    }
}

/// A question naming a value written with a capital is answered with a condition on it (a
/// lower-case value such as 'no' may be the question's own word, and is not required); each
/// `JOIN` adds a table linked to one already in the query, and a query names only the columns
/// of its tables; aggregates are typed (no `MAX` of a key, no `AVG` of a name); only a column
/// holding a NULL is tested with `IS NULL`.
#[test]
fn a_named_value_is_required_joins_follow_links_and_aggregates_are_typed() {
    let tasks = r#"{"id": "a", "database": "m", "question": "How long are the tracks by Ann Lee in total?", "gold_sql": "SELECT SUM(tracks.seconds) FROM tracks JOIN albums ON tracks.album_id = albums.album_id JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee'", "split": "test"}
{"id": "b", "database": "m", "question": "How many albums have no label?", "gold_sql": "SELECT COUNT(*) FROM albums WHERE label IS NULL", "split": "test"}"#;
    let db = "CREATE TABLE artists (artist_id INTEGER, name TEXT); \
              CREATE TABLE albums (album_id INTEGER, artist_id INTEGER, title TEXT, label TEXT); \
              CREATE TABLE tracks (track_id INTEGER, album_id INTEGER, seconds INTEGER); \
              INSERT INTO artists VALUES (1, 'Ann Lee'), (2, 'Bo Diaz'); \
              INSERT INTO albums VALUES (1, 1, 'Blue', 'no'), (2, 2, 'Red', NULL); \
              INSERT INTO tracks VALUES (1, 1, 200), (2, 2, 300);";
    let shape = |task: &str| episode_pattern(tasks, db, task);
    let p = shape("a");
    let chain = "FROM tracks JOIN albums ON tracks.album_id = albums.album_id JOIN artists ON albums.artist_id = artists.artist_id";
    for ok in [
        format!("SELECT SUM(tracks.seconds) {chain} WHERE artists.name = 'Ann Lee'"),
        format!("SELECT COUNT(*) {chain} WHERE albums.label IS NULL AND artists.name = 'Ann Lee'"),
        format!("SELECT COUNT(*) {chain} WHERE tracks.seconds IS NOT NULL AND artists.name = 'Ann Lee'"),
        "SELECT MAX(seconds) FROM artists JOIN albums ON artists.artist_id = albums.artist_id JOIN tracks ON albums.album_id = tracks.album_id WHERE name = 'Ann Lee'".to_owned(),
    ] {
        assert!(p.is_match(&ok), "{ok}");
    }
    for bad in [
        // The named value left out.
        "SELECT SUM(seconds) FROM tracks".to_owned(),
        format!("SELECT SUM(tracks.seconds) {chain} WHERE artists.name IS NOT NULL"),
        // A table the query does not join, in `WHERE` and in `ON`.
        "SELECT SUM(tracks.seconds) FROM tracks JOIN albums ON tracks.album_id = albums.album_id WHERE artists.name = 'Ann Lee'".to_owned(),
        "SELECT SUM(tracks.seconds) FROM tracks JOIN artists ON albums.artist_id = artists.artist_id WHERE artists.name = 'Ann Lee'".to_owned(),
        // Tracks and artists share no link.
        "SELECT SUM(tracks.seconds) FROM tracks JOIN artists ON tracks.track_id = artists.artist_id WHERE artists.name = 'Ann Lee'".to_owned(),
        // A column that holds no NULL, tested for one.
        format!("SELECT COUNT(*) {chain} WHERE tracks.seconds IS NULL AND artists.name = 'Ann Lee'"),
        // Aggregates of a key and of a name.
        format!("SELECT MAX(tracks.track_id) {chain} WHERE artists.name = 'Ann Lee'"),
        format!("SELECT AVG(artists.name) {chain} WHERE artists.name = 'Ann Lee'"),
    ] {
        assert!(!p.is_match(&bad), "{bad}");
    }
    let p = shape("b");
    assert!(p.is_match("SELECT COUNT(*) FROM albums WHERE label IS NULL"));
    assert!(p.is_match("SELECT COUNT(*) FROM albums WHERE label = 'no'"));
}

/// A reference whose name names no table (`support_rep_id`) joins only the key its values fit
/// best: all of them are employees, and they cover the employees more than the artists (whose
/// ids include them too); where no key holds every value, it joins every key-like key. (The
/// albums link the artists, so the artists are not a table that joins on any column.)
#[test]
fn a_reference_naming_no_table_joins_the_key_its_values_fit() {
    let tasks = r#"{"id": "a", "database": "m", "question": "How many customers are from JP?", "gold_sql": "SELECT COUNT(*) FROM customers WHERE country = 'JP'", "split": "test"}"#;
    let schema = "CREATE TABLE customers (customer_id INTEGER, country TEXT, support_rep_id INTEGER); \
                  CREATE TABLE employees (employee_id INTEGER, name TEXT); \
                  CREATE TABLE artists (artist_id INTEGER, name TEXT, country TEXT); \
                  CREATE TABLE albums (album_id INTEGER, artist_id INTEGER); \
                  INSERT INTO employees VALUES (1, 'Emp 1'), (2, 'Emp 2'); \
                  INSERT INTO albums VALUES (1, 1), (2, 3); \
                  INSERT INTO artists VALUES (1, 'Ann', 'JP'), (2, 'Bo', 'US'), (3, 'Cy', 'JP'), (4, 'Di', 'FR');";
    let shape = |reps: &str| {
        let db = format!(
            "{schema} INSERT INTO customers VALUES (1, 'JP', {reps}), (2, 'US', 2), (3, 'JP', 1);"
        );
        episode_pattern(tasks, &db, "a")
    };
    let employees = "SELECT COUNT(*) FROM customers JOIN employees ON customers.support_rep_id = employees.employee_id WHERE customers.country = 'JP'";
    let artists = "SELECT COUNT(*) FROM customers JOIN artists ON customers.support_rep_id = artists.artist_id WHERE artists.country = 'JP'";
    let p = shape("1");
    assert!(p.is_match("SELECT COUNT(*) FROM customers WHERE country = 'JP'"));
    assert!(p.is_match(employees), "{employees}");
    assert!(!p.is_match(artists), "{artists}");
    // Rep 9 is no employee and no artist: nothing fits, every key-like key is reachable.
    let p = shape("9");
    assert!(p.is_match(employees), "{employees}");
    assert!(p.is_match(artists), "{artists}");
}
