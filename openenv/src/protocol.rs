//! OpenEnv's wire format in sandgym's terms: what a frame or a body may say, and how an
//! observation is written back.
//!
//! Hand-written on `serde_json::Value` rather than derived: OpenEnv's messages are loosely
//! typed (an action is whatever the env accepts), and every way a client can get one wrong
//! must become its own clear error message instead of a generic deserialisation failure.

use serde::Serialize;
use serde_json::{Map, Value, json};

use sandgym_env_api::{
    Action, ActionBody, Done, EnvError, ErrorKind, Observation, ResetOptions, Split, StepRecord,
    ToolCall,
};

/// The error codes of OpenEnv's `WSErrorCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// A frame that is not JSON text.
    InvalidJson,
    /// A message `type` the server does not know.
    UnknownType,
    /// A message or an action of the wrong shape, or one the env rejected.
    ValidationError,
    /// The env failed while running the request.
    ExecutionError,
    /// The server holds its most sessions.
    CapacityReached,
    /// The env could not be made.
    FactoryError,
    /// The session ended (idle too long, or it can no longer go on).
    SessionError,
}

/// A request that failed, as OpenEnv reports it: a code and a message.
#[derive(Clone, Debug, PartialEq)]
pub struct WireError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// What went wrong, for the client's user.
    pub message: String,
    /// The env error's class, when an env error caused it (a sandgym extension of the error
    /// frame, `data.kind`, so that a remote env reports errors as a local one would).
    pub kind: Option<ErrorKind>,
}

impl WireError {
    /// An error with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            kind: None,
        }
    }

    /// A [`ErrorCode::ValidationError`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }

    /// The error an env's failure stands for: a rejected action or bad options are the
    /// client's to fix (`VALIDATION_ERROR`), anything else is the env's (`EXECUTION_ERROR`).
    pub fn from_env(e: &EnvError) -> Self {
        let code = match e {
            EnvError::MalformedAction { .. }
            | EnvError::UnknownTool { .. }
            | EnvError::InvalidParameters { .. }
            | EnvError::ActionRejected { .. }
            | EnvError::InvalidOptions { .. }
            | EnvError::InvalidNarrowing { .. } => ErrorCode::ValidationError,
            _ => ErrorCode::ExecutionError,
        };
        Self {
            kind: Some(e.kind()),
            ..Self::new(code, e.to_string())
        }
    }

    /// The `data` of an error frame.
    pub fn to_data(&self) -> Value {
        let mut data = json!({"message": self.message, "code": self.code});
        if let Some(kind) = self.kind {
            data["kind"] = json!(kind);
        }
        data
    }
}

/// A frame's JSON object and its `type`.
pub fn frame(text: &str) -> Result<(String, Map<String, Value>), WireError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| WireError::new(ErrorCode::InvalidJson, format!("Invalid JSON: {e}")))?;
    let Value::Object(object) = value else {
        return Err(WireError::invalid(format!(
            "a message must be a JSON object, got {}",
            kind(&value)
        )));
    };
    let kind = match object.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(WireError::invalid(format!(
                "`type` must be a string, got {}",
                kind(other)
            )));
        }
        None => return Err(WireError::invalid("a message needs a `type`")),
    };
    Ok((kind, object))
}

/// Checks that a message has only `allowed` keys besides `type`.
pub fn only_keys(object: &Map<String, Value>, allowed: &[&str]) -> Result<(), WireError> {
    match object
        .keys()
        .find(|k| k.as_str() != "type" && !allowed.contains(&k.as_str()))
    {
        Some(key) => Err(WireError::invalid(format!(
            "unexpected key `{key}` in a message (allowed: type{})",
            allowed.iter().map(|k| format!(", {k}")).collect::<String>()
        ))),
        None => Ok(()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What a reset asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResetRequest {
    /// The episode's seed (the server picks one when absent).
    pub seed: Option<u64>,
    /// The client's name for the episode.
    pub episode_id: Option<String>,
    /// The env's reset options (split, task, cycle, env-specific `options`).
    pub options: ResetOptions,
}

/// Keys a reset may carry.
pub const RESET_KEYS: &[&str] = &["seed", "episode_id", "split", "task", "cycle", "options"];

impl ResetRequest {
    /// Reads a reset's `data` (absent or `null`: all defaults). Keys beyond [`RESET_KEYS`] are
    /// refused, so that a misspelt option is not silently ignored.
    pub fn parse(data: Option<&Value>) -> Result<Self, WireError> {
        let object = match data {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(o)) => o,
            Some(other) => {
                return Err(WireError::invalid(format!(
                    "reset data must be an object, got {}",
                    kind(other)
                )));
            }
        };
        if let Some(key) = object.keys().find(|k| !RESET_KEYS.contains(&k.as_str())) {
            return Err(WireError::invalid(format!(
                "unknown reset key `{key}` (allowed: {})",
                RESET_KEYS.join(", ")
            )));
        }
        let mut request = Self::default();
        match object.get("seed") {
            None | Some(Value::Null) => {}
            Some(v) => {
                request.seed = Some(v.as_u64().ok_or_else(|| {
                    WireError::invalid(format!("`seed` must be an integer ≥ 0, got {v}"))
                })?)
            }
        }
        match object.get("episode_id") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.chars().count() <= 255 => {
                request.episode_id = Some(s.clone())
            }
            Some(Value::String(_)) => {
                return Err(WireError::invalid(
                    "`episode_id` is longer than 255 characters",
                ));
            }
            Some(v) => {
                return Err(WireError::invalid(format!(
                    "`episode_id` must be a string, got {}",
                    kind(v)
                )));
            }
        }
        match object.get("split") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                request.options.split = s.parse::<Split>().map_err(|_| {
                    WireError::invalid(format!("`split` must be \"train\" or \"test\", got {s:?}"))
                })?
            }
            Some(v) => {
                return Err(WireError::invalid(format!(
                    "`split` must be a string, got {v}"
                )));
            }
        }
        match object.get("task") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => request.options.task = Some(s.clone()),
            Some(v) => {
                return Err(WireError::invalid(format!(
                    "`task` must be a string, got {v}"
                )));
            }
        }
        match object.get("cycle") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => request.options.cycle = *b,
            Some(v) => {
                return Err(WireError::invalid(format!(
                    "`cycle` must be a boolean, got {v}"
                )));
            }
        }
        match object.get("options") {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => request.options.extra = o.clone(),
            Some(v) => {
                return Err(WireError::invalid(format!(
                    "`options` must be an object, got {}",
                    kind(v)
                )));
            }
        }
        Ok(request)
    }
}

