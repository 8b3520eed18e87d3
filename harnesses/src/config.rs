//! Harness settings.

/// Where the chat API is and how the agent loop behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct HarnessConfig {
    /// Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// Model name sent with each request.
    pub model: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Extra headers sent with every request (e.g. a tracing tag).
    pub headers: Vec<(String, String)>,
    /// Sampling temperature.
    pub temperature: f32,
    /// Most tokens per completion.
    pub max_tokens: u32,
    /// Most model calls of the main loop.
    pub max_turns: usize,
    /// Most model calls of a sub-agent.
    pub sub_agent_turns: usize,
    /// Whether the harness consults its sub-agent.
    pub sub_agent: bool,
    /// History budget in characters; older tool outputs are elided beyond it.
    pub history_chars: usize,
    /// Request timeout in seconds.
    pub timeout_s: u64,
}

impl HarnessConfig {
    /// Defaults for a server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: "sandgym-policy".into(),
            api_key: None,
            headers: Vec::new(),
            temperature: 1.0,
            max_tokens: 128,
            max_turns: 6,
            sub_agent_turns: 2,
            sub_agent: true,
            history_chars: 6_000,
            timeout_s: 120,
        }
    }
}
