//! Helpers shared by the command tests.

use std::process::Command;

/// Fails the test with the process's stderr unless it exited successfully.
#[track_caller]
pub(crate) fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JSON a GET of `url` answers.
pub(crate) fn get(url: &str) -> serde_json::Value {
    let mut resp = ureq::get(url).call().unwrap();
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

pub(crate) fn sandgym(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .output()
        .expect("run sandgym")
}

pub(crate) fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sandgym-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The tiny Llama of the policy's test fixtures (a Hugging Face directory).
pub(crate) fn tiny_llama() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("policy/tests/fixtures/tiny-llama")
        .display()
        .to_string()
}

/// Starts `sandgym ARGS` (a server) and returns it with the first line it prints (its
/// address); it is killed when dropped, so a failing assertion leaves no server behind.
pub(crate) fn spawn(args: &[&str]) -> (KillOnDrop, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (KillOnDrop(child), line.trim().to_owned())
}

/// A child process killed when dropped.
pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
