//! OpenAI chat requests in the policy's own terms: tools become [`ToolSpec`]s (and so the
//! decoding constraint), messages become the chat template's token ids, and a generated
//! action becomes an assistant message with `tool_calls`.

use sandgym_chat_api::{ChatRequest, ChatResponse, Choice, Logprobs, TokenLogprob, Usage};
use sandgym_chat_api::{FunctionCall, Message, ToolCall, ToolDef};
use sandgym_env_api::{Action, ActionBody, Schema, ToolSpec};
use sandgym_policy::{ActionLimits, Role, Template, Tokenizer, ToolCallGrammar, canonical_json};
use serde_json::{Map, Value};

use crate::http::HttpError;

/// The request's tools as tool specs; a tool that is not a function with an object schema is
/// a 400.
pub fn tool_specs(tools: &[ToolDef]) -> Result<Vec<ToolSpec>, HttpError> {
    tools
        .iter()
        .map(|t| {
            if t.kind != "function" {
                return Err(HttpError::bad_request(format!(
                    "tool type {:?} is not supported (only \"function\")",
                    t.kind
                )));
            }
            let parameters = if t.function.parameters.is_null() {
                Schema::object()
            } else {
                serde_json::from_value::<Schema>(t.function.parameters.clone()).map_err(|e| {
                    HttpError::bad_request(format!(
                        "parameters of tool {:?} are not a supported JSON Schema: {e}",
                        t.function.name
                    ))
                })?
            };
            Ok(ToolSpec::new(
                t.function.name.clone(),
                t.function.description.clone().unwrap_or_default(),
            )
            .with_parameters(parameters))
        })
        .collect()
}

/// What a request's `tool_choice` lets the model do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// Call any tool or answer (`"auto"`, the default).
    Auto,
    /// Only answer (`"none"`).
    None,
    /// Call one of the tools (`"required"`).
    Required,
    /// Call this tool (`{"type": "function", "function": {"name": …}}`).
    Function(String),
}

impl ToolChoice {
    /// The request's `tool_choice`; an unknown value, or one naming a tool the request does
    /// not define, is a 400.
    pub fn of(request: &ChatRequest) -> Result<Self, HttpError> {
        let bad = |what: String| HttpError::bad_request(format!("tool_choice: {what}"));
        let choice = match request.extra.get("tool_choice") {
            None | Some(Value::Null) => Self::Auto,
            Some(Value::String(s)) => match s.as_str() {
                "auto" => Self::Auto,
                "none" => Self::None,
                "required" => Self::Required,
                other => {
                    return Err(bad(format!(
                        "{other:?} is not one of \"auto\", \"none\", \"required\""
                    )));
                }
            },
            Some(v @ Value::Object(_)) => {
                let name = v
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .filter(|_| v.get("type").and_then(Value::as_str) == Some("function"))
                    .ok_or_else(|| {
                        bad(
                            "an object must be {\"type\":\"function\",\"function\":{\"name\":…}}"
                                .into(),
                        )
                    })?;
                Self::Function(name.to_owned())
            }
            Some(other) => return Err(bad(format!("{other} is neither a string nor an object"))),
        };
        match &choice {
            Self::Required if request.tools.is_empty() => {
                Err(bad("\"required\" with no tools".into()))
            }
            Self::Function(name) if !request.tools.iter().any(|t| &t.function.name == name) => {
                Err(bad(format!("no tool named {name:?} in tools")))
            }
            _ => Ok(choice),
        }
    }
}

/// The decoding constraint of `request`: its tools under its `tool_choice`, with the key that
/// identifies it (equal keys, equal grammars). A schema the constraint cannot compile, or one
/// whose compilation panics (it runs third-party grammar code), is a 400.
pub fn grammar(
    tokenizer: &Tokenizer,
    request: &ChatRequest,
    limits: ActionLimits,
) -> Result<ToolCallGrammar, HttpError> {
    let specs = tool_specs(&request.tools)?;
    let choice = ToolChoice::of(request)?;
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &choice {
        ToolChoice::Auto => ToolCallGrammar::new(tokenizer, &specs, limits),
        ToolChoice::None => ToolCallGrammar::new(tokenizer, &[], limits),
        ToolChoice::Required => ToolCallGrammar::calling(tokenizer, &specs, limits),
        ToolChoice::Function(name) => {
            let one: Vec<ToolSpec> = specs.iter().filter(|t| &t.name == name).cloned().collect();
            ToolCallGrammar::calling(tokenizer, &one, limits)
        }
    }))
    .map_err(|_| HttpError::bad_request("cannot build the tool-call grammar: it panicked"))?;
    compiled.map_err(|e| HttpError::bad_request(format!("cannot build the tool-call grammar: {e}")))
}

/// The key under which [`grammar`]'s result for `request` can be cached.
pub fn grammar_key(request: &ChatRequest) -> String {
    let tools = serde_json::to_string(&request.tools).expect("tools serialise");
    let choice = request.extra.get("tool_choice").map(Value::to_string);
    format!("{tools}\u{0}{}", choice.unwrap_or_default())
}

