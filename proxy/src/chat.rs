//! OpenAI chat requests in the policy's own terms: tools become [`ToolSpec`]s (and so the
//! decoding constraint), messages become the chat template's token ids, and a generated
//! action becomes an assistant message with `tool_calls`.

use sandgym_env_api::{Action, ActionBody, Schema, ToolSpec};
use sandgym_harnesses::openai::{FunctionCall, Message, ToolCall, ToolDef};
use sandgym_policy::{Role, Template, Tokenizer, canonical_json};
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

/// The action an assistant message stands for (one per tool call, or one response).
fn assistant_actions(message: &Message) -> Result<Vec<Action>, HttpError> {
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
                        content: Some(sandgym_harnesses::openai::Content::Text(thought)),
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
                        content: Some(sandgym_harnesses::openai::Content::Text(response)),
                        ..Message::default()
                    },
                    "stop",
                ),
            }
        }
        Err(_) => (
            Message {
                role: "assistant".into(),
                content: Some(sandgym_harnesses::openai::Content::Text(text.to_owned())),
                ..Message::default()
            },
            "length",
        ),
    }
}
