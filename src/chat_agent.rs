//! Any OpenAI-compatible chat model as an agent: `sandgym run --agent openai` (a served model:
//! `sandgym serve-policy`, vLLM, a hosted API) and `--agent policy` (a checkpoint, served in
//! the process) play any env with it. The env's tools (as the episode narrows them) are the
//! request's functions; a tool call becomes a tool action, text becomes the final response,
//! and each observation goes back as the tool's result (or a user message).

use sandgym_chat_api::{ChatRequest, FunctionDef, Message, ToolDef};
use sandgym_harnesses::{ChatClient, HarnessConfig};
use serde_json::Value;

use crate::env_api::Agent;
use crate::env_api::{Action, EnvSpec, Narrowing, Observation};

/// The env's tools as chat-completions function definitions.
pub fn tool_defs(spec: &EnvSpec) -> Vec<ToolDef> {
    spec.tools
        .iter()
        .map(|t| ToolDef {
            kind: "function".into(),
            function: FunctionDef {
                name: t.name.clone(),
                description: Some(t.description.clone()),
                parameters: t.parameters.to_value(),
            },
        })
        .collect()
}

/// An agent backed by a chat-completions endpoint (one conversation per episode).
#[derive(Debug)]
pub struct ChatAgent {
    client: ChatClient,
    config: HarnessConfig,
    spec: EnvSpec,
    tools: Vec<ToolDef>,
    messages: Vec<Message>,
    /// The id of the tool call whose result the next observation is.
    pending: Option<String>,
    calls: u64,
    failure: Option<String>,
}

impl ChatAgent {
    /// An agent for envs of `spec` that asks the server in `config` (its base URL, model name,
    /// temperature and token budget).
    pub fn new(config: HarnessConfig, spec: &EnvSpec) -> Self {
        Self {
            client: ChatClient::new(&config),
            config,
            spec: spec.clone(),
            tools: tool_defs(spec),
            messages: Vec::new(),
            pending: None,
            calls: 0,
            failure: None,
        }
    }

    /// Model calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    fn ask(&mut self) -> Result<Action, String> {
        let request = ChatRequest {
            model: self.config.model.clone(),
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            temperature: Some(self.config.temperature),
            max_tokens: Some(self.config.max_tokens),
            ..ChatRequest::default()
        };
        self.calls += 1;
        let response = self.client.complete(&request).map_err(|e| e.to_string())?;
        let message = response
            .choices
            .into_iter()
            .next()
            .ok_or("the server answered with no choice")?
            .message;
        let action = match message.tool_calls.first() {
            Some(call) => {
                // Arguments that are not a JSON object go to the env as they are, which
                // rejects them as invalid parameters the agent then reads.
                let params = serde_json::from_str(&call.function.arguments)
                    .unwrap_or_else(|_| Value::String(call.function.arguments.clone()));
                self.pending = Some(call.id.clone());
                Action::tool(call.function.name.clone(), params)
            }
            None => Action::respond(message.text()),
        };
        self.messages.push(Message {
            tool_calls: message.tool_calls.into_iter().take(1).collect(),
            ..message
        });
        Ok(action)
    }
}

impl Agent for ChatAgent {
    fn act(&mut self, observation: &Observation) -> Action {
        if self.messages.is_empty() {
            // The reset observation: the episode's tools (narrowed if it narrows them).
            if let Ok(Some(narrowing)) = Narrowing::from_info(&observation.info)
                && let Ok(spec) = narrowing.apply(&self.spec)
            {
                self.tools = tool_defs(&spec);
            }
            let about = if self.spec.description.is_empty() {
                "Solve the task. Call the tools you need, then answer.".to_owned()
            } else {
                format!(
                    "{} Call the tools you need, then answer.",
                    self.spec.description
                )
            };
            self.messages.push(Message::system(about));
            self.messages
                .push(Message::user(observation.content.clone()));
        } else if let Some(id) = self.pending.take() {
            self.messages
                .push(Message::tool(id, observation.content.clone()));
        } else {
            self.messages
                .push(Message::user(observation.content.clone()));
        }
        self.ask().unwrap_or_else(|e| {
            self.failure = Some(e);
            Action::respond("")
        })
    }

    fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}
