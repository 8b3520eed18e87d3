//! An agent's action text: parsed as Agent Template JSON and checked against tools of every
//! schema shape. Parsing never panics; what parses serialises back to the same action; a
//! validation error is always an invalid-action error with a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{Action, ErrorKind, Schema, ToolSpec, validate_action};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new("run_sql", "a query").with_parameters(
            Schema::object().property(
                "query",
                Schema::string()
                    .with_length(1, 400)
                    .with_pattern("SELECT .*"),
                true,
            ),
        ),
        ToolSpec::new("guess", "a number").with_parameters(Schema::object().property(
            "n",
            Schema::integer().with_range(1.0, 100.0),
            true,
        )),
        ToolSpec::new("pick", "an enum and a list").with_parameters(
            Schema::object()
                .property(
                    "table",
                    Schema::string().with_enum(["orders", "users"]),
                    true,
                )
                .property(
                    "ids",
                    Schema::array(Schema::number().with_range(-1.0, 1.0)).with_items_range(0, 4),
                    false,
                ),
        ),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(action) = Action::from_json(text) else {
        return;
    };
    let again = Action::from_json(&action.to_json()).expect("a serialised action parses");
    assert_eq!(again, action, "an action survives its own JSON");
    if let Err(e) = validate_action(&tools(), &action) {
        assert_eq!(e.kind(), ErrorKind::InvalidAction, "{e}");
        assert!(!e.to_string().is_empty());
    }
});
