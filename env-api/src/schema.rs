//! The JSON-schema subset that tool parameters are declared in, and its validator.
//!
//! Hand-written rather than a JSON-schema crate, for three reasons: `env-api` must build for
//! `wasm32-wasip2` with serde alone (the full validators pull regex engines, URL and date
//! parsers and, for some, HTTP clients for remote `$ref`s); the subset is kept to keywords
//! the decoder's grammar (llguidance) can enforce, so an env cannot declare parameters that
//! validate but that the policy cannot be constrained to; and guest-declared schemas are
//! hostile input, so every operation on them runs within a fixed budget (`EXAMPLE_BUDGET`,
//! `lint`'s bounds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::SplitMix64;
use crate::action::json_type;

/// Most characters, array items and values in one [`Schema::example`], and the largest
/// `minLength`/`minItems` that [`Schema::lint`] accepts: a tool call longer than this is not
/// something a model writes, and a bound beyond it (a guest may declare 10^15) must not make the
/// host allocate it.
pub const EXAMPLE_BUDGET: u64 = 1 << 16;

/// A JSON value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaType {
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// A JSON string.
    String,
    /// A number without a fractional part.
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// `null`.
    Null,
}

/// A JSON Schema for tool parameters — the subset that LLM tool calling uses in practice.
///
/// Supported keywords: `type`, `description`, `properties`, `required`,
/// `additionalProperties` (a boolean), `items`, `enum`, `minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength` (in characters),
/// `minItems`, `maxItems`, `pattern` and `default`. Any other keyword is rejected when a schema
/// is deserialised, so a spec never silently promises a check that is not made.
///
/// `pattern` is carried to constrained decoders (which enforce it while sampling) but not
/// checked by [`Schema::validate`], to keep this crate free of a regex engine; an env that
/// relies on a pattern must also check its input itself.
///
/// ```
/// use sandgym_env_api::Schema;
/// use serde_json::json;
/// let schema = Schema::object()
///     .property("table", Schema::string().with_enum(["orders", "users"]), true)
///     .property("limit", Schema::integer().with_range(1.0, 100.0), false);
/// assert!(schema.validate(&json!({"table": "orders", "limit": 5})).is_ok());
/// let problems = schema.validate(&json!({"table": "x", "limit": 0})).unwrap_err();
/// assert_eq!(problems.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Schema {
    /// The required JSON type; any type when `None`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<SchemaType>,
    /// Human (and model) readable meaning of the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Object properties by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, Schema>,
    /// Object properties that must be present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// Whether object keys outside `properties` are allowed (JSON Schema's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_properties: Option<bool>,
    /// The schema of every array item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Schema>>,
    /// The allowed values.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<Vec<Value>>,
    /// Inclusive lower bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// Inclusive upper bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// Exclusive lower bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_minimum: Option<f64>,
    /// Exclusive upper bound for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive_maximum: Option<f64>,
    /// Minimum string length in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Maximum string length in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Minimum array length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Maximum array length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// A regular expression strings must match (enforced by constrained decoding; see above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The value assumed when the property is absent (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

impl Schema {
    fn of(ty: SchemaType) -> Self {
        Self {
            ty: Some(ty),
            ..Self::default()
        }
    }

    /// An object with no properties yet and no additional properties allowed.
    pub fn object() -> Self {
        Self {
            additional_properties: Some(false),
            ..Self::of(SchemaType::Object)
        }
    }
    /// Any string.
    pub fn string() -> Self {
        Self::of(SchemaType::String)
    }
    /// Any integer.
    pub fn integer() -> Self {
        Self::of(SchemaType::Integer)
    }
    /// Any number.
    pub fn number() -> Self {
        Self::of(SchemaType::Number)
    }
    /// `true` or `false`.
    pub fn boolean() -> Self {
        Self::of(SchemaType::Boolean)
    }
    /// An array whose items match `items`.
    pub fn array(items: Schema) -> Self {
        Self {
            items: Some(Box::new(items)),
            ..Self::of(SchemaType::Array)
        }
    }

