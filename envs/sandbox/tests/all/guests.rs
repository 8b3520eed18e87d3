//! Every guest in envs/guests has a host test here: `foreach_guest!` names each guest, and a
//! guest without a test function of its name in this module fails to compile.

use sandgym_env_api::{Env, check_env};
use sandgym_guest_artifacts::{Guest, foreach_guest};

macro_rules! assert_guest_tested {
    ($name:ident) => {
        #[allow(unused_imports)]
        use self::$name as _;
    };
}
foreach_guest!(assert_guest_tested);

fn load(guest: Guest) -> sandgym_sandbox::WasmEnv {
    crate::sandbox()
        .load(guest.wasm)
        .unwrap()
        .instantiate(&Default::default())
        .unwrap()
}

#[test]
fn guess_number() {
    let mut env = load(sandgym_guest_artifacts::GUESS_NUMBER);
    assert_eq!(env.spec().id.to_string(), "guess-number-v0");
    let report = check_env(&mut env);
    assert!(report.is_ok(), "{report}");
    assert!(report.checks_run.contains(&"snapshot"), "{report}");
}

/// An env outside the bundled list (no native build, no registration): it keeps the contract
/// in the sandbox, its configuration is checked, and its answers are graded.
#[test]
fn unit_convert() {
    use sandgym_env_api::{Action, ResetOptions, Split};
    let mut env = load(sandgym_guest_artifacts::UNIT_CONVERT);
    assert_eq!(env.spec().id.to_string(), "unit-convert-v0");
    let report = check_env(&mut env);
    assert!(report.is_ok(), "{report}");
    assert!(report.checks_run.contains(&"narrowing"), "{report}");
    let task = env.reset(3, &ResetOptions::split(Split::Test)).unwrap();
    // "Convert V A to B. …": ask the tool for the factor, then answer V × factor.
    let words: Vec<&str> = task.content.split_whitespace().collect();
    let (value, from, to) = (words[1], words[2], words[4].trim_end_matches('.'));
    let reply = env
        .step(&Action::tool(
            "factor",
            serde_json::json!({"from": from, "to": to}),
        ))
        .unwrap();
    let factor: f64 = reply
        .content
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    let answer = value.parse::<f64>().unwrap() * factor;
    env.step(&Action::respond(format!("{answer}"))).unwrap();
    assert_eq!(env.reward(), 1.0, "{} -> {}", task.content, reply.content);
    env.reset(3, &ResetOptions::split(Split::Test)).unwrap();
    env.step(&Action::respond("-1")).unwrap();
    assert_eq!(env.reward(), 0.0);
    let guest = crate::sandbox()
        .load(sandgym_guest_artifacts::UNIT_CONVERT.wasm)
        .unwrap();
    let bad = serde_json::json!({"max_value": 0});
    assert!(guest.instantiate(bad.as_object().unwrap()).is_err());
}

#[test]
fn hostile() {
    let mut env = load(sandgym_guest_artifacts::HOSTILE);
    assert_eq!(env.spec().id.to_string(), "hostile-v0");
    // Without attacks it is a well-behaved env apart from ignoring its seed.
    let options = sandgym_env_api::CheckOptions {
        actions: Some(vec![
            sandgym_env_api::Action::tool("ping", serde_json::json!({})),
            sandgym_env_api::Action::respond("bye"),
        ]),
        ..Default::default()
    };
    let report = sandgym_env_api::check_env_with(&mut env, &options);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn guest_config_reaches_the_constructor() {
    let guest = crate::sandbox()
        .load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)
        .unwrap();
    let config = serde_json::json!({"max": 8});
    let env = guest.instantiate(config.as_object().unwrap()).unwrap();
    assert_eq!(
        env.spec().tools[0].parameters.properties["number"].maximum,
        Some(8.0)
    );
    let bad = serde_json::json!({"colour": "red"});
    let err = guest.instantiate(bad.as_object().unwrap()).unwrap_err();
    assert!(err.to_string().contains("colour"), "{err}");
}

