//! Message history with compression, and the tool-calling loop every agent here runs.

use crate::openai::{ChatRequest, Content, Message, ToolDef};
use crate::{ChatClient, HarnessConfig, Outcome, Result, Tools};

/// A message history with a character budget: when it grows past the budget, the oldest tool
/// outputs are replaced by a short marker (the usual "drop old observations" compression).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    budget: usize,
}

/// The marker an elided tool output becomes.
const ELIDED: &str = "[older tool output elided]";

impl Conversation {
    /// A history with a system prompt, a first user message and a budget in characters.
    pub fn new(system: &str, user: &str, budget: usize) -> Self {
        Self {
            messages: vec![Message::system(system), Message::user(user)],
            budget,
        }
    }

    /// Characters of text in the history.
    pub fn chars(&self) -> usize {
        self.messages
            .iter()
            .map(|m| {
                m.text().len()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.function.name.len() + c.function.arguments.len())
                        .sum::<usize>()
            })
            .sum()
    }

    /// Elides the oldest tool outputs (never the latest message) until the history fits its
    /// budget; returns whether anything changed.
    pub fn compress(&mut self) -> bool {
        let mut changed = false;
        let last = self.messages.len().saturating_sub(1);
        for i in 0..last {
            if self.chars() <= self.budget {
                break;
            }
            let m = &mut self.messages[i];
            if m.role == "tool" && m.text() != ELIDED {
                m.content = Some(Content::Text(ELIDED.into()));
                changed = true;
            }
        }
        changed
    }
}

/// Runs the tool-calling loop: asks the model, executes the calls it makes, feeds the results
/// back, until it answers in text, the service closes, or `max_turns` calls were made. Returns
/// the answer text, if any.
pub(crate) fn tool_loop(
    client: &ChatClient,
    config: &HarnessConfig,
    tools: &mut dyn Tools,
    offered: &[ToolDef],
    conversation: &mut Conversation,
    max_turns: usize,
    outcome: &mut Outcome,
) -> Result<Option<String>> {
    for _ in 0..max_turns {
        if tools.finished() {
            return Ok(None);
        }
        if conversation.compress() {
            outcome.compressions += 1;
        }
        let request = ChatRequest {
            model: config.model.clone(),
            messages: conversation.messages.clone(),
            tools: offered.to_vec(),
            temperature: Some(config.temperature),
            max_tokens: Some(config.max_tokens),
            ..ChatRequest::default()
        };
        let response = client.complete(&request)?;
        outcome.model_calls += 1;
        if let Some(u) = response.usage {
            outcome.prompt_tokens += u64::from(u.prompt_tokens);
            outcome.completion_tokens += u64::from(u.completion_tokens);
        }
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(crate::HarnessError::Decode("no choices".into()));
        };
        let message = choice.message;
        if message.tool_calls.is_empty() {
            return Ok(Some(message.text()));
        }
        let calls = message.tool_calls.clone();
        conversation.messages.push(Message {
            role: "assistant".into(),
            ..message
        });
        for call in calls {
            let result = tools.call(&call.function.name, &call.function.arguments)?;
            outcome.tool_calls += 1;
            conversation.messages.push(Message::tool(call.id, result));
        }
    }
    Ok(None)
}

/// A sub-agent: its own system prompt, a subset of the tools, a short budget. Its answer (or,
/// when it gives none, the tool outputs it gathered) comes back as notes for the main agent.
pub(crate) fn sub_agent(
    client: &ChatClient,
    config: &HarnessConfig,
    tools: &mut dyn Tools,
    names: &[&str],
    system: &str,
    task: &str,
    outcome: &mut Outcome,
) -> Result<String> {
    let offered: Vec<ToolDef> = tools
        .definitions()
        .into_iter()
        .filter(|d| names.contains(&d.function.name.as_str()))
        .collect();
    let mut conversation = Conversation::new(system, task, config.history_chars);
    let before = outcome.model_calls;
    let answer = tool_loop(
        client,
        config,
        tools,
        &offered,
        &mut conversation,
        config.sub_agent_turns,
        outcome,
    )?;
    outcome.sub_agent_calls += outcome.model_calls - before;
    Ok(answer.unwrap_or_else(|| {
        conversation
            .messages
            .iter()
            .filter(|m| m.role == "tool")
            .map(Message::text)
            .collect::<Vec<_>>()
            .join("\n")
    }))
}

/// What distinguishes one agent from another here: its prompts and its sub-agent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recipe {
    /// The main agent's system prompt.
    pub system: &'static str,
    /// The sub-agent's system prompt.
    pub sub_system: &'static str,
    /// The tools the sub-agent may use.
    pub sub_tools: &'static [&'static str],
    /// How the sub-agent's notes are introduced to the main agent.
    pub notes_label: &'static str,
}

/// One agent run: the sub-agent (when enabled) writes notes, the main loop works with the
/// notes appended to the opening message, and its answer goes to `tools.finish`.
pub(crate) fn run_agent(
    recipe: &Recipe,
    config: &HarnessConfig,
    client: &ChatClient,
    tools: &mut dyn Tools,
    opening: &str,
) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut user = opening.to_owned();
    if config.sub_agent {
        let notes = sub_agent(
            client,
            config,
            tools,
            recipe.sub_tools,
            recipe.sub_system,
            opening,
            &mut outcome,
        )?;
        if !notes.trim().is_empty() {
            user = format!("{opening}\n{}: {notes}", recipe.notes_label);
        }
    }
    let offered = tools.definitions();
    let mut conversation = Conversation::new(recipe.system, &user, config.history_chars);
    let answer = tool_loop(
        client,
        config,
        tools,
        &offered,
        &mut conversation,
        config.max_turns,
        &mut outcome,
    )?;
    if let Some(answer) = &answer
        && !tools.finished()
    {
        tools.finish(answer)?;
    }
    outcome.answer = answer;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_elides_oldest_tool_outputs_first() {
        let mut c = Conversation::new("sys", "question", 72);
        c.messages.push(Message::tool("a", "x".repeat(30)));
        c.messages.push(Message::tool("b", "y".repeat(30)));
        c.messages.push(Message::user("next"));
        assert!(c.compress());
        assert_eq!(c.messages[2].text(), ELIDED);
        assert_eq!(c.messages[3].text(), "y".repeat(30));
        assert!(!Conversation::new("s", "u", 40).compress());
    }
}
