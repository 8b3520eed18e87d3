//! `sandgym new env`: a new env crate that tests, builds and checks as written.

use super::common::{assert_success, sandgym, tmp};
use std::process::Command;

/// `sandgym new env` makes a crate that passes its own tests natively, builds for
/// `wasm32-wasip2` and passes `sandgym check`, and that `sandgym run` plays by its path.
#[test]
fn a_new_env_crate_tests_builds_and_checks_as_it_is() {
    let dir = tmp("new-env");
    std::fs::create_dir_all(&dir).unwrap();
    let made = sandgym(&["new", "env", "my-env", "--dir", dir.to_str().unwrap()]);
    assert_success(&made);
    let again = sandgym(&["new", "env", "my-env", "--dir", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let bad = sandgym(&["new", "env", "My_Env", "--dir", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not an env name"));

    let krate = dir.join("my-env");
    // A target directory of its own, kept between runs (the crate is a workspace of its own).
    let target = std::env::temp_dir().join("sandgym-new-env-target");
    let cargo = |args: &[&str]| {
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(args)
            .current_dir(&krate)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "cargo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tests = cargo(&["test"]);
    assert!(tests.contains("3 passed"), "{tests}");
    cargo(&["build", "--release", "--target", "wasm32-wasip2"]);
    let wasm = target.join("wasm32-wasip2/release/my_env.wasm");
    let wasm = wasm.to_str().unwrap();
    let check = sandgym(&["check", wasm]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{stdout}");
    assert!(stdout.contains("my-env-v0: PASS"), "{stdout}");
    let run = sandgym(&[
        "run",
        "--env",
        wasm,
        "--env-config",
        r#"{"words": ["ab"]}"#,
        "--agent",
        "random",
        "--episodes",
        "3",
        "--json",
    ]);
    assert_success(&run);
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(summary["env"], "my-env-v0", "{summary}");
    assert_eq!(summary["episodes"], 3);
    let bad = sandgym(&["run", "--env", wasm, "--env-config", r#"{"words": []}"#]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("words must not be empty"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
