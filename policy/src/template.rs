//! The chat template: an Agent Template history as token ids with a loss mask.

use sandgym_env_api::{Action, Schema, SchemaType, ToolSpec, Trajectory};
use serde_json::Value;

use crate::tokenizer::Role;
use crate::{Result, Tokenizer};

/// Token ids and, per token, whether it is trainable (the policy's own action tokens).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Token ids.
    pub ids: Vec<u32>,
    /// `true` where the token was produced by the policy and carries loss.
    pub loss_mask: Vec<bool>,
}

impl Rendered {
    /// Appends another rendering.
    pub fn extend(&mut self, other: Rendered) {
        self.ids.extend(other.ids);
        self.loss_mask.extend(other.loss_mask);
    }

    fn push(&mut self, id: u32, trainable: bool) {
        self.ids.push(id);
        self.loss_mask.push(trainable);
    }

    fn text(&mut self, tokenizer: &Tokenizer, text: &str, trainable: bool) -> Result<()> {
        let ids = tokenizer.encode(&neutralise(text))?;
        self.loss_mask
            .extend(std::iter::repeat_n(trainable, ids.len()));
        self.ids.extend(ids);
        Ok(())
    }
}

/// Untrusted text may not smuggle in role tokens: `<|` becomes `< |`.
fn neutralise(text: &str) -> String {
    text.replace("<|", "< |")
}

/// The conversation format the policy reads and writes, in the tokenizer's
/// [`ChatFormat`](crate::ChatFormat); with sandgym's own tokenizer:
///
/// ```text
/// <|system|>Tools: run_sql(query: string[1..2000]); list_tables()<|end|>
/// <|user|>{instruction}<|end|>
/// <|assistant|>{"thought":"…","action":{"tool_name":"run_sql","parameters":{"query":"…"}}}<|end|>
/// <|tool|>{observation}<|end|>
/// <|assistant|>{"thought":"…","response":"…"}<|end|>
/// ```
///
/// (with a ChatML model each turn is `<|im_start|>role\n…<|im_end|>`, turns separated by a
/// newline). Each segment is tokenised on its own and the ids are concatenated, so the rendering of a
/// history is always a prefix of the rendering of its continuation (token-in/token-out holds
/// by construction). Only the action JSON and its closing `<|end|>` are trainable: the role
/// tokens, the prompt and every observation carry no loss. Actions are written as canonical
/// compact JSON (`Action::to_json`, keys sorted inside `parameters`), the same form the
/// tool-call constraint generates.
#[derive(Clone, Copy, Debug)]
pub struct Template<'a> {
    tokenizer: &'a Tokenizer,
}

impl<'a> Template<'a> {
    /// A template over `tokenizer`.
    pub fn new(tokenizer: &'a Tokenizer) -> Self {
        Self { tokenizer }
    }

    /// One turn: the separator (unless it is the conversation's first), the role's opening,
    /// the text and the end-of-turn token (trainable with the text).
    fn turn(&self, role: Role, text: &str, trainable: bool, first: bool) -> Result<Rendered> {
        let mut out = Rendered::default();
        let format = self.tokenizer.format();
        if !first {
            for &id in format.separator() {
                out.push(id, false);
            }
        }
        for &id in format.open(role) {
            out.push(id, false);
        }
        out.text(self.tokenizer, text, trainable)?;
        out.push(self.tokenizer.end(), trainable);
        Ok(out)
    }

    /// The prompt: tool list and instruction.
    pub fn prompt(&self, tools: &[ToolSpec], instruction: &str) -> Result<Rendered> {
        let mut out = self.system(&format!("Tools: {}", tool_list(tools)))?;
        out.extend(self.turn(Role::User, instruction, false, false)?);
        Ok(out)
    }

    /// The system turn that opens a conversation.
    pub fn system(&self, text: &str) -> Result<Rendered> {
        self.turn(Role::System, text, false, true)
    }

    /// Any message after the first as a non-trainable turn of `role` (e.g. a second system
    /// prompt, or a user message in the middle of a chat).
    pub fn message(&self, role: Role, text: &str) -> Result<Rendered> {
        self.turn(role, text, false, false)
    }

    /// One policy turn (trainable), opening included.
    pub fn action(&self, action: &Action) -> Result<Rendered> {
        self.turn(Role::Assistant, &canonical_json(action), true, false)
    }

    /// What the env answered (not trainable).
    pub fn observation(&self, text: &str) -> Result<Rendered> {
        self.turn(Role::Tool, text, false, false)
    }

    /// The tokens that open the policy's turn after a conversation; generation starts after
    /// them.
    pub fn generation_prefix(&self) -> Vec<u32> {
        let format = self.tokenizer.format();
        let mut ids = format.separator().to_vec();
        ids.extend_from_slice(format.open(Role::Assistant));
        ids
    }

    /// A whole recorded episode.
    pub fn trajectory(&self, tools: &[ToolSpec], trajectory: &Trajectory) -> Result<Rendered> {
        let instruction = trajectory
            .records
            .first()
            .map_or("", |r| r.instruction.as_str());
        let mut out = self.prompt(tools, instruction)?;
        for record in &trajectory.records {
            if let Some(action) = record.to_action() {
                out.extend(self.action(&action)?);
            }
            if record.response.is_none() {
                out.extend(self.observation(&record.observation)?);
            }
        }
        Ok(out)
    }
}

/// The canonical text of an action: compact JSON, `thought` first, object keys inside
/// `parameters` sorted (the order the constraint generates, whatever map type serde_json uses).
pub fn canonical_json(action: &Action) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut action = action.clone();
    if let sandgym_env_api::ActionBody::ToolCall(call) = &mut action.body
        && let Value::Object(params) = sorted(&Value::Object(std::mem::take(&mut call.parameters)))
    {
        call.parameters = params;
    }
    action.to_json()
}

/// Tools rendered tersely: `name(param: type[, …])` with enums and bounds spelled out.
pub fn tool_list(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| {
            let params: Vec<String> = t
                .parameters
                .properties
                .iter()
                .map(|(name, s)| {
                    let optional = if t.parameters.required.contains(name) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {}", terse(s))
                })
                .collect();
            format!("{}({})", t.name, params.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn terse(schema: &Schema) -> String {
    if let Some(values) = &schema.enumeration {
        return values
            .iter()
            .map(|v| v.as_str().map_or(v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("|");
    }
    let ty = match schema.ty {
        Some(SchemaType::String) => "string",
        Some(SchemaType::Integer) => "int",
        Some(SchemaType::Number) => "number",
        Some(SchemaType::Boolean) => "bool",
        Some(SchemaType::Array) => "list",
        Some(SchemaType::Object) => "object",
        Some(SchemaType::Null) | None => "any",
    };
    let bounds = match (schema.minimum, schema.maximum) {
        (Some(lo), Some(hi)) => format!("[{lo}..{hi}]"),
        _ => String::new(),
    };
    format!("{ty}{bounds}")
}