#[test]
fn compiled_guests_are_cached_on_disk() {
    let dir = std::env::temp_dir().join(format!("sandgym-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = sandgym_sandbox::SandboxConfig {
        cache_dir: Some(dir.clone()),
        pooling: false,
        ..Default::default()
    };
    let first = sandgym_sandbox::Sandbox::new(config.clone()).unwrap();
    first
        .load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)
        .unwrap();
    let entries: Vec<_> = std::fs::read_dir(dir.join("wasm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1);
    let path = entries[0].clone();
    let reload = || {
        let sandbox = sandgym_sandbox::Sandbox::new(config.clone()).unwrap();
        let mut env = sandbox
            .load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)
            .unwrap()
            .instantiate(&Default::default())
            .unwrap();
        env.reset(1, &Default::default()).unwrap();
    };
    // A valid entry is used as it is: a new sandbox loads it without rewriting it.
    let written = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    reload();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        written
    );
    // A corrupted entry is recompiled, not trusted.
    std::fs::write(&path, b"garbage").unwrap();
    reload();
    assert!(std::fs::metadata(&path).unwrap().len() > 1000);
    // So is a planted one: native code changed by someone without the cache's key (here one
    // byte of the code, the tag left as it was) is never loaded, and is rewritten.
    let mut planted = std::fs::read(&path).unwrap();
    let middle = planted.len() / 2;
    planted[middle] ^= 0x55;
    std::fs::write(&path, &planted).unwrap();
    reload();
    assert_ne!(std::fs::read(&path).unwrap(), planted);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("wasm")), 0o700);
        assert_eq!(mode(&dir.join("wasm/.key")), 0o600);
        assert_eq!(mode(&path), 0o600);
        // A directory others may write is made private before it is used.
        std::fs::set_permissions(dir.join("wasm"), std::fs::Permissions::from_mode(0o777)).unwrap();
        reload();
        assert_eq!(mode(&dir.join("wasm")), 0o700);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bytes_that_are_not_a_component_are_a_load_error() {
    use sandgym_sandbox::SandboxError;
    // A component header with a broken body: wasmtime's parser says what is wrong.
    let broken = b"\0asm\x0d\x00\x01\x00not really";
    let err = crate::sandbox().load(broken).unwrap_err();
    assert!(matches!(err, SandboxError::Load(_)), "{err}");
    // Not WebAssembly, or a core module: one line saying so and what to build.
    for (bytes, says) in [
        (&b"hello, world"[..], "not a WebAssembly file"),
        (
            &b"\0asm\x01\x00\x00\x00"[..],
            "a core WebAssembly module, not a component",
        ),
        (&b"\0asm"[..], "unknown version"),
    ] {
        let err = crate::sandbox().load(bytes).unwrap_err();
        assert!(matches!(err, SandboxError::NotAComponent { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(says) && text.contains("wasm32-wasip2"),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }
}

/// A real-size user database (a SQLite dump: nine tables, ~7,400 rows, `REAL`, `NUMERIC(10,2)`,
/// `VARCHAR(n)`, `AUTOINCREMENT`, `REFERENCES`, booleans as 0/1) loads and plays in the
/// sandbox under the default limits, every task's gold answer succeeding as it does natively.
#[test]
fn sql_agent_with_a_real_size_sqlite_database() {
    use sandgym_env_api::{Action, ResetOptions};
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql-agent/tests/data");
    let tasks = std::fs::read_to_string(format!("{data}/music_tasks.jsonl")).unwrap();
    let dump = std::fs::read_to_string(format!("{data}/music.sql")).unwrap();
    let config = serde_json::json!({"tasks_jsonl": tasks, "databases": {"music": dump}});
    let sandbox = sandgym_sandbox::Sandbox::new(sandgym_sandbox::SandboxConfig {
        cache_dir: crate::test_config(sandgym_sandbox::CpuLimit::Fuel(1))
            .cache_dir
            .clone(),
        ..Default::default()
    })
    .unwrap();
    let guest = sandbox
        .load(sandgym_guest_artifacts::SQL_AGENT.wasm)
        .unwrap();
    let started = std::time::Instant::now();
    let mut wasm = guest.instantiate(config.as_object().unwrap()).unwrap();
    eprintln!("made in {:?}", started.elapsed());
    let mut native =
        sandgym_env_sql::SqlAgentEnv::from_config(config.as_object().unwrap()).unwrap();
    for task in native.tasks().tasks.clone() {
        let options = ResetOptions::split(task.split).with_task(&task.id);
        let mut rewards = Vec::new();
        for env in [&mut wasm as &mut dyn sandgym_env_api::Env, &mut native] {
            env.reset(0, &options).unwrap();
            let tables = env
                .step(&Action::tool("list_tables", serde_json::json!({})))
                .unwrap();
            assert!(
                tables.content.contains("invoice_items"),
                "{}",
                tables.content
            );
            env.step(&Action::respond(task.gold_sql.clone())).unwrap();
            assert_eq!(env.observe().info["success"], true, "{}", task.id);
            rewards.push(env.reward());
        }
        assert_eq!(rewards[0], rewards[1], "{}", task.id);
    }
}

#[test]
fn sql_agent() {
    use sandgym_env_api::{Action, ResetOptions, Split};
    let mut wasm = load(sandgym_guest_artifacts::SQL_AGENT);
    assert_eq!(wasm.spec().id.to_string(), "sql-agent-v0");
    let report = check_env(&mut wasm);
    assert!(report.is_ok(), "{report}");
    // Same seeds and actions give the same trajectory natively and in the sandbox, including
    // a destructive query and an engine error.
    let mut native = sandgym_env_sql::SqlAgentEnv::new().unwrap();
    assert_eq!(native.spec(), wasm.spec());
    let script = [
        Action::tool("list_tables", serde_json::json!({})),
        Action::tool("describe_table", serde_json::json!({"table": "orders"})),
        Action::tool(
            "run_sql",
            serde_json::json!({"query": "SELECT status, COUNT(*) FROM orders GROUP BY status"}),
        ),
        Action::tool("run_sql", serde_json::json!({"query": "SELEC nonsense"})),
        Action::tool(
            "run_sql",
            serde_json::json!({"query": "DELETE FROM orders"}),
        ),
        Action::respond("SELECT COUNT(*) FROM customers"),
    ];
    for seed in 0..12 {
        let options = ResetOptions::split(if seed % 2 == 0 {
            Split::Train
        } else {
            Split::Test
        });
        let a = native.reset(seed, &options).unwrap();
        let b = wasm.reset(seed, &options).unwrap();
        assert_eq!(a, b);
        for action in &script {
            let x = native.step(action).map_err(|e| e.to_string());
            let y = wasm.step(action).map_err(|e| e.to_string());
            assert_eq!(x, y, "seed {seed}");
            assert_eq!(
                (native.reward(), native.done()),
                (wasm.reward(), wasm.done())
            );
        }
    }
}

#[test]
fn customer_service() {
    use sandgym_env_api::{ResetOptions, Split};
    use sandgym_env_support::{SupportBaseline, SupportEnv};
    let mut wasm = load(sandgym_guest_artifacts::CUSTOMER_SERVICE);
    assert_eq!(wasm.spec().id.to_string(), "customer-service-v0");
    let report = check_env(&mut wasm);
    assert!(report.is_ok(), "{report}");
    // The baseline's episodes are identical natively and in the sandbox.
    let mut native = SupportEnv::new();
    for seed in 0..20 {
        let options = ResetOptions::split(Split::Test);
        let (mut a, mut b) = (SupportBaseline::default(), SupportBaseline::default());
        let mut x = native.reset(seed, &options).unwrap();
        let mut y = wasm.reset(seed, &options).unwrap();
        assert_eq!(x, y);
        while !native.done().is_done() {
            let (p, q) = (a.act(&x), b.act(&y));
            assert_eq!(p, q);
            x = native.step(&p).unwrap();
            y = wasm.step(&q).unwrap();
            assert_eq!(x, y, "seed {seed}");
            assert_eq!(
                (native.reward(), native.done()),
                (wasm.reward(), wasm.done())
            );
        }
    }
}
