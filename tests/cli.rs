//! The `sandgym` binary, run as a user runs it.

use std::process::Command;

fn sandgym(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .output()
        .expect("run sandgym")
}

#[test]
fn envs_lists_ids_tools_and_schemas() {
    let out = sandgym(&["envs", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let specs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let guess = specs
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "guess-number-v0")
        .expect("guess-number-v0 is registered");
    assert_eq!(guess["tools"][0]["name"], "guess");
    assert_eq!(guess["tools"][0]["parameters"]["required"][0], "number");

    let out = sandgym(&["envs"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("guess-number-v0") && text.contains("guess(number: integer)"),
        "{text}"
    );
}

#[test]
fn unknown_subcommands_fail_with_usage() {
    let out = sandgym(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn check_passes_for_both_builds_and_fails_on_a_hostile_guest() {
    for mode in ["--native", "--wasm"] {
        let out = sandgym(&["check", "guess-number-v0", mode]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("PASS"), "{text}");
    }
    let path = std::env::temp_dir().join(format!("sandgym-hostile-{}.wasm", std::process::id()));
    std::fs::write(&path, sandgym_guest_artifacts::HOSTILE.wasm).unwrap();
    let out = sandgym(&["check", path.to_str().unwrap(), "--json"]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["env"], "hostile-v0");
    assert_eq!(report["ok"], false);
    let out = sandgym(&["check", "no-such-env-v0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no env registered"));
}

#[test]
fn bench_sandbox_reports_its_figures_as_json() {
    let out = sandgym(&["bench", "sandbox", "--json", "--seconds", "0.05"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "step_native_us",
        "step_wasm_us",
        "step_ratio_wasm_over_native",
        "fresh_episode_us",
        "snapshot_us",
        "restore_us",
        "steps_per_s_2_threads",
    ] {
        assert!(
            figures[key].as_f64().is_some_and(|v| v > 0.0),
            "{key} in {figures}"
        );
    }
}
