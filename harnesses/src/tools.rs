//! The tool service a harness calls, and what a run produced.

use crate::Result;
use crate::openai::ToolDef;

/// The services behind an agent's tools. It describes its functions (as an MCP server does),
/// runs them, and takes the agent's final answer to the user.
pub trait Tools {
    /// The functions offered to the model.
    fn definitions(&self) -> Vec<ToolDef>;
    /// Runs `name` with JSON `arguments`. A tool's own failure (bad arguments, SQL error) is
    /// text for the model; `Err` means the service itself is broken.
    fn call(&mut self, name: &str, arguments: &str) -> Result<String>;
    /// Delivers the final answer (the SQL answer, or the closing reply to the customer).
    fn finish(&mut self, answer: &str) -> Result<()>;
    /// Whether the session is over (answered, or closed by the service).
    fn finished(&self) -> bool;
}

/// What one harness run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The final answer, when the agent gave one.
    pub answer: Option<String>,
    /// Chat-completion calls made, sub-agent included.
    pub model_calls: usize,
    /// Of which by the sub-agent.
    pub sub_agent_calls: usize,
    /// Tool calls executed.
    pub tool_calls: usize,
    /// Times the history was compressed.
    pub compressions: usize,
    /// Prompt tokens reported by the server, summed over calls.
    pub prompt_tokens: u64,
    /// Completion tokens reported by the server, summed over calls.
    pub completion_tokens: u64,
}
