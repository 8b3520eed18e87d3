//! One agent turn: a tool call or a final response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{EnvError, Result};

/// A call of one of the env's tools, as written in Agent Template JSON:
/// `{"tool_name": "run_sql", "parameters": {"query": "SELECT 1"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name, one of the env's [`ToolSpec`](crate::ToolSpec)s.
    pub tool_name: String,
    /// The arguments, checked against the tool's parameter schema before the env sees them.
    #[serde(default)]
    pub parameters: Map<String, Value>,
}

impl ToolCall {
    /// A call of `tool_name` with the given parameters (a JSON object).
    ///
    /// # Panics
    /// If `parameters` is not a JSON object; use [`ToolCall::try_new`] for untrusted input.
    pub fn new(tool_name: impl Into<String>, parameters: Value) -> Self {
        Self::try_new(tool_name, parameters).expect("tool parameters must be a JSON object")
    }

    /// Like [`ToolCall::new`], with an error instead of a panic when `parameters` is not an object.
    pub fn try_new(tool_name: impl Into<String>, parameters: Value) -> Result<Self> {
        match parameters {
            Value::Object(parameters) => Ok(Self {
                tool_name: tool_name.into(),
                parameters,
            }),
            Value::Null => Ok(Self {
                tool_name: tool_name.into(),
                parameters: Map::new(),
            }),
            other => Err(EnvError::MalformedAction {
                reason: format!(
                    "`parameters` must be a JSON object, got {}",
                    json_type(&other)
                ),
            }),
        }
    }
}

/// What an [`Action`] does: call a tool, or answer and end the episode.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionBody {
    /// Call a tool; its output becomes the next observation.
    ToolCall(ToolCall),
    /// Give the final answer to the user.
    Response(String),
}

/// One agent turn in Agent Template form.
///
/// On the wire it is `{"thought": "...", "action": {"tool_name": "...", "parameters": {...}}}`
/// for a tool call or `{"thought": "...", "response": "..."}` for a final answer; `thought` may
/// be omitted. Anything else is rejected by [`Action::from_json`] with
/// [`EnvError::MalformedAction`].
///
/// ```
/// use sandgym_env_api::{Action, ActionBody};
/// let a = Action::from_json(r#"{"thought": "look", "action": {"tool_name": "ls", "parameters": {}}}"#)?;
/// assert!(matches!(a.body, ActionBody::ToolCall(ref c) if c.tool_name == "ls"));
/// let b = Action::respond("42").with_thought("done");
/// assert_eq!(b.to_json(), r#"{"thought":"done","response":"42"}"#);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// The agent's reasoning before acting (may be empty).
    pub thought: String,
    /// The tool call or response.
    pub body: ActionBody,
}

impl Action {
    /// A tool call with no thought.
    pub fn tool(tool_name: impl Into<String>, parameters: Value) -> Self {
        Self {
            thought: String::new(),
            body: ActionBody::ToolCall(ToolCall::new(tool_name, parameters)),
        }
    }

    /// A final response with no thought.
    pub fn respond(response: impl Into<String>) -> Self {
        Self {
            thought: String::new(),
            body: ActionBody::Response(response.into()),
        }
    }

    /// Sets the thought.
    pub fn with_thought(mut self, thought: impl Into<String>) -> Self {
        self.thought = thought.into();
        self
    }

    /// The tool call, if this action is one.
    pub fn tool_call(&self) -> Option<&ToolCall> {
        match &self.body {
            ActionBody::ToolCall(call) => Some(call),
            ActionBody::Response(_) => None,
        }
    }

    /// The response, if this action is one.
    pub fn response(&self) -> Option<&str> {
        match &self.body {
            ActionBody::Response(text) => Some(text),
            ActionBody::ToolCall(_) => None,
        }
    }

