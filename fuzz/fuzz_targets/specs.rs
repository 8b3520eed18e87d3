//! What else arrives as JSON from guests and users: an env's tool list, a composed reward's
//! spec and a guest's wire error. Parsing never panics; a reward spec that parses is checked
//! without panicking; a wire error always has a kind and keeps a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandgym_env_api::{RewardSpec, ToolSpec, WireError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(tools) = serde_json::from_str::<Vec<ToolSpec>>(text) {
        for tool in &tools {
            let _ = tool.to_openai();
            let _ = tool.parameters.lint();
        }
    }
    if let Ok(spec) = serde_json::from_str::<RewardSpec>(text) {
        let _ = spec.check();
    }
    let wire = WireError::from_json(text);
    let _ = wire.to_json();
});
