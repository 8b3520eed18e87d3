//! Per-episode narrowing: an episode may tell constrained decoders that, this time, a tool's
//! parameters or the final answer take fewer values than the spec allows (e.g. a `value`
//! among the numbers in the question, the columns of the episode's own tables). Decoders
//! sample under the narrowed schemas; the env still checks every action against its spec.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::{EnvError, EnvSpec, Observation, RESPONSE_SCHEMA, Result, Schema, SplitMix64};

/// The info key under which a reset observation narrows tools' parameter schemas for its
/// episode: an object mapping a tool name to the schema of its parameters this episode.
pub const TOOL_SCHEMAS: &str = "tool_schemas";

/// An episode's narrowing of its env's spec: the final answer's schema
/// ([`RESPONSE_SCHEMA`]) and tools' parameter schemas ([`TOOL_SCHEMAS`]), as carried in the
/// reset observation's info.
///
/// ```
/// use sandgym_env_api::{EnvId, EnvSpec, Narrowing, Observation, Schema, ToolSpec};
/// let tool = ToolSpec::new("convert", "Convert a value.")
///     .with_parameters(Schema::object().property("value", Schema::number(), true));
/// let spec = EnvSpec::new(EnvId::new("units", 0)?).with_tool(tool);
/// let value = Schema::object().property("value", Schema::number().with_enum([12, 3]), true);
/// let obs = Observation::new("Convert 12 km to m.")
///     .with_narrowing(&Narrowing::default().tool("convert", value.clone()));
/// let narrowed = Narrowing::from_info(&obs.info)?.expect("narrowed").apply(&spec)?;
/// assert_eq!(narrowed.tools[0].parameters, value);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Narrowing {
    /// The final answer's schema this episode, if narrowed.
    pub response: Option<Schema>,
    /// Parameter schemas of tools narrowed this episode, by tool name.
    pub tools: BTreeMap<String, Schema>,
}

impl Narrowing {
    /// Narrows the final answer.
    pub fn response(mut self, schema: Schema) -> Self {
        self.response = Some(schema);
        self
    }

    /// Narrows the parameters of the tool called `name`.
    pub fn tool(mut self, name: impl Into<String>, parameters: Schema) -> Self {
        self.tools.insert(name.into(), parameters);
        self
    }

    /// Whether nothing is narrowed.
    pub fn is_empty(&self) -> bool {
        self.response.is_none() && self.tools.is_empty()
    }

    /// The narrowing a reset observation's info carries, `None` when it carries none; an
    /// error when a value is not a schema.
    pub fn from_info(info: &Map<String, Value>) -> Result<Option<Self>> {
        let invalid = |key: &str, e: serde_json::Error| EnvError::InvalidNarrowing {
            reason: format!("the reset info's `{key}` is not a schema: {e}"),
        };
        let response = info
            .get(RESPONSE_SCHEMA)
            .map(|v| serde_json::from_value(v.clone()).map_err(|e| invalid(RESPONSE_SCHEMA, e)))
            .transpose()?;
        let tools = match info.get(TOOL_SCHEMAS) {
            None => BTreeMap::new(),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| invalid(TOOL_SCHEMAS, e))?,
        };
        let narrowing = Self { response, tools };
        Ok((!narrowing.is_empty()).then_some(narrowing))
    }

    /// The info entries that carry this narrowing.
    pub fn to_info(&self) -> Map<String, Value> {
        let mut info = Map::new();
        if let Some(response) = &self.response {
            info.insert(RESPONSE_SCHEMA.into(), response.to_value());
        }
        if !self.tools.is_empty() {
            let tools = self
                .tools
                .iter()
                .map(|(name, schema)| (name.clone(), schema.to_value()))
                .collect();
            info.insert(TOOL_SCHEMAS.into(), Value::Object(tools));
        }
        info
    }

    /// `spec` as this episode sees it: the narrowed tools' parameters and answer replaced. A
    /// narrowed tool the spec does not have is an error.
    pub fn apply(&self, spec: &EnvSpec) -> Result<EnvSpec> {
        let mut narrowed = spec.clone();
        for (name, schema) in &self.tools {
            let tool = narrowed
                .tools
                .iter_mut()
                .find(|t| &t.name == name)
                .ok_or_else(|| EnvError::InvalidNarrowing {
                    reason: format!("`{name}` is not one of the env's tools"),
                })?;
            tool.parameters = schema.clone();
        }
        if let Some(response) = &self.response {
            narrowed.response = Some(response.clone());
        }
        Ok(narrowed)
    }

    /// Checks that this is a narrowing of `spec`: every narrowed tool exists, and values drawn
    /// from each narrowed schema are valid under the spec's own (`samples` draws each). Returns
    /// what does not hold.
    pub fn check_against(&self, spec: &EnvSpec, samples: usize) -> Vec<String> {
        let mut problems = Vec::new();
        let mut rng = SplitMix64::new(0x4E41_5252);
        for (name, schema) in &self.tools {
            let Some(tool) = spec.tool(name) else {
                problems.push(format!("narrows `{name}`, which is not one of the tools"));
                continue;
            };
            for _ in 0..samples {
                let value = schema.example(&mut rng);
                if let Err(errors) = tool.parameters.validate(&value) {
                    problems.push(format!(
                        "`{name}`: {value} fits the narrowed schema but not the tool's ({})",
                        errors.join("; ")
                    ));
                    break;
                }
            }
        }
        if let (Some(narrow), Some(wide)) = (&self.response, &spec.response) {
            for _ in 0..samples {
                let value = narrow.example(&mut rng);
                if let Err(errors) = wide.validate(&value) {
                    problems.push(format!(
                        "the response {value} fits the narrowed schema but not the spec's ({})",
                        errors.join("; ")
                    ));
                    break;
                }
            }
        }
        problems
    }
}

impl Observation {
    /// Carries an episode's narrowing in the info (on a reset observation).
    pub fn with_narrowing(mut self, narrowing: &Narrowing) -> Self {
        self.info.extend(narrowing.to_info());
        self
    }
}