/// What a step's `data` asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum StepRequest {
    /// Act in the env.
    Act(Action),
    /// List the env's tools (OpenEnv's `ListToolsAction`); the episode does not advance.
    ListTools,
}

impl StepRequest {
    /// Reads an action: Agent Template (`{"thought"?, "action": {"tool_name", "parameters"}}`
    /// or `{"thought"?, "response"}`), a bare tool call (`{"thought"?, "tool_name",
    /// "parameters"?}`) or OpenEnv's MCP actions (`{"type": "call_tool", "tool_name",
    /// "arguments"?}`, `{"type": "list_tools"}`). OpenEnv's `metadata` key is allowed and
    /// ignored.
    pub fn parse(data: &Value) -> Result<Self, WireError> {
        let Value::Object(object) = data else {
            return Err(WireError::invalid(format!(
                "an action must be a JSON object, got {}",
                kind(data)
            )));
        };
        let mut object = object.clone();
        object.remove("metadata");
        let invalid = |e: EnvError| WireError::invalid(e.to_string());
        match object.remove("type") {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) if t == "list_tools" => {
                only_keys(&object, &[])?;
                return Ok(Self::ListTools);
            }
            Some(Value::String(t)) if t == "call_tool" => {
                only_keys(&object, &["tool_name", "arguments"])?;
                let name = tool_name(&object)?;
                let arguments = object.remove("arguments").unwrap_or(json!({}));
                return Ok(Self::Act(tool_action(name, arguments)?));
            }
            Some(other) => {
                return Err(WireError::invalid(format!(
                    "unknown action type {other} (known: \"call_tool\", \"list_tools\")"
                )));
            }
        }
        if object.contains_key("tool_name") {
            only_keys(&object, &["thought", "tool_name", "parameters"])?;
            let name = tool_name(&object)?;
            let thought = match object.remove("thought") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s,
                Some(v) => {
                    return Err(WireError::invalid(format!(
                        "`thought` must be a string, got {v}"
                    )));
                }
            };
            let parameters = object.remove("parameters").unwrap_or(json!({}));
            return Ok(Self::Act(
                tool_action(name, parameters)?.with_thought(thought),
            ));
        }
        Action::from_value(Value::Object(object))
            .map(Self::Act)
            .map_err(invalid)
    }
}

/// A tool call from a client's name and parameters; parameters that are not an object (or
/// `null`) are a `VALIDATION_ERROR`, never a panic.
pub fn tool_action(name: String, parameters: Value) -> Result<Action, WireError> {
    let call =
        ToolCall::try_new(name, parameters).map_err(|e| WireError::invalid(e.to_string()))?;
    Ok(Action {
        thought: String::new(),
        body: ActionBody::ToolCall(call),
    })
}

fn tool_name(object: &Map<String, Value>) -> Result<String, WireError> {
    match object.get("tool_name") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(WireError::invalid(format!(
            "`tool_name` must be a string, got {v}"
        ))),
        None => Err(WireError::invalid("a tool call needs a `tool_name`")),
    }
}

/// How an episode ended, on the wire (`null` while it runs).
pub fn ended(done: Done) -> Value {
    match done {
        Done::Running => Value::Null,
        Done::Terminated => json!("terminated"),
        Done::Truncated => json!("truncated"),
    }
}

