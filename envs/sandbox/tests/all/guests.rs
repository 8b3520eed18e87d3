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
    let entries: Vec<_> = std::fs::read_dir(dir.join("wasm")).unwrap().collect();
    assert_eq!(entries.len(), 1);
    // A corrupted entry is recompiled, not trusted.
    let path = entries[0].as_ref().unwrap().path();
    std::fs::write(&path, b"garbage").unwrap();
    let second = sandgym_sandbox::Sandbox::new(config).unwrap();
    let mut env = second
        .load(sandgym_guest_artifacts::GUESS_NUMBER.wasm)
        .unwrap()
        .instantiate(&Default::default())
        .unwrap();
    env.reset(1, &Default::default()).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 1000);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bytes_that_are_not_a_component_are_a_load_error() {
    let err = crate::sandbox().load(b"\0asm not really").unwrap_err();
    assert!(
        matches!(err, sandgym_sandbox::SandboxError::Load(_)),
        "{err}"
    );
}