    /// Parses an action from Agent Template JSON text. Never panics: any input that is not a
    /// valid action gives [`EnvError::MalformedAction`] saying what was wrong.
    pub fn from_json(text: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text).map_err(|e| EnvError::MalformedAction {
            reason: format!("not valid JSON ({e})"),
        })?;
        Self::from_value(value)
    }

    /// Parses an action from a JSON value (see [`Action::from_json`]).
    pub fn from_value(value: Value) -> Result<Self> {
        let Value::Object(mut object) = value else {
            return Err(malformed(format!(
                "expected a JSON object, got {}",
                json_type(&value)
            )));
        };
        if let Some(key) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "thought" | "action" | "response"))
        {
            return Err(malformed(format!(
                "unexpected key `{key}` (allowed: thought, action, response)"
            )));
        }
        let thought = match object.remove("thought") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(malformed(format!(
                    "`thought` must be a string, got {}",
                    json_type(&other)
                )));
            }
        };
        let action = object.remove("action").filter(|v| !v.is_null());
        let response = object.remove("response").filter(|v| !v.is_null());
        let body = match (action, response) {
            (Some(_), Some(_)) => {
                return Err(malformed(
                    "give either `action` or `response`, not both".into(),
                ));
            }
            (None, None) => return Err(malformed("missing `action` or `response`".into())),
            (None, Some(Value::String(text))) => ActionBody::Response(text),
            (None, Some(other)) => {
                return Err(malformed(format!(
                    "`response` must be a string, got {}",
                    json_type(&other)
                )));
            }
            (Some(call), None) => ActionBody::ToolCall(parse_call(call)?),
        };
        Ok(Self { thought, body })
    }

    /// Serialises to compact Agent Template JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an Action always serialises")
    }
}

fn parse_call(value: Value) -> Result<ToolCall> {
    let Value::Object(mut object) = value else {
        return Err(malformed(format!(
            "`action` must be an object with `tool_name` and `parameters`, got {}",
            json_type(&value)
        )));
    };
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "tool_name" | "parameters"))
    {
        return Err(malformed(format!(
            "unexpected key `action.{key}` (allowed: tool_name, parameters)"
        )));
    }
    let tool_name = match object.remove("tool_name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        Some(Value::String(_)) => return Err(malformed("`action.tool_name` is empty".into())),
        Some(other) => {
            return Err(malformed(format!(
                "`action.tool_name` must be a string, got {}",
                json_type(&other)
            )));
        }
        None => return Err(malformed("missing `action.tool_name`".into())),
    };
    ToolCall::try_new(
        tool_name,
        object.remove("parameters").unwrap_or(Value::Null),
    )
}

fn malformed(reason: String) -> EnvError {
    EnvError::MalformedAction { reason }
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("thought", &self.thought)?;
        match &self.body {
            ActionBody::ToolCall(call) => map.serialize_entry("action", call)?,
            ActionBody::Response(text) => map.serialize_entry("response", text)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Action::from_value(value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_both_forms() {
        let a =
            Action::from_json(r#"{"thought":"t","action":{"tool_name":"q","parameters":{"x":1}}}"#)
                .unwrap();
        assert_eq!(a.tool_call().unwrap().parameters["x"], json!(1));
        let b = Action::from_json(r#"{"response":"hi"}"#).unwrap();
        assert_eq!(b.response(), Some("hi"));
        assert_eq!(b.thought, "");
    }

    #[test]
    fn rejects_with_reasons() {
        for (text, needle) in [
            ("[]", "expected a JSON object"),
            ("{", "not valid JSON"),
            ("{}", "missing `action` or `response`"),
            (r#"{"response":"a","action":{"tool_name":"x"}}"#, "not both"),
            (r#"{"action":{"tool_name":3}}"#, "must be a string"),
            (
                r#"{"action":{"tool_name":"x","parameters":[1]}}"#,
                "JSON object",
            ),
            (r#"{"action":{"tool_name":"x","args":{}}}"#, "action.args"),
            (r#"{"response":"a","extra":1}"#, "unexpected key `extra`"),
            (
                r#"{"thought":1,"response":"a"}"#,
                "`thought` must be a string",
            ),
        ] {
            let err = Action::from_json(text).unwrap_err();
            assert!(err.is_invalid_action(), "{text}");
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }
}
