//! The deployment files: manifests, shell scripts, the image recipe.

use super::common::{assert_success, spawn};
use super::openenv::openenv_python;
use std::process::Command;

/// The Kubernetes manifests for env hosts are valid against Kubernetes' own schemas.
#[test]
fn deployment_manifests_validate() {
    let py = openenv_python();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let out = Command::new(&py)
        .args(["-m", "kubernetes_validate", "--strict"])
        .args(&files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("passed for resource").count(), 3, "{text}");
}

/// The shell scripts (`scripts/*.sh` and CI's `.ci/run`) pass shellcheck.
#[test]
fn shell_scripts_pass_shellcheck() {
    let py = openenv_python();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut scripts: Vec<_> = std::fs::read_dir(root.join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 2, "{scripts:?}");
    scripts.push(root.join(".ci/run"));
    lint(&py, "shellcheck", &scripts);
}

/// Runs a linter installed beside `py` on `files`; it must find nothing.
fn lint(py: &std::path::Path, tool: &str, files: &[std::path::PathBuf]) {
    let out = Command::new(py.with_file_name(tool))
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{tool}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the deployment files ask of the image, read off the Kubernetes manifests.
const DEPLOYMENT_FACTS: &str = r#"
import json, sys, yaml
docs = {}
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    docs[doc["kind"]] = doc
pod = docs["Deployment"]["spec"]["template"]["spec"]
c = pod["containers"][0]
port = {p["name"]: p["containerPort"] for p in c["ports"]}
svc = docs["Service"]["spec"]["ports"][0]
cache = [m["mountPath"] for m in c["volumeMounts"]]
print(json.dumps({"args": c["args"], "port": port[svc["targetPort"]],
  "non_root": c["securityContext"]["runAsNonRoot"], "probe": c["readinessProbe"]["httpGet"]["path"],
  "cache": cache}))
"#;

/// The image recipe, the manifests and the CLI agree: hadolint passes the Dockerfile; its
/// ENTRYPOINT with its CMD, and with the Deployment's args, start a `serve-env` that answers
/// `/health` (so a renamed flag breaks this test, not a rollout); EXPOSE, the ENTRYPOINT's
/// port and the Service's target port are one port; the user is numeric and not root (what
/// `runAsNonRoot` needs); the writable cache volume is that user's guest cache.
/// `scripts/image-check.sh` builds and runs the image itself where a Docker daemon is.
#[test]
fn image_recipe_and_manifests_agree_with_the_cli() {
    let py = openenv_python();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile_path = root.join("deploy/Dockerfile");
    lint(&py, "hadolint", std::slice::from_ref(&dockerfile_path));

    let dockerfile = std::fs::read_to_string(&dockerfile_path).unwrap();
    // The last unindented instruction of a kind (indented lines continue another one).
    let instruction = |name: &str| -> String {
        let prefix = format!("{name} ");
        let line = dockerfile.lines().rfind(|l| l.starts_with(&prefix));
        line.unwrap_or_else(|| panic!("no {name} in the Dockerfile"))[prefix.len()..].to_owned()
    };
    let exec_form = |name: &str| -> Vec<String> {
        serde_json::from_str(&instruction(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let entrypoint = exec_form("ENTRYPOINT");
    let cmd = exec_form("CMD");
    assert_eq!(entrypoint[..2], ["sandgym", "serve-env"], "{entrypoint:?}");
    let flag = |name: &str| {
        let at = entrypoint.iter().position(|a| a == name).unwrap();
        entrypoint[at + 1].clone()
    };
    assert_eq!(
        flag("--host"),
        "0.0.0.0",
        "a pod must listen beyond loopback"
    );
    let port = flag("--port");
    assert_eq!(instruction("EXPOSE"), port);
    let user = instruction("USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER {user}: runAsNonRoot needs a numeric non-root user"
    );
    assert!(
        dockerfile.contains(&format!("--uid {uid} ")),
        "the image makes no user {uid}"
    );

    let manifests = ["deployment", "service"].map(|m| root.join(format!("deploy/k8s/{m}.yaml")));
    let out = Command::new(&py)
        .args(["-c", DEPLOYMENT_FACTS])
        .args(&manifests)
        .output()
        .unwrap();
    assert_success(&out);
    let k8s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(k8s["port"].to_string(), port, "{k8s}");
    assert_eq!(k8s["non_root"], true, "{k8s}");
    assert_eq!(k8s["probe"], "/health", "{k8s}");
    assert_eq!(
        k8s["cache"],
        serde_json::json!(["/home/sandgym/.cache"]),
        "{k8s}"
    );
    let deployment_args: Vec<String> = serde_json::from_value(k8s["args"].clone()).unwrap();

    // Each command line as the container would run it, on a free loopback port here.
    for args in [cmd, deployment_args] {
        let mut line: Vec<String> = entrypoint[1..].to_vec();
        for (name, here) in [("--host", "127.0.0.1"), ("--port", "0")] {
            let at = line.iter().position(|a| a == name).unwrap();
            line[at + 1] = here.into();
        }
        line.extend(args);
        let line: Vec<&str> = line.iter().map(String::as_str).collect();
        let (_server, url) = spawn(&line);
        assert!(url.starts_with("http://"), "{line:?} printed {url:?}");
        let health = ureq::get(format!("{url}/health"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        assert!(health.contains("healthy"), "{line:?}: {health}");
    }
}
