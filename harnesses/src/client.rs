//! A thin typed client of the chat-completions endpoint.

use std::time::Duration;

use crate::openai::{ChatRequest, ChatResponse};
use crate::{HarnessConfig, HarnessError, Result};

/// A blocking client over one keep-alive connection pool.
#[derive(Debug, Clone)]
pub struct ChatClient {
    agent: ureq::Agent,
    url: String,
    auth: Option<String>,
    headers: Vec<(String, String)>,
}

impl ChatClient {
    /// A client for the server in `config`.
    pub fn new(config: &HarnessConfig) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(config.timeout_s)))
            .build()
            .into();
        Self {
            agent,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            auth: config.api_key.as_ref().map(|k| format!("Bearer {k}")),
            headers: config.headers.clone(),
        }
    }

    /// One chat completion.
    pub fn complete(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let http = |e: ureq::Error| HarnessError::Http {
            url: self.url.clone(),
            reason: e.to_string(),
        };
        let body = serde_json::to_vec(request).map_err(|e| HarnessError::Decode(e.to_string()))?;
        let mut call = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json");
        if let Some(auth) = &self.auth {
            call = call.header("authorization", auth);
        }
        for (k, v) in &self.headers {
            call = call.header(k, v);
        }
        let mut response = call.send(&body[..]).map_err(http)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(http)?;
        if status != 200 {
            return Err(HarnessError::Status {
                status,
                body: text.chars().take(500).collect(),
            });
        }
        serde_json::from_str(&text).map_err(|e| HarnessError::Decode(e.to_string()))
    }
}
