//! A tiny random policy, a canned upstream, and a tool service for the harnesses.

use sandgym_chat_api::{FunctionDef, ToolDef};
use sandgym_harnesses::{HarnessError, Tools};
use sandgym_policy::{ActionLimits, Cpu, PolicyConfig, PolicyModel, Tokenizer};
use sandgym_proxy::{ServerConfig, http};
use serde_json::json;

/// Short free-text fields, so an untrained model finishes its actions within a few dozen
/// tokens.
pub const LIMITS: ActionLimits = ActionLimits {
    thought_chars: 0,
    response_chars: 24,
};

/// The server settings of the tests.
pub fn server_config(journal: bool) -> ServerConfig {
    ServerConfig {
        journal,
        limits: LIMITS,
        default_max_tokens: 48,
        ..ServerConfig::default()
    }
}

/// A tokenizer and an untrained model small enough for debug-mode tests.
pub fn tiny_policy() -> (PolicyModel<Cpu>, Tokenizer) {
    let corpus = [
        "{\"thought\":\"look it up\",\"action\":{\"tool_name\":\"lookup\",\"parameters\":{\"key\":\"alpha\"}}}",
        "{\"thought\":\"done\",\"response\":\"the answer is 42\"}",
        "Tools: lookup(key: string); list() You answer questions. What is alpha?",
        "alpha beta gamma delta: value 42, value 7, elided older tool output",
    ];
    let tokenizer = Tokenizer::train(corpus.iter().map(|s| s.to_string()).cycle().take(40), 320)
        .expect("tokenizer");
    let config = PolicyConfig::new(tokenizer.vocab_size())
        .with_d_model(32)
        .with_n_layers(1)
        .with_n_heads(2)
        .with_n_kv_heads(1)
        .with_d_ff(64);
    <Cpu as burn::tensor::backend::Backend>::seed(&Default::default(), 3);
    (config.init::<Cpu>(&Default::default()), tokenizer)
}

/// A tool service with `lookup(key)` (answers `answer_chars` characters) and `list()`.
#[derive(Debug)]
pub struct FakeTools {
    pub answer_chars: usize,
    pub answer: Option<String>,
}

impl FakeTools {
    pub fn new(answer_chars: usize) -> Self {
        Self {
            answer_chars,
            answer: None,
        }
    }
}

impl Tools for FakeTools {
    fn definitions(&self) -> Vec<ToolDef> {
        let def = |name: &str, parameters| ToolDef {
            kind: "function".into(),
            function: FunctionDef {
                name: name.into(),
                description: Some(format!("the {name} tool")),
                parameters,
            },
        };
        vec![
            def(
                "lookup",
                json!({"type": "object", "properties": {"key": {"type": "string", "maxLength": 12}}, "required": ["key"]}),
            ),
            def("list", json!({"type": "object", "properties": {}})),
        ]
    }

    fn call(&mut self, name: &str, arguments: &str) -> Result<String, HarnessError> {
        Ok(format!(
            "{name}({arguments}): {}",
            "value 42 ".repeat(self.answer_chars / 9 + 1)
        ))
    }

    fn finish(&mut self, answer: &str) -> Result<(), HarnessError> {
        self.answer = Some(answer.to_owned());
        Ok(())
    }

    fn finished(&self) -> bool {
        self.answer.is_some()
    }
}

/// A canned chat-completions upstream.
pub struct Canned {
    pub url: String,
    _server: http::Server,
}

impl Canned {
    pub fn start() -> Self {
        Self::with_logprobs(json!([
            {"token": "h", "logprob": -0.5}, {"token": "i", "logprob": -0.25}]))
    }

    /// An upstream whose answer carries these `logprobs.content` entries.
    pub fn with_logprobs(content: serde_json::Value) -> Self {
        let body = json!({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hi"},
                "token_ids": [3, 4], "logprobs": {"content": content}}],
            "prompt_token_ids": [1, 2]
        })
        .to_string()
        .into_bytes();
        let server = http::Server::start("127.0.0.1:0", move |_| {
            http::Response::bytes(200, body.clone())
        })
        .expect("bind");
        Self {
            url: format!("http://{}", server.addr()),
            _server: server,
        }
    }
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sandgym-proxy-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// POSTs `body` to `url`; returns the status and the parsed JSON answer.
pub fn post(url: &str, body: &str) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)
        .expect("request sent");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

/// Fails the test, saying what to install, when `python3` cannot be run: the tests that need a
/// second process or the `openai` client never pass by skipping.
pub fn require_python() {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "this test needs python3 (with venv and pip): install it, e.g. \
         `apt-get install python3 python3-venv python3-pip`"
    );
}
