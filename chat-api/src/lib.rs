//! The OpenAI chat-completions wire format, as far as tool-using agents need it, with the
//! token-level extension fields of vLLM-style servers (`prompt_token_ids`, `token_ids`).
//!
//! Unknown fields are kept in `extra` maps so a proxy can pass them through untouched.
//!
//! The harnesses (the client side), the policy server and the recording proxy (the server
//! side) all speak these types, so this crate depends on serde alone.
//!
//! ```
//! use sandgym_chat_api::ChatRequest;
//! let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_k": 5}"#;
//! let request: ChatRequest = serde_json::from_str(body).unwrap();
//! assert_eq!(request.messages.len(), 1);
//! assert_eq!(request.extra["top_k"], 5, "unknown fields are kept");
//! ```
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A `POST /v1/chat/completions` body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name (servers with one model accept it empty).
    #[serde(default)]
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Functions the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Newer name of `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Server-sent events instead of one JSON answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Any other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Message content: plain text or a list of typed parts (only text parts carry text here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts, e.g. `[{"type": "text", "text": "…"}]`.
    Parts(Vec<Value>),
}

impl Content {
    /// The text of the content (text parts joined).
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// One chat message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (absent on some assistant messages with tool calls).
    #[serde(default)]
    pub content: Option<Content>,
    /// Calls the assistant made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn with(role: &str, text: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: Some(Content::Text(text.into())),
            ..Self::default()
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::with("system", text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::with("user", text)
    }

    /// A tool result answering `call_id`.
    pub fn tool(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::with("tool", text)
        }
    }

    /// The message's text ("" when it has none).
    pub fn text(&self) -> String {
        self.content.as_ref().map(Content::text).unwrap_or_default()
    }
}

/// A function offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionDef,
}

/// A function's name, description and JSON-Schema parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    /// Name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments object.
    #[serde(default)]
    pub parameters: Value,
}

/// A call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed by the tool message.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and JSON-encoded arguments.
    pub function: FunctionCall,
}

/// The function part of a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name.
    pub name: String,
    /// Arguments as a JSON string.
    pub arguments: String,
}

/// A chat completion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Completion id.
    pub id: String,
    /// Always `chat.completion`.
    pub object: String,
    /// Unix time of creation.
    pub created: u64,
    /// Model that answered.
    pub model: String,
    /// The generated choices.
    pub choices: Vec<Choice>,
    /// Token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Extension: the prompt's token ids as the server tokenised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
    /// Any other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One generated choice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Index of the choice.
    pub index: u32,
    /// The assistant message.
    pub message: Message,
    /// `stop`, `tool_calls` or `length`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Per-token log-probs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Logprobs>,
    /// Extension: the sampled token ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

/// Log-probs of the sampled tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Logprobs {
    /// One entry per sampled token.
    pub content: Vec<TokenLogprob>,
}

/// One sampled token and its log-prob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its log-prob under the distribution it was sampled from.
    pub logprob: f32,
    /// Its UTF-8 bytes.
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
    /// Alternatives (the policy server sends none).
    #[serde(default)]
    pub top_logprobs: Vec<Value>,
}

/// Token counts of a completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Both.
    pub total_tokens: u32,
}