/// The actions an assistant message stands for (one per tool call, or one response): what
/// [`render`] writes for it, so the ids a server answers with for `message` are those of
/// these actions.
pub fn assistant_actions(message: &Message) -> Result<Vec<Action>, HttpError> {
    let text = message.text();
    if message.tool_calls.is_empty() {
        return Ok(vec![Action::respond(text)]);
    }
    message
        .tool_calls
        .iter()
        .map(|call| {
            let params: Map<String, Value> = serde_json::from_str(&call.function.arguments)
                .map_err(|e| {
                    HttpError::bad_request(format!(
                        "arguments of tool call {:?} are not a JSON object: {e}",
                        call.id
                    ))
                })?;
            Ok(Action::tool(call.function.name.clone(), Value::Object(params)).with_thought(&text))
        })
        .collect()
}

/// The prompt's token ids: the tool list, then every message in order, then the opening of
/// the assistant's turn.
pub fn render(
    tokenizer: &Tokenizer,
    tools: &[ToolSpec],
    messages: &[Message],
) -> Result<Vec<u32>, HttpError> {
    let t = Template::new(tokenizer);
    let fail = |e: sandgym_policy::PolicyError| HttpError::bad_request(e.to_string());
    let mut out = t
        .system(&format!("Tools: {}", sandgym_policy::tool_list(tools)))
        .map_err(fail)?;
    for m in messages {
        match m.role.as_str() {
            "system" | "developer" => out.extend(t.message(Role::System, &m.text()).map_err(fail)?),
            "user" => out.extend(t.message(Role::User, &m.text()).map_err(fail)?),
            "assistant" => {
                for action in assistant_actions(m)? {
                    out.extend(t.action(&action).map_err(fail)?);
                }
            }
            "tool" => out.extend(t.observation(&m.text()).map_err(fail)?),
            other => {
                return Err(HttpError::bad_request(format!(
                    "message role {other:?} is not supported"
                )));
            }
        }
    }
    let mut ids = out.ids;
    ids.extend(t.generation_prefix());
    Ok(ids)
}

/// The assistant message for generated `text` (the action JSON): a tool call with the thought
/// as content, or the response as content; text that is not a complete action (cut by the
/// token budget) is returned as it is. Also says the finish reason.
pub fn assistant_message(text: &str, call_id: &str) -> (Message, &'static str) {
    match Action::from_json(text) {
        Ok(action) => {
            let thought = action.thought.clone();
            match action.body {
                ActionBody::ToolCall(call) => {
                    let arguments = canonical_json(&Action::tool(
                        call.tool_name.clone(),
                        Value::Object(call.parameters.clone()),
                    ));
                    // canonical_json gives the whole action; keep only the parameters object.
                    let arguments = serde_json::from_str::<Value>(&arguments)
                        .ok()
                        .and_then(|v| v.pointer("/action/parameters").map(Value::to_string))
                        .unwrap_or_else(|| Value::Object(call.parameters).to_string());
                    let message = Message {
                        role: "assistant".into(),
                        content: Some(sandgym_chat_api::Content::Text(thought)),
                        tool_calls: vec![ToolCall {
                            id: call_id.to_owned(),
                            kind: "function".into(),
                            function: FunctionCall {
                                name: call.tool_name,
                                arguments,
                            },
                        }],
                        ..Message::default()
                    };
                    (message, "tool_calls")
                }
                ActionBody::Response(response) => (
                    Message {
                        role: "assistant".into(),
                        content: Some(sandgym_chat_api::Content::Text(response)),
                        ..Message::default()
                    },
                    "stop",
                ),
            }
        }
        Err(_) => (
            Message {
                role: "assistant".into(),
                content: Some(sandgym_chat_api::Content::Text(text.to_owned())),
                ..Message::default()
            },
            "length",
        ),
    }
}

/// A whole answer in the chat-completions format, with what vLLM's `return_token_ids` adds:
/// the prompt's ids (`prompt_token_ids`), the completion's ids (`choices[0].token_ids`) and
/// each completion token's log-prob (`choices[0].logprobs`), tokens decoded with `tokenizer`.
/// `extra` is empty; the caller adds its own fields.
pub fn response(
    tokenizer: &Tokenizer,
    id: String,
    model: String,
    prompt: Vec<u32>,
    (message, finish): (Message, &str),
    ids: &[u32],
    logprobs: &[f32],
) -> ChatResponse {
    let content = ids
        .iter()
        .zip(logprobs)
        .map(|(&t, &logprob)| {
            let token = tokenizer.decode(&[t]).unwrap_or_default();
            TokenLogprob {
                bytes: Some(token.as_bytes().to_vec()),
                token,
                logprob,
                top_logprobs: Vec::new(),
            }
        })
        .collect();
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ChatResponse {
        id,
        object: "chat.completion".into(),
        created,
        model,
        choices: vec![Choice {
            index: 0,
            message,
            finish_reason: Some(finish.into()),
            logprobs: Some(Logprobs { content }),
            token_ids: Some(ids.to_vec()),
        }],
        usage: Some(Usage {
            prompt_tokens: prompt.len() as u32,
            completion_tokens: ids.len() as u32,
            total_tokens: (prompt.len() + ids.len()) as u32,
        }),
        prompt_token_ids: Some(prompt),
        extra: Default::default(),
    }
}