    /// Adds a property to an object schema, required or not.
    pub fn property(mut self, name: impl Into<String>, schema: Schema, required: bool) -> Self {
        let name = name.into();
        if required && !self.required.contains(&name) {
            self.required.push(name.clone());
        }
        self.properties.insert(name, schema);
        self
    }
    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// Restricts the value to one of `values`.
    pub fn with_enum<V: Into<Value>>(mut self, values: impl IntoIterator<Item = V>) -> Self {
        self.enumeration = Some(values.into_iter().map(Into::into).collect());
        self
    }
    /// Sets inclusive numeric bounds.
    pub fn with_range(mut self, minimum: f64, maximum: f64) -> Self {
        self.minimum = Some(minimum);
        self.maximum = Some(maximum);
        self
    }
    /// Sets string length bounds (in characters).
    pub fn with_length(mut self, min: u64, max: u64) -> Self {
        self.min_length = Some(min);
        self.max_length = Some(max);
        self
    }
    /// Sets array length bounds.
    pub fn with_items_range(mut self, min: u64, max: u64) -> Self {
        self.min_items = Some(min);
        self.max_items = Some(max);
        self
    }
    /// Sets the pattern (see the type docs for who enforces it).
    pub fn with_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.pattern = Some(pattern.into());
        self
    }

    /// The schema as a JSON value (for tool lists sent to models and decoders).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a Schema always serialises")
    }

    /// Checks `value` against the schema, returning every violation found (each message names
    /// the offending path, e.g. `parameters.limit: 0 is below the minimum 1`).
    pub fn validate(&self, value: &Value) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        self.check(value, "parameters", &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Checks that the schema itself is consistent: bounds ordered, `required` names declared
    /// properties, enum values of the declared type. Used by `check_env` on every tool.
    pub fn lint(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.lint_at("parameters", &mut problems);
        problems
    }

    fn lint_at(&self, path: &str, out: &mut Vec<String>) {
        for name in &self.required {
            if !self.properties.contains_key(name) && self.additional_properties == Some(false) {
                out.push(format!(
                    "{path}: `{name}` is required but not among the properties"
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (self.minimum, self.maximum)
            && lo > hi
        {
            out.push(format!("{path}: minimum {lo} exceeds maximum {hi}"));
        } else if matches!(self.ty, Some(SchemaType::Integer | SchemaType::Number))
            && self.number_range().is_none()
        {
            out.push(format!(
                "{path}: no {} satisfies the bounds (minimum {:?}, maximum {:?}, \
                 exclusiveMinimum {:?}, exclusiveMaximum {:?}{})",
                if self.ty == Some(SchemaType::Integer) {
                    "integer"
                } else {
                    "number"
                },
                self.minimum,
                self.maximum,
                self.exclusive_minimum,
                self.exclusive_maximum,
                if self.ty == Some(SchemaType::Integer) {
                    ", within ±2^53"
                } else {
                    ""
                },
            ));
        }
        if let (Some(lo), Some(hi)) = (self.min_length, self.max_length)
            && lo > hi
        {
            out.push(format!("{path}: minLength {lo} exceeds maxLength {hi}"));
        }
        if let (Some(lo), Some(hi)) = (self.min_items, self.max_items)
            && lo > hi
        {
            out.push(format!("{path}: minItems {lo} exceeds maxItems {hi}"));
        }
        for (keyword, min) in [("minLength", self.min_length), ("minItems", self.min_items)] {
            if let Some(min) = min.filter(|&m| m > EXAMPLE_BUDGET) {
                out.push(format!(
                    "{path}: {keyword} {min} is more than a tool call can hold ({EXAMPLE_BUDGET})"
                ));
            }
        }
        if let Some(values) = &self.enumeration {
            if values.is_empty() {
                out.push(format!("{path}: enum is empty, no value can match"));
            }
            let bare = Schema {
                enumeration: None,
                ..self.clone()
            };
            for v in values {
                if let Err(p) = bare.validate(v) {
                    out.push(format!(
                        "{path}: enum value {v} does not match its own schema ({})",
                        p.join("; ")
                    ));
                }
            }
        }
        for (name, sub) in &self.properties {
            sub.lint_at(&format!("{path}.{name}"), out);
        }
        if let Some(items) = &self.items {
            items.lint_at(&format!("{path}[]"), out);
        }
    }

    /// A value that satisfies the schema, varied by `rng` (enum members, numbers inside the
    /// bounds, strings of allowed length; every declared property of an object). Used by
    /// `check_env` to script episodes for any env. Patterns are not followed.
    ///
    /// The value holds at most [`EXAMPLE_BUDGET`] characters, array items and values in all,
    /// whatever bounds the schema declares (a spec may come from a hostile guest): past the
    /// budget, strings and arrays come out shorter than their minimum ([`Schema::lint`] reports
    /// such minimums).
    ///
    /// ```
    /// use sandgym_env_api::{Schema, SplitMix64};
    /// let s = Schema::object().property("n", Schema::integer().with_range(3.0, 5.0), true);
    /// let v = s.example(&mut SplitMix64::new(1));
    /// assert!(s.validate(&v).is_ok());
    /// ```
    pub fn example(&self, rng: &mut SplitMix64) -> Value {
        let mut budget = EXAMPLE_BUDGET;
        self.example_within(rng, &mut budget)
    }

    fn example_within(&self, rng: &mut SplitMix64, budget: &mut u64) -> Value {
        *budget = budget.saturating_sub(1);
        if let Some(values) = self.enumeration.as_ref().filter(|v| !v.is_empty()) {
            return rng.choose(values).clone();
        }
        match self.ty {
            None | Some(SchemaType::Null) => Value::Null,
            Some(SchemaType::Boolean) => Value::Bool(rng.below(2) == 1),
            Some(SchemaType::Integer) | Some(SchemaType::Number) => {
                // An empty range (which `lint` reports) falls back to the lower bound.
                let (lo, hi) = self.number_range().unwrap_or_else(|| {
                    let lo = self.minimum.or(self.exclusive_minimum).unwrap_or(0.0);
                    (lo, lo)
                });
                if self.ty == Some(SchemaType::Integer) {
                    let (lo, hi) = (lo as i64, hi as i64);
                    let span = hi.saturating_sub(lo).max(0) as u64;
                    Value::from(lo.saturating_add(rng.below(span.saturating_add(1)) as i64))
                } else {
                    // A convex combination cannot overflow, as `lo + (hi - lo)·u` can.
                    let u = rng.next_f64();
                    let x = (lo * (1.0 - u) + hi * u).clamp(lo, hi);
                    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
                }
            }
            Some(SchemaType::String) => {
                // Without a minLength, one character, unless maxLength allows none.
                let min = self
                    .min_length
                    .unwrap_or_else(|| self.max_length.map_or(1, |hi| hi.min(1)));
                let max = self.max_length.unwrap_or(min.max(8)).max(min);
                let len = (min + rng.below(max.min(min.saturating_add(8)) - min + 1)).min(*budget);
                *budget -= len;
                let text: String = (0..len)
                    .map(|_| char::from(b'a' + rng.below(26) as u8))
                    .collect();
                Value::String(text)
            }
            Some(SchemaType::Array) => {
                let min = self.min_items.unwrap_or(0);
                let max = self.max_items.unwrap_or(min.saturating_add(2)).max(min);
                let len = (min + rng.below(max.min(min.saturating_add(3)) - min + 1)).min(*budget);
                let item = self.items.as_deref().cloned().unwrap_or_default();
                Value::Array(
                    (0..len)
                        .map_while(|_| (*budget > 0).then(|| item.example_within(rng, budget)))
                        .collect(),
                )
            }
            Some(SchemaType::Object) => {
                let mut object: Map<String, Value> = self
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), v.example_within(rng, budget)))
                    .collect();
                // A required name the properties do not declare takes any value.
                for name in &self.required {
                    if !object.contains_key(name) {
                        *budget = budget.saturating_sub(1);
                        object.insert(name.clone(), Value::Null);
                    }
                }
                Value::Object(object)
            }
        }
    }

    /// An object that violates this object schema (a required property missing, or an
    /// undeclared one added), or `None` when the schema accepts every object.
    pub fn counterexample(&self, rng: &mut SplitMix64) -> Option<Value> {
        let Value::Object(mut object) = self.example(rng) else {
            return None;
        };
        if let Some(name) = self.required.first() {
            object.remove(name);
        } else if self.additional_properties == Some(false) {
            object.insert("__sandgym_undeclared__".into(), Value::Bool(true));
        } else {
            return None;
        }
        Some(Value::Object(object))
    }

    /// The closed range `[lo, hi]` of values the number keywords admit: exclusive bounds moved
    /// inside (to the next integer, or the next representable float), integers kept within
    /// ±2^53 (what a JSON number carries exactly), and a missing side 1,000 from the other.
    /// `None` when no value fits.
    fn number_range(&self) -> Option<(f64, f64)> {
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        let integer = self.ty == Some(SchemaType::Integer);
        let lo = [
            self.minimum.map(|m| if integer { m.ceil() } else { m }),
            self.exclusive_minimum.map(|m| {
                if integer {
                    m.floor() + 1.0
                } else {
                    m.next_up()
                }
            }),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max);
        let hi = [
            self.maximum.map(|m| if integer { m.floor() } else { m }),
            self.exclusive_maximum.map(|m| {
                if integer {
                    m.ceil() - 1.0
                } else {
                    m.next_down()
                }
            }),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min);
        let (mut lo, mut hi) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            (Some(lo), None) => (lo, lo + 1000.0),
            (None, Some(hi)) => (hi - 1000.0, hi),
            (None, None) => (-1000.0, 1000.0),
        };
        if integer {
            (lo, hi) = (lo.max(-EXACT), hi.min(EXACT));
        }
        (lo.is_finite() && hi.is_finite() && lo <= hi).then_some((lo, hi))
    }

    fn check(&self, value: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(ty) = self.ty
            && !type_matches(ty, value)
        {
            out.push(format!(
                "{path}: expected {}, got {}",
                type_name(ty),
                json_type(value)
            ));
            return;
        }
        if let Some(values) = &self.enumeration
            && !values.iter().any(|v| json_eq(v, value))
        {
            out.push(format!(
                "{path}: {} is not one of {}",
                short(value),
                values.iter().map(short).collect::<Vec<_>>().join(", ")
            ));
        }
        match value {
            Value::Number(n) => self.check_number(n.as_f64().unwrap_or(f64::NAN), path, out),
            Value::String(s) => {
                let len = s.chars().count() as u64;
                if let Some(min) = self.min_length.filter(|&m| len < m) {
                    out.push(format!("{path}: {len} characters, at least {min} required"));
                }
                if let Some(max) = self.max_length.filter(|&m| len > m) {
                    out.push(format!("{path}: {len} characters, at most {max} allowed"));
                }
            }
            Value::Array(items) => {
                let len = items.len() as u64;
                if let Some(min) = self.min_items.filter(|&m| len < m) {
                    out.push(format!("{path}: {len} items, at least {min} required"));
                }
                if let Some(max) = self.max_items.filter(|&m| len > m) {
                    out.push(format!("{path}: {len} items, at most {max} allowed"));
                }
                if let Some(schema) = &self.items {
                    for (i, item) in items.iter().enumerate() {
                        schema.check(item, &format!("{path}[{i}]"), out);
                    }
                }
            }
            Value::Object(map) => self.check_object(map, path, out),
            Value::Null | Value::Bool(_) => {}
        }
    }

    fn check_number(&self, n: f64, path: &str, out: &mut Vec<String>) {
        if let Some(min) = self.minimum.filter(|&m| n < m) {
            out.push(format!("{path}: {n} is below the minimum {min}"));
        }
        if let Some(max) = self.maximum.filter(|&m| n > m) {
            out.push(format!("{path}: {n} is above the maximum {max}"));
        }
        if let Some(min) = self.exclusive_minimum.filter(|&m| n <= m) {
            out.push(format!("{path}: {n} must be greater than {min}"));
        }
        if let Some(max) = self.exclusive_maximum.filter(|&m| n >= m) {
            out.push(format!("{path}: {n} must be less than {max}"));
        }
    }

    fn check_object(&self, map: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
        for name in &self.required {
            if !map.contains_key(name) {
                out.push(format!("{path}: missing required `{name}`"));
            }
        }
        for (key, item) in map {
            match self.properties.get(key) {
                Some(schema) => schema.check(item, &format!("{path}.{key}"), out),
                None if self.additional_properties == Some(false) => {
                    let known: Vec<&str> = self.properties.keys().map(String::as_str).collect();
                    out.push(format!(
                        "{path}: unexpected `{key}` (allowed: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ));
                }
                None => {}
            }
        }
    }
}

fn type_matches(ty: SchemaType, value: &Value) -> bool {
    match (ty, value) {
        (SchemaType::Object, Value::Object(_))
        | (SchemaType::Array, Value::Array(_))
        | (SchemaType::String, Value::String(_))
        | (SchemaType::Boolean, Value::Bool(_))
        | (SchemaType::Null, Value::Null)
        | (SchemaType::Number, Value::Number(_)) => true,
        (SchemaType::Integer, Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_name(ty: SchemaType) -> &'static str {
    match ty {
        SchemaType::Object => "an object",
        SchemaType::Array => "an array",
        SchemaType::String => "a string",
        SchemaType::Integer => "an integer",
        SchemaType::Number => "a number",
        SchemaType::Boolean => "a boolean",
        SchemaType::Null => "null",
    }
}

/// JSON equality in which `1` and `1.0` are the same number.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Schema {
        serde_json::from_value(v).expect("a schema")
    }

    /// Found by the `schema` fuzz target: exclusive bounds that admit nothing linted clean and
    /// produced examples the schema rejects.
    #[test]
    fn bounds_that_admit_nothing_are_linted() {
        for schema in [
            json!({"type": "number", "exclusiveMinimum": 5.5, "exclusiveMaximum": 0.75}),
            json!({"type": "number", "minimum": 0.5, "exclusiveMaximum": 0.5}),
            json!({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}),
            json!({"type": "integer", "minimum": 1.2, "maximum": 1.8}),
            json!({"type": "integer", "minimum": 1e300}),
            json!({"type": "number", "exclusiveMaximum": -1e308, "minimum": -1e308}),
        ] {
            let lint = parse(schema.clone()).lint();
            assert_eq!(lint.len(), 1, "{schema}: {lint:?}");
            assert!(lint[0].contains("satisfies the bounds"), "{lint:?}");
        }
    }

    /// Every schema that lints clean accepts its own examples, at the edges of the bounds too.
    #[test]
    fn clean_schemas_accept_their_examples() {
        for schema in [
            json!({"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 0.75}),
            json!({"type": "number", "exclusiveMinimum": 1.0, "exclusiveMaximum": 1.0000000000000004}),
            json!({"type": "number", "exclusiveMaximum": -5000}),
            json!({"type": "number", "minimum": -1.7e308, "maximum": 1.7e308}),
            json!({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 3}),
            json!({"type": "integer", "minimum": -1e300, "maximum": 5}),
            json!({"type": "object", "required": ["undeclared"]}),
        ] {
            let parsed = parse(schema.clone());
            assert!(parsed.lint().is_empty(), "{schema}: {:?}", parsed.lint());
            for seed in 0..50 {
                let example = parsed.example(&mut SplitMix64::new(seed));
                assert!(
                    parsed.validate(&example).is_ok(),
                    "{schema} rejects {example}"
                );
            }
        }
    }

    fn nested() -> Schema {
        Schema::object()
            .property("name", Schema::string().with_length(1, 5), true)
            .property(
                "items",
                Schema::array(
                    Schema::object()
                        .property("sku", Schema::string(), true)
                        .property("qty", Schema::integer().with_range(1.0, 9.0), true),
                )
                .with_items_range(1, 3),
                true,
            )
            .property("ratio", Schema::number(), false)
            .property("flag", Schema::boolean(), false)
    }

    #[test]
    fn accepts_valid_nested_values() {
        let v =
            json!({"name": "ab", "items": [{"sku": "a", "qty": 2}], "ratio": 0.5, "flag": true});
        assert_eq!(nested().validate(&v), Ok(()));
        // 3.0 is an integer in JSON Schema.
        let v = json!({"name": "ab", "items": [{"sku": "a", "qty": 3.0}]});
        assert_eq!(nested().validate(&v), Ok(()));
    }

    #[test]
    fn reports_every_violation_with_its_path() {
        let v = json!({"name": "toolong", "items": [{"sku": 1, "qty": 10}, {}], "ratio": "x", "zzz": 1});
        let problems = nested().validate(&v).unwrap_err();
        let expect = [
            "parameters.name: 7 characters, at most 5 allowed",
            "parameters.items[0].sku: expected a string, got an integer",
            "parameters.items[0].qty: 10 is above the maximum 9",
            "parameters.items[1]: missing required `sku`",
            "parameters.items[1]: missing required `qty`",
            "parameters.ratio: expected a number, got a string",
            "parameters: unexpected `zzz` (allowed: flag, items, name, ratio)",
        ];
        for e in expect {
            assert!(
                problems.iter().any(|p| p == e),
                "missing {e:?} in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), expect.len(), "{problems:#?}");
    }

    #[test]
    fn enum_exclusive_bounds_and_missing() {
        let s = Schema::object()
            .property("t", Schema::string().with_enum(["a", "b"]), true)
            .property(
                "x",
                Schema {
                    exclusive_minimum: Some(0.0),
                    exclusive_maximum: Some(1.0),
                    ..Schema::number()
                },
                false,
            );
        let p = s.validate(&json!({"t": "c", "x": 1})).unwrap_err();
        assert_eq!(
            p,
            vec![
                r#"parameters.t: "c" is not one of "a", "b""#.to_owned(),
                "parameters.x: 1 must be less than 1".to_owned()
            ]
        );
        assert!(s.validate(&json!({})).unwrap_err()[0].contains("missing required `t`"));
    }

    #[test]
    fn schema_json_round_trip_and_unknown_keywords() {
        let s = nested();
        let back: Schema = serde_json::from_value(s.to_value()).unwrap();
        assert_eq!(back, s);
        assert_eq!(s.to_value()["additionalProperties"], json!(false));
        let err = serde_json::from_value::<Schema>(json!({"type": "string", "format": "email"}));
        assert!(err.unwrap_err().to_string().contains("format"));
    }

    #[test]
    fn examples_validate_and_counterexamples_do_not() {
        let mut rng = SplitMix64::new(9);
        for _ in 0..200 {
            let v = nested().example(&mut rng);
            assert_eq!(nested().validate(&v), Ok(()), "{v}");
            let bad = nested().counterexample(&mut rng).unwrap();
            assert!(nested().validate(&bad).is_err(), "{bad}");
        }
        let open = Schema {
            additional_properties: None,
            ..Schema::object()
        };
        assert_eq!(open.counterexample(&mut rng), None);
    }

    #[test]
    fn a_max_length_of_zero_gives_empty_strings() {
        // Found by the `schema` fuzz target: without a minLength the example took one
        // character, past a maxLength of 0.
        let s = Schema::array(Schema {
            max_length: Some(0),
            ..Schema::string()
        })
        .with_items_range(1, 3);
        assert!(s.lint().is_empty());
        for seed in 0..20 {
            let v = s.example(&mut SplitMix64::new(seed));
            assert_eq!(s.validate(&v), Ok(()), "{v}");
        }
    }

    #[test]
    fn absurd_bounds_give_a_bounded_example_and_a_lint_problem() {
        let mut rng = SplitMix64::new(3);
        let huge = Schema::object()
            .property(
                "s",
                Schema::string().with_length(1_000_000_000_000_000, u64::MAX),
                true,
            )
            .property(
                "a",
                Schema::array(
                    Schema::array(Schema::string()).with_items_range(u64::MAX - 1, u64::MAX),
                )
                .with_items_range(1 << 40, u64::MAX),
                true,
            );
        let v = huge.example(&mut rng);
        let size = serde_json::to_string(&v).unwrap().len() as u64;
        assert!(size < 8 * EXAMPLE_BUDGET, "{size} bytes");
        assert!(v["s"].as_str().unwrap().len() as u64 <= EXAMPLE_BUDGET);
        assert!(huge.counterexample(&mut rng).is_some());
        let problems = huge.lint();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].contains("minItems 1099511627776"),
            "{problems:#?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("minLength 1000000000000000"))
        );
    }

    #[test]
    fn lint_finds_inconsistent_schemas() {
        let s = Schema::object()
            .property("a", Schema::integer().with_range(5.0, 1.0), true)
            .property("b", Schema::string().with_enum([1, 2]), false);
        let mut s2 = s.clone();
        s2.required.push("ghost".into());
        let problems = s2.lint();
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(nested().lint().is_empty());
    }
}
