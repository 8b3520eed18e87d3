//! Tool declarations and action validation.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Action, ActionBody, EnvError, Result, Schema, SchemaType};

/// A tool the agent may call: a name, what it does, and a JSON schema of its parameters.
///
/// ```
/// use sandgym_env_api::{Action, Schema, ToolSpec, validate_action};
/// use serde_json::json;
/// let tools = [ToolSpec::new("describe_table", "Show a table's columns.")
///     .with_parameters(Schema::object().property("table", Schema::string(), true))];
/// assert!(validate_action(&tools, &Action::tool("describe_table", json!({"table": "users"}))).is_ok());
/// let err = validate_action(&tools, &Action::tool("drop_table", json!({}))).unwrap_err();
/// assert_eq!(err.to_string(), "unknown tool `drop_table`; available tools: describe_table");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The name agents call it by: `[a-zA-Z0-9_-]`, at most 64 characters (as chat APIs require).
    pub name: String,
    /// What it does, shown to the model.
    pub description: String,
    /// The schema of the `parameters` object.
    pub parameters: Schema,
}

impl ToolSpec {
    /// A tool that takes no parameters.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: Schema::object(),
        }
    }

    /// Sets the parameter schema (an object schema).
    pub fn with_parameters(mut self, parameters: Schema) -> Self {
        self.parameters = parameters;
        self
    }

    /// Checks a call's parameters against the schema.
    pub fn validate(&self, parameters: &serde_json::Map<String, Value>) -> Result<()> {
        self.parameters
            .validate(&Value::Object(parameters.clone()))
            .map_err(|problems| EnvError::InvalidParameters {
                tool: self.name.clone(),
                problems,
            })
    }

    /// The tool in the OpenAI chat-completions `tools` format.
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters.to_value(),
            }
        })
    }

    /// Problems with the declaration itself (name, schema); empty when it is sound.
    pub fn lint(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let valid_name = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            problems.push(format!(
                "tool name `{}` must be 1-64 characters of [a-zA-Z0-9_-]",
                self.name
            ));
        }
        if self.parameters.ty != Some(SchemaType::Object) {
            problems.push(format!(
                "tool `{}`: parameters must be an object schema",
                self.name
            ));
        }
        problems.extend(
            self.parameters
                .lint()
                .into_iter()
                .map(|p| format!("tool `{}`: {p}", self.name)),
        );
        problems
    }
}

/// Checks an action against the env's tools: the tool must exist and its parameters must match
/// its schema. A final response is always valid here (the env may still reject it).
///
/// Errors are [`EnvError::UnknownTool`] (listing the available tools) or
/// [`EnvError::InvalidParameters`] (listing every violation); both are
/// [`ErrorKind::InvalidAction`](crate::ErrorKind::InvalidAction).
pub fn validate_action(tools: &[ToolSpec], action: &Action) -> Result<()> {
    match &action.body {
        ActionBody::Response(_) => Ok(()),
        ActionBody::ToolCall(call) => {
            let tool = tools
                .iter()
                .find(|t| t.name == call.tool_name)
                .ok_or_else(|| EnvError::UnknownTool {
                    name: call.tool_name.clone(),
                    available: tools.iter().map(|t| t.name.clone()).collect(),
                })?;
            tool.validate(&call.parameters)
        }
    }
}

/// The checks every [`Env::step`](crate::Env::step) starts with, in order: the env has been
/// reset ([`EnvError::NotReset`]), the episode is still running ([`EnvError::EpisodeOver`]),
/// and the action is valid for `tools` ([`validate_action`]). An env that calls it first
/// keeps the parts of the contract that `check_env` tests about bad and late steps.
///
/// ```
/// use sandgym_env_api::{Action, Done, EnvError, begin_step};
/// let err = begin_step(true, Done::Terminated, &[], &Action::respond("hi")).unwrap_err();
/// assert!(matches!(err, EnvError::EpisodeOver { .. }));
/// ```
pub fn begin_step(
    reset: bool,
    done: crate::Done,
    tools: &[ToolSpec],
    action: &Action,
) -> Result<()> {
    if !reset {
        return Err(EnvError::NotReset);
    }
    if done.is_done() {
        return Err(EnvError::EpisodeOver { done });
    }
    validate_action(tools, action)
}
