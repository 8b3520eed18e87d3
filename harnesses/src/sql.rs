//! The text-to-SQL agent as its team would write it.

use crate::conversation::{Recipe, run_agent};
use crate::{ChatClient, HarnessConfig, Outcome, Result, Tools};

const RECIPE: Recipe = Recipe {
    system: "You answer questions about a database. Answer with one SQL query.",
    sub_system: "You explore a database schema. Find the tables and columns the question needs.",
    sub_tools: &["list_tables", "describe_table"],
    notes_label: "Schema notes",
};

/// The SQL agent: a schema-exploration sub-agent writes notes on the relevant tables, then
/// the main loop may run queries and answers with one SQL query.
#[derive(Clone, Debug)]
pub struct SqlHarness {
    config: HarnessConfig,
}

impl SqlHarness {
    /// An agent with `config`.
    pub fn new(config: HarnessConfig) -> Self {
        Self { config }
    }

    /// Answers `question`; the answer goes to `tools.finish`.
    pub fn run(
        &self,
        client: &ChatClient,
        tools: &mut dyn Tools,
        question: &str,
    ) -> Result<Outcome> {
        run_agent(&RECIPE, &self.config, client, tools, question)
    }
}
