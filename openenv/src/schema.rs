//! The JSON Schemas of an env's actions, observations and state (OpenEnv's `GET /schema`),
//! and its tools as MCP tools, all read from its [`EnvSpec`].

use serde_json::{Value, json};

use sandgym_env_api::EnvSpec;

/// The schema of an action: one Agent Template branch per tool (its parameters under the
/// tool's own schema) and one for the final response (under the env's response schema when it
/// declares one).
pub fn action_schema(spec: &EnvSpec) -> Value {
    let thought = json!({"type": "string", "description": "the agent's reasoning"});
    let mut branches: Vec<Value> = spec
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "title": tool.name,
                "description": tool.description,
                "properties": {
                    "thought": thought,
                    "action": {
                        "type": "object",
                        "properties": {
                            "tool_name": {"const": tool.name},
                            "parameters": tool.parameters.to_value(),
                        },
                        "required": ["tool_name", "parameters"],
                        "additionalProperties": false,
                    },
                },
                "required": ["action"],
                "additionalProperties": false,
            })
        })
        .collect();
    let response = spec
        .response
        .as_ref()
        .map(|s| s.to_value())
        .unwrap_or_else(|| json!({"type": "string"}));
    branches.push(json!({
        "type": "object",
        "title": "response",
        "description": "the final answer, which ends the episode",
        "properties": {"thought": thought, "response": response},
        "required": ["response"],
        "additionalProperties": false,
    }));
    json!({"title": format!("{} action", spec.id), "oneOf": branches})
}

/// The schema of an observation's `observation` object.
pub fn observation_schema(spec: &EnvSpec) -> Value {
    json!({
        "title": format!("{} observation", spec.id),
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "the text shown to the agent"},
            "info": {"type": "object", "description": "side information for the trainer"},
            "step": {"type": "integer", "minimum": 0},
            "episode_id": {"type": ["string", "null"]},
            "ended": {"enum": [null, "terminated", "truncated"]},
            "record": {
                "description": "the step's Agent Template record (null after a reset)",
                "type": ["object", "null"],
                "properties": {
                    "instruction": {"type": "string"},
                    "thought": {"type": "string"},
                    "action": {"type": ["object", "null"]},
                    "observation": {"type": "string"},
                    "response": {"type": ["string", "null"]},
                    "reward": {"type": "number"},
                },
            },
        },
        "required": ["content", "step"],
    })
}

/// The schema of a session's state.
pub fn state_schema(spec: &EnvSpec) -> Value {
    json!({
        "title": format!("{} state", spec.id),
        "type": "object",
        "properties": {
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer", "minimum": 0},
            "env_id": {"type": "string"},
            "seed": {"type": ["integer", "null"], "minimum": 0},
            "reward": {"type": ["number", "null"]},
            "done": {"type": "boolean"},
            "ended": {"enum": [null, "terminated", "truncated"]},
        },
        "required": ["step_count"],
    })
}

/// The env's tools as MCP tools (`tools/list`): name, description and input schema.
pub fn mcp_tools(spec: &EnvSpec) -> Value {
    let tools: Vec<Value> = spec
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": t.parameters.to_value(),
            })
        })
        .collect();
    json!({ "tools": tools })
}
