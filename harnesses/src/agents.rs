//! The two agents: the text-to-SQL agent and the customer-service agent, as their teams would
//! write them. They differ only in their prompts and their sub-agent.

use crate::conversation::{Recipe, run_agent};
use crate::{ChatClient, HarnessConfig, Outcome, Result, Tools};

const SQL: Recipe = Recipe {
    system: "You answer questions about a database. Answer with one SQL query.",
    sub_system: "You explore a database schema. Find the tables and columns the question needs.",
    sub_tools: &["list_tables", "describe_table"],
    notes_label: "Schema notes",
};

const SUPPORT: Recipe = Recipe {
    system: "You are a customer-service agent for an online shop. Follow the policy.",
    sub_system: "You look up the shop's policy. Search the knowledge base for what applies.",
    sub_tools: &["search_kb"],
    notes_label: "Policy notes",
};

/// An agent: a sub-agent (its own system prompt, a subset of the tools) writes notes on the
/// task, then the main tool-calling loop works with the notes until it answers; the answer
/// goes to [`Tools::finish`].
#[derive(Clone, Debug)]
pub struct Harness {
    recipe: Recipe,
    config: HarnessConfig,
}

impl Harness {
    /// The SQL agent: a schema-exploration sub-agent (`list_tables`, `describe_table`), then a
    /// loop that may run queries and answers with one SQL query.
    pub fn sql(config: HarnessConfig) -> Self {
        Self {
            recipe: SQL,
            config,
        }
    }

    /// The support agent: a policy-research sub-agent (`search_kb`), then a loop that talks to
    /// the customer (through `reply_to_customer`) and acts on the orders until it closes with
    /// a final reply.
    pub fn support(config: HarnessConfig) -> Self {
        Self {
            recipe: SUPPORT,
            config,
        }
    }

    /// Runs the agent on the task that `opening` states.
    pub fn run(
        &self,
        client: &ChatClient,
        tools: &mut dyn Tools,
        opening: &str,
    ) -> Result<Outcome> {
        run_agent(&self.recipe, &self.config, client, tools, opening)
    }
}
