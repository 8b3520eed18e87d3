//! A tool's parameter schema as a guest or a user's file declares it (`{"schema": …,
//! "value": …}`): deserialising, linting and validating never panic, and a schema that lints
//! clean (and carries no pattern, which examples do not follow) accepts its own examples
//! unless the example budget cut them short, and no example exceeds that budget.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{EXAMPLE_BUDGET, Schema, SplitMix64};
use serde_json::Value;

fn has_pattern(s: &Schema) -> bool {
    s.pattern.is_some()
        || s.items.as_deref().is_some_and(has_pattern)
        || s.properties.values().any(has_pattern)
}

/// How many values the schema declares (each may still be produced once the budget is spent).
fn nodes(s: &Schema) -> u64 {
    1 + s.required.len() as u64
        + s.items.as_deref().map_or(0, nodes)
        + s.properties.values().map(nodes).sum::<u64>()
}

/// What an example spends of the budget: one per value, plus a string's characters.
fn size(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.chars().count() as u64 + 1,
        Value::Array(items) => 1 + items.iter().map(size).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(size).sum::<u64>(),
        _ => 1,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(mut input)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Some(Ok(schema)) = input.remove("schema").map(serde_json::from_value::<Schema>) else {
        return;
    };
    let _ = schema.to_value();
    if let Some(value) = input.get("value") {
        if let Err(problems) = schema.validate(value) {
            assert!(!problems.is_empty());
        }
    }
    let seed = input.get("seed").and_then(Value::as_u64).unwrap_or(0);
    let example = schema.example(&mut SplitMix64::new(seed));
    let used = size(&example);
    assert!(
        used <= EXAMPLE_BUDGET + nodes(&schema),
        "example past the budget: {used}"
    );
    // Within the budget nothing was cut short, so a clean schema must accept it.
    if used < EXAMPLE_BUDGET && schema.lint().is_empty() && !has_pattern(&schema) {
        if let Err(problems) = schema.validate(&example) {
            panic!("a clean schema rejects its own example {example}: {problems:?}");
        }
    }
});
