//! The official `openai` Python client (installed from PyPI into a virtual environment on
//! first use) completes a chat with tools against the policy server, directly and through the
//! recording proxy.

use std::path::PathBuf;
use std::process::Command;

use sandgym_proxy::{PolicyServer, Proxy, ProxyConfig, TraceStore};

use crate::common::{require_python, server_config, temp_dir, tiny_policy};

/// A Python with `openai` installed: `SANDGYM_PYTHON` if set, else a venv in the temp dir.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SANDGYM_PYTHON") {
        return p.into();
    }
    let venv = std::env::temp_dir().join("sandgym-openai-venv");
    let py = venv.join("bin").join("python");
    let ready = |py: &PathBuf| {
        Command::new(py)
            .args(["-c", "import openai"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ready(&py) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 is needed for this test");
        assert!(made.success(), "python3 -m venv failed");
        let pip = Command::new(venv.join("bin").join("pip"))
            .args(["install", "--quiet", "openai"])
            .status()
            .expect("pip runs");
        assert!(
            pip.success(),
            "pip install openai failed (is PyPI reachable?)"
        );
    }
    py
}

const SCRIPT: &str = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="unused")
tools = [{"type": "function", "function": {"name": "lookup", "description": "Look a key up.",
          "parameters": {"type": "object", "properties": {"key": {"type": "string", "maxLength": 12}},
                         "required": ["key"]}}}]
assert [m.id for m in client.models.list().data] == ["sandgym-policy"]
seen = set()
for seed in range(8):
    r = client.chat.completions.create(
        model="sandgym-policy", seed=seed, max_tokens=48, tools=tools,
        messages=[{"role": "system", "content": "You answer questions."},
                  {"role": "user", "content": "What is alpha?"}])
    choice = r.choices[0]
    assert r.usage.completion_tokens == len(choice.model_extra["token_ids"]) > 0
    assert len(choice.logprobs.content) == r.usage.completion_tokens
    if choice.finish_reason == "tool_calls":
        call = choice.message.tool_calls[0]
        assert call.function.name == "lookup"
        assert isinstance(json.loads(call.function.arguments)["key"], str)
        # Continue the conversation with the tool's answer.
        r2 = client.chat.completions.create(
            model="sandgym-policy", max_tokens=48, tools=tools,
            messages=[{"role": "user", "content": "What is alpha?"}, choice.message,
                      {"role": "tool", "tool_call_id": call.id, "content": "alpha = 42"}])
        assert r2.choices[0].finish_reason in ("tool_calls", "stop", "length")
    seen.add(choice.finish_reason)
print(json.dumps(sorted(seen)))
"#;

#[test]
fn openai_python_client_talks_to_the_server_directly_and_through_the_proxy() {
    require_python();
    let py = python();
    let (model, tokenizer) = tiny_policy();
    let server = PolicyServer::start(model, tokenizer, server_config(false)).unwrap();
    let db = temp_dir("openai").join("t.db");
    let proxy = Proxy::start(&ProxyConfig::new(server.url()), &db).unwrap();
    for base in [format!("{}/v1", server.url()), proxy.base_url("py")] {
        let out = Command::new(&py)
            .arg("-c")
            .arg(SCRIPT)
            .arg(&base)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{base}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            seen.contains(&"tool_calls".to_owned()),
            "{base}: no tool call in 8 tries: {seen:?}"
        );
    }
    let recorded = TraceStore::open(&db).unwrap().calls("py").unwrap();
    assert!(recorded.len() >= 8);
    assert!(
        recorded
            .iter()
            .all(|c| c.status == 200 && c.completion_ids.is_some())
    );
}