/// The `data` of an observation frame after a reset: the first observation, no reward.
pub fn reset_data(observation: &Observation, episode_id: Option<&str>) -> Value {
    json!({
        "observation": {
            "content": observation.content,
            "info": observation.info,
            "step": 0,
            "episode_id": episode_id,
            "ended": Value::Null,
            "record": Value::Null,
        },
        "reward": Value::Null,
        "done": false,
    })
}

/// The `data` of an observation frame after a step: the observation, the step's Agent
/// Template record, its reward and whether the episode is over.
pub fn step_data(
    observation: &Observation,
    record: &StepRecord,
    step: u64,
    episode_id: Option<&str>,
) -> Value {
    json!({
        "observation": {
            "content": observation.content,
            "info": observation.info,
            "step": step,
            "episode_id": episode_id,
            "ended": ended(record.done),
            "record": record,
        },
        "reward": record.reward,
        "done": record.done.is_done(),
    })
}

/// JSON-RPC 2.0 error codes.
pub mod rpc {
    /// The text is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC request, read leniently enough to answer any malformed one with an error.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcRequest {
    /// The request's id (`null` for a notification).
    pub id: Value,
    /// The method.
    pub method: String,
    /// The parameters (an empty object when absent).
    pub params: Map<String, Value>,
}

impl RpcRequest {
    /// Reads a JSON-RPC request; the error is the response to send.
    pub fn parse(value: &Value) -> Result<Self, Value> {
        let Value::Object(object) = value else {
            return Err(rpc_error(
                Value::Null,
                rpc::INVALID_REQUEST,
                "a request must be an object",
            ));
        };
        let id = object.get("id").cloned().unwrap_or(Value::Null);
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(rpc_error(
                id,
                rpc::INVALID_REQUEST,
                "`jsonrpc` must be \"2.0\"",
            ));
        }
        let Some(method) = object.get("method").and_then(Value::as_str) else {
            return Err(rpc_error(
                id,
                rpc::INVALID_REQUEST,
                "a request needs a string `method`",
            ));
        };
        let params = match object.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => {
                return Err(rpc_error(
                    id,
                    rpc::INVALID_PARAMS,
                    "`params` must be an object",
                ));
            }
        };
        Ok(Self {
            id,
            method: method.to_owned(),
            params,
        })
    }
}

/// A JSON-RPC success response.
pub fn rpc_result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A JSON-RPC error response.
pub fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_form_parses_to_the_same_tool_call() {
        let forms = [
            json!({"action": {"tool_name": "guess", "parameters": {"n": 3}}}),
            json!({"tool_name": "guess", "parameters": {"n": 3}, "metadata": {}}),
            json!({"type": "call_tool", "tool_name": "guess", "arguments": {"n": 3}}),
        ];
        for form in forms {
            let StepRequest::Act(a) = StepRequest::parse(&form).unwrap() else {
                panic!("{form} is not an action");
            };
            assert_eq!(a, Action::tool("guess", json!({"n": 3})), "{form}");
        }
        assert_eq!(
            StepRequest::parse(&json!({"type": "list_tools"})).unwrap(),
            StepRequest::ListTools
        );
    }

    #[test]
    fn bad_frames_and_bad_fields_are_typed_errors() {
        assert_eq!(frame("{").unwrap_err().code, ErrorCode::InvalidJson);
        assert_eq!(frame("[1]").unwrap_err().code, ErrorCode::ValidationError);
        assert_eq!(
            frame("{\"type\": 3}").unwrap_err().code,
            ErrorCode::ValidationError
        );
        for bad in [
            json!({"seed": -1}),
            json!({"seed": "x"}),
            json!({"split": "dev"}),
            json!({"cycle": 1}),
            json!({"sede": 1}),
            json!({"episode_id": "x".repeat(256)}),
            json!([1]),
        ] {
            let e = ResetRequest::parse(Some(&bad)).unwrap_err();
            assert_eq!(e.code, ErrorCode::ValidationError, "{bad}");
        }
        for bad in [
            json!(3),
            json!({"type": "jump"}),
            json!({"tool_name": 1}),
            json!({"x": 1}),
        ] {
            let e = StepRequest::parse(&bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::ValidationError, "{bad}");
        }
        let r =
            ResetRequest::parse(Some(&json!({"seed": 7, "split": "test", "cycle": true}))).unwrap();
        assert_eq!(
            (r.seed, r.options.split, r.options.cycle),
            (Some(7), Split::Test, true)
        );
    }

    #[test]
    fn json_rpc_requests_are_checked() {
        let ok = RpcRequest::parse(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        assert_eq!(ok.unwrap().method, "tools/list");
        let bad = RpcRequest::parse(&json!({"id": 2, "method": "tools/list"})).unwrap_err();
        assert_eq!(bad["error"]["code"], rpc::INVALID_REQUEST);
        assert_eq!(bad["id"], 2);
    }
}
