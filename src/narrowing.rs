//! Whether an env's narrowing lets the constrained decoder write the right answers.
//!
//! An env narrows what the policy may write, per episode
//! ([`Narrowing`](crate::env_api::Narrowing): the SQL env's query shape over its own tables,
//! the question's literals and numbers). A narrowing that forbids
//! a task's right answer makes that task unlearnable: the decoder can never sample it, and
//! SFT learns it only outside the constraint. [`coverage`] plays every task of both splits
//! with the env's demonstrator (each task's known solution) and checks each of its actions
//! against the grammar the decoder would use in that episode; `sandgym check` prints it.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::env_api::{Demonstration, ResetOptions, Split};
use crate::play::play_env_with;
use crate::policy::{ActionLimits, Template, ToolCallGrammar};
use crate::{Backend, EnvTarget, registry};

/// One demonstrator action the episode's grammar cannot produce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outside {
    /// The task (its id, or `split#index` when the env names none).
    pub task: String,
    /// The action, as Agent Template JSON.
    pub action: String,
}

/// How many of the demonstrator's actions fit their episodes' grammars.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Tasks played (every task of both splits once).
    pub tasks: usize,
    /// Actions checked.
    pub actions: usize,
    /// Those the grammar cannot produce.
    pub outside: Vec<Outside>,
}

impl Coverage {
    /// The share of actions the grammar can produce (1 when none were checked).
    pub fn share(&self) -> f64 {
        if self.actions == 0 {
            1.0
        } else {
            1.0 - self.outside.len() as f64 / self.actions as f64
        }
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "narrowing: {} of {} demonstrator actions over {} tasks fit the constrained decoder's grammar ({:.1}%)",
            self.actions - self.outside.len(),
            self.actions,
            self.tasks,
            100.0 * self.share()
        )?;
        for o in &self.outside {
            writeln!(f, "  outside the grammar: {}: {}", o.task, o.action)?;
        }
        Ok(())
    }
}

/// Plays every task of `target` (an env with a fixed task list and a demonstrator) with its
/// demonstrator and checks each action against its episode's grammar. `None` for an env
/// without a demonstrator or a task list.
pub fn coverage(target: &EnvTarget, backend: Backend) -> anyhow::Result<Option<Coverage>> {
    // Only a registered env has a demonstrator and a preset.
    let env = target.env.id().unwrap_or_default();
    // One demonstrator for every task (it reads each episode's task from its reset): making
    // one builds the env's whole task set.
    let Some(mut agent) = registry::demonstrator(env, &target.config, Demonstration::Solution)?
    else {
        return Ok(None);
    };
    let spec = target.spec()?.clone();
    let Some(counts) = spec.tasks else {
        return Ok(None);
    };
    let tokenizer = crate::training::default_tokenizer()?;
    let template = Template::new(&tokenizer);
    // The limits the main command's preset trains under (a query longer than its
    // `response_chars` is outside too).
    let rollout = crate::training::preset(env, sandgym_trainer::Algo::Grpo, true).rollout;
    let limits = ActionLimits {
        thought_chars: rollout.thought_chars,
        response_chars: rollout.response_chars,
    };
    let default = Arc::new(ToolCallGrammar::for_spec(&tokenizer, &spec, limits)?);
    let mut grammars: HashMap<String, Arc<ToolCallGrammar>> = HashMap::new();
    let mut out = Coverage::default();
    for (split, n) in [(Split::Train, counts.train), (Split::Test, counts.test)] {
        let options = ResetOptions::split(split).cycling();
        for episode in play_env_with(target.make(backend)?, 0..n, &options, &mut *agent)? {
            let task = episode
                .task()
                .map_or_else(|| format!("{split:?}#{}", episode.seed), str::to_owned);
            if let Some(error) = &episode.error {
                anyhow::bail!("task {task}: {error}");
            }
            let grammar = sandgym_trainer::episode_grammar(
                &mut grammars,
                &default,
                &spec,
                limits,
                &episode.reset_info,
            )
            .map_err(|e| anyhow::anyhow!("task {task}: {e}"))?;
            out.tasks += 1;
            for action in episode
                .trajectory
                .records
                .iter()
                .filter_map(|r| r.to_action())
            {
                out.actions += 1;
                // The thought as the policy may write it (the SQL preset writes none): what
                // is checked is the action itself.
                let mut written = action;
                written.thought = written
                    .thought
                    .chars()
                    .take(limits.thought_chars as usize)
                    .collect();
                if !fits(&grammar, &template, &written)? {
                    out.outside.push(Outside {
                        task: task.clone(),
                        action: written.to_json(),
                    });
                }
            }
        }
    }
    Ok(Some(out))
}

/// Whether `grammar` lets the decoder write `action` (its tokens, replayed through a fresh
/// matcher, each allowed, the matcher finished at the end).
fn fits(
    grammar: &ToolCallGrammar,
    template: &Template,
    action: &crate::env_api::Action,
) -> anyhow::Result<bool> {
    let rendered = template.action(action)?;
    let mut matcher = grammar.matcher()?;
    // The first token opens the assistant's turn; the grammar starts after it.
    for &id in rendered.ids.iter().skip(1) {
        if !matcher
            .allowed()?
            .get(id as usize)
            .copied()
            .unwrap_or(false)
        {
            return Ok(false);
        }
        matcher.consume(id)?;
    }
    Ok(matcher.is_finished())
}
