//! The customer-service agent as its team would write it.

use crate::conversation::{Recipe, run_agent};
use crate::{ChatClient, HarnessConfig, Outcome, Result, Tools};

const RECIPE: Recipe = Recipe {
    system: "You are a customer-service agent for an online shop. Follow the policy.",
    sub_system: "You look up the shop's policy. Search the knowledge base for what applies.",
    sub_tools: &["search_kb"],
    notes_label: "Policy notes",
};

/// The support agent: a policy-research sub-agent reads the knowledge base for the request,
/// then the main loop talks to the customer (through `reply_to_customer`) and acts on the
/// orders until it closes with a final reply.
#[derive(Clone, Debug)]
pub struct SupportHarness {
    config: HarnessConfig,
}

impl SupportHarness {
    /// An agent with `config`.
    pub fn new(config: HarnessConfig) -> Self {
        Self { config }
    }

    /// Handles the conversation that `opening` (the instruction and the customer's first
    /// message) starts; the closing reply goes to `tools.finish`.
    pub fn run(
        &self,
        client: &ChatClient,
        tools: &mut dyn Tools,
        opening: &str,
    ) -> Result<Outcome> {
        run_agent(&RECIPE, &self.config, client, tools, opening)
    }
}
