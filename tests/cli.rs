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
