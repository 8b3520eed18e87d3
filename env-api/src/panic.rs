//! Turning a caught panic into a message.

use std::any::Any;

/// The text of a panic payload (`panic!` with a literal or a formatted message).
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
