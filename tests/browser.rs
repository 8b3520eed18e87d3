//! The dashboard in a real browser: a small training run, `sandgym view` on it, and
//! `tests/browser/view.mjs` driving headless Chromium through the page (curves, the failed
//! episodes of the last evaluation, an episode, replay, the baseline, a label), and over a
//! recording proxy's trace store (a rollout, its drift break marked); then
//! `sandgym sft --data labels.jsonl` trains on the label the browser wrote — the loop closed.
//!
//! It needs Chromium and Node.js. Missing ones are installed from Debian's packages when the
//! test runs as root with apt-get (as CI does); otherwise it fails saying what to install.
//! playwright-core comes from the npm registry at the version `tests/browser/package-lock.json`
//! pins, installed under the build's temporary directory. Screenshots are kept in
//! `target/tmp/browser/shots/` as the test's artefacts.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn sandgym(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .output()
        .expect("run sandgym")
}

fn found(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Installs Debian packages when that is possible here; otherwise fails saying how.
fn apt_install(packages: &[&str], why: &str) {
    assert!(
        is_root() && found("apt-get"),
        "{why}: install Debian's {} (apt-get install {}), or set CHROMIUM to a Chromium binary",
        packages.join(" and "),
        packages.join(" ")
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        assert!(
            install(),
            "{why}: apt-get install {} failed",
            packages.join(" ")
        );
    }
}

fn chromium() -> String {
    if let Ok(path) = std::env::var("CHROMIUM") {
        return path;
    }
    let debian = "/usr/bin/chromium";
    if !Path::new(debian).exists() {
        apt_install(&["chromium"], "the browser test needs Chromium");
    }
    debian.into()
}

/// playwright-core installed (once) from the pinned lock file, beside a copy of the script.
fn browser_kit() -> PathBuf {
    if !(found("node") && found("npm")) {
        apt_install(&["nodejs", "npm"], "the browser test needs Node.js and npm");
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    for f in ["package.json", "package-lock.json", "view.mjs"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("run npm");
        assert!(
            status.success(),
            "npm ci of tests/browser failed (the npm registry must be reachable)"
        );
    }
    dir
}

/// Runs `view.mjs ARGS` in the browser kit; it must end with its success line.
fn browser_script(kit: &Path, chromium: &str, args: &[&str]) {
    let out = Command::new("node")
        .arg("view.mjs")
        .args(args)
        .env("CHROMIUM", chromium)
        .current_dir(kit)
        .output()
        .expect("run node");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("browser test passed"),
        "{text}"
    );
}

/// `sandgym view` on `run`, on a free port; the page's URL.
struct View(std::process::Child, String);

impl View {
    fn start(run: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandgym"))
            .args(["view", run.to_str().unwrap(), "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start sandgym view");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://"), "view printed {line:?}");
        Self(child, line.trim().to_owned())
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A trace store with one rewarded rollout of three calls; the third call's prompt breaks from
/// the conversation (the harness cut the tool output).
fn write_traces(db: &Path) {
    use sandgym::proxy::{CallRecord, RewardRecord, TraceWriter};
    use serde_json::json;
    let writer = TraceWriter::open(db).unwrap();
    let sys = json!({"role": "system", "content": "You answer with SQL."});
    let user = json!({"role": "user", "content": "How many orders?"});
    let reply = json!({"role": "assistant", "content": "SELECT COUNT(*) FROM orders"});
    let calls = [
        (json!([sys, user]), vec![1, 2, 3], vec![4, 5]),
        (
            json!([sys, user, reply, {"role": "tool", "content": "42, and much more"}]),
            vec![1, 2, 3, 4, 5, 6],
            vec![7],
        ),
        (
            json!([sys, user, reply, {"role": "tool", "content": "42 (cut)"}]),
            vec![1, 2, 3, 4, 5, 9],
            vec![8],
        ),
    ];
    for (seq, (messages, prompt, completion)) in calls.into_iter().enumerate() {
        writer
            .record(CallRecord {
                rollout: "run-1".into(),
                seq: seq as i64,
                at_us: seq as i64 * 1000,
                path: "/v1/chat/completions".into(),
                status: 200,
                request: json!({"messages": messages}).to_string(),
                response: json!({"choices": [{"message": {"role": "assistant", "content": "SELECT COUNT(*) FROM orders"}}]}).to_string(),
                logprobs: Some(vec![-0.1; completion.len()]),
                prompt_ids: Some(prompt),
                completion_ids: Some(completion),
                upstream_us: 500,
                total_us: 700,
            })
            .unwrap();
    }
    writer
        .reward(RewardRecord {
            rollout: "run-1".into(),
            reward: 1.0,
            info: json!({"success": true}),
        })
        .unwrap();
}

#[test]
fn the_dashboard_works_in_a_real_browser_and_its_labels_train() {
    let chromium = chromium();
    let kit = browser_kit();

    // A small finished run: guess-number in the sandbox, 2 iterations, evaluated after each.
    let run = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser/run");
    let _ = std::fs::remove_dir_all(&run);
    let config = run.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 4, "group_size": 2, "max_turns": 4},
            "eval": {"every": 1, "episodes": 6}}"#,
    )
    .unwrap();
    let train = sandgym(&[
        "train",
        "--env",
        "guess-number-v0",
        "--model",
        "tiny",
        "--iters",
        "2",
        "--config",
        config.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
        "--eval-episodes",
        "5",
    ]);
    assert!(
        train.status.success(),
        "{}",
        String::from_utf8_lossy(&train.stderr)
    );
    for f in [
        "episodes/train-000001.jsonl",
        "episodes/train-000002.jsonl",
        "episodes/eval-000000.jsonl",
        "episodes/eval-000002.jsonl",
        "episodes/closing-000002.jsonl",
    ] {
        assert!(run.join(f).is_file(), "the run kept {f}");
    }

    let view = View::start(&run);
    let shots = kit.join("shots");
    let _ = std::fs::remove_dir_all(&shots);
    browser_script(
        &kit,
        &chromium,
        &[&view.1, run.to_str().unwrap(), shots.to_str().unwrap()],
    );
    drop(view);

    // The recording proxy's traces: a rollout whose harness cut a tool output mid-way.
    let db = kit.join("traces.db");
    let _ = std::fs::remove_file(&db);
    write_traces(&db);
    let traces = View::start(&db);
    browser_script(
        &kit,
        &chromium,
        &["--traces", &traces.1, shots.to_str().unwrap(), "1"],
    );
    drop(traces);
    for shot in [
        "curves.png",
        "episode.png",
        "side-by-side.png",
        "labels.png",
        "traces.png",
    ] {
        assert!(shots.join(shot).is_file(), "screenshot {shot}");
    }

    // The label the browser wrote trains: sft on labels.jsonl from the run's policy.
    let labels = run.join("labels.jsonl");
    let tuned = run.join("from-labels");
    let sft = sandgym(&[
        "sft",
        "--env",
        "guess-number-v0",
        "--init",
        run.to_str().unwrap(),
        "--data",
        labels.to_str().unwrap(),
        "--epochs",
        "1",
        "--out",
        tuned.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&sft.stderr);
    assert!(sft.status.success(), "{stderr}");
    assert!(
        stderr.contains("labelled episodes to learn from: 1 "),
        "{stderr}"
    );
    assert!(tuned.join("config.json").is_file(), "{stderr}");
}
