//! Whether an episode succeeded: the one rule every evaluator, trainer and trace reader uses.

use serde_json::{Map, Value};

use crate::Done;

/// The info key an env sets on the observation that ends an episode: `true` when the agent
/// achieved the task. An env whose reward alone says it (e.g. 1 for a found number) may leave
/// it out.
pub const SUCCESS: &str = "success";

/// Whether an episode succeeded: the final observation's [`SUCCESS`] info when the env reports
/// it (a boolean; any other value counts as failure); otherwise whether the episode
/// terminated — not truncated by a step budget or an error — with a positive total reward.
///
/// ```
/// use sandgym_env_api::{Done, episode_success};
/// use serde_json::{Map, json};
/// let says = |v| json!({"success": v}).as_object().unwrap().clone();
/// assert!(episode_success(&says(json!(true)), Done::Terminated, 0.0));
/// assert!(!episode_success(&says(json!(false)), Done::Terminated, 1.0));
/// assert!(!episode_success(&says(json!("yes")), Done::Terminated, 1.0));
/// assert!(episode_success(&Map::new(), Done::Terminated, 1.0));
/// assert!(!episode_success(&Map::new(), Done::Truncated, 1.0));
/// assert!(!episode_success(&Map::new(), Done::Terminated, 0.0));
/// ```
pub fn episode_success(final_info: &Map<String, Value>, done: Done, total_reward: f64) -> bool {
    match final_info.get(SUCCESS) {
        Some(value) => value.as_bool().unwrap_or(false),
        None => done == Done::Terminated && total_reward > 0.0,
    }
}
