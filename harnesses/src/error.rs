//! What can go wrong in a harness run.

/// A harness error.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The chat API could not be reached or the connection failed.
    #[error("chat API request to {url} failed: {reason}")]
    Http {
        /// The URL called.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The chat API answered with an error status.
    #[error("chat API answered {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The response body (truncated).
        body: String,
    },
    /// The chat API's answer was not a chat completion.
    #[error("chat API answer is not a chat completion: {0}")]
    Decode(String),
    /// A tool service failed (not a tool's own error message, which goes back to the model).
    #[error("tool service failed: {0}")]
    Tool(String),
}

/// Result with [`HarnessError`].
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;
