//! Integration tests of the trainer.

mod learning;
mod passes;
mod reference;
mod rollout;
mod sft;

use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{BoxEnv, Env, ResetOptions};
use sandgym_policy::{PolicyConfig, Tokenizer, tool_list};

/// A tokenizer for guess-number text.
pub fn guess_tokenizer(max: u32) -> Tokenizer {
    let mut env = GuessNumber::with_max(max);
    let mut lines = vec![tool_list(&env.spec().tools)];
    lines.push(env.reset(0, &ResetOptions::default()).unwrap().content);
    for n in 1..=max {
        lines.push(format!(
            r#"{{"thought":"","action":{{"tool_name":"guess","parameters":{{"number":{n}}}}}}}"#
        ));
        lines.push(r#"{"thought":"","response":"give up"}"#.into());
    }
    for word in ["higher", "lower", "correct", "You gave up."] {
        lines.push(word.into());
    }
    Tokenizer::train(lines.into_iter().cycle().take(400), 300).unwrap()
}

/// `n` guess-number envs with secrets in `1..=max`.
pub fn guess_envs(n: usize, max: u32) -> Vec<BoxEnv> {
    (0..n)
        .map(|_| Box::new(GuessNumber::with_max(max)) as BoxEnv)
        .collect()
}

/// A contextual bandit: the instruction names one of four tools, and calling that tool earns
/// 1 (anything else 0). A policy can only do better than chance by reading the instruction.
#[derive(Debug)]
pub struct PickTool {
    spec: sandgym_env_api::EnvSpec,
    listed: bool,
    target: usize,
    reward: f64,
    done: sandgym_env_api::Done,
}

/// The tool names of [`PickTool`].
pub const COLOURS: [&str; 4] = ["red", "green", "blue", "gold"];

impl Default for PickTool {
    fn default() -> Self {
        Self::new()
    }
}

impl PickTool {
    /// A fresh env.
    pub fn new() -> Self {
        let mut spec =
            sandgym_env_api::EnvSpec::new(sandgym_env_api::EnvId::new("pick-tool", 0).unwrap());
        for c in COLOURS {
            spec = spec.with_tool(sandgym_env_api::ToolSpec::new(c, "Pick this colour."));
        }
        Self {
            spec,
            listed: false,
            target: 0,
            reward: 0.0,
            done: sandgym_env_api::Done::Running,
        }
    }
}

impl PickTool {
    /// The same env with a fixed task list: four tasks in each split, task `i` naming colour
    /// `i` (taken by position with [`ResetOptions::cycle`]).
    pub fn listed() -> Self {
        let mut env = Self::new();
        env.spec = env
            .spec
            .with_tasks(sandgym_env_api::TaskCounts { train: 4, test: 4 });
        env.listed = true;
        env
    }
}

impl Env for PickTool {
    fn spec(&self) -> &sandgym_env_api::EnvSpec {
        &self.spec
    }
    fn reset(
        &mut self,
        seed: u64,
        options: &ResetOptions,
    ) -> sandgym_env_api::Result<sandgym_env_api::Observation> {
        self.target = if self.listed && options.cycle {
            (seed % 4) as usize
        } else {
            sandgym_env_api::SplitMix64::new(seed).below(4) as usize
        };
        self.reward = 0.0;
        self.done = sandgym_env_api::Done::Running;
        Ok(self.observe())
    }
    fn observe(&self) -> sandgym_env_api::Observation {
        sandgym_env_api::Observation::new(format!("Call the tool {}.", COLOURS[self.target]))
    }
    fn step(
        &mut self,
        action: &sandgym_env_api::Action,
    ) -> sandgym_env_api::Result<sandgym_env_api::Observation> {
        sandgym_env_api::begin_step(true, self.done, &self.spec.tools, action)?;
        self.reward = match &action.body {
            sandgym_env_api::ActionBody::ToolCall(c) if c.tool_name == COLOURS[self.target] => 1.0,
            _ => 0.0,
        };
        self.done = sandgym_env_api::Done::Terminated;
        Ok(sandgym_env_api::Observation::new("ok"))
    }
    fn reward(&self) -> f64 {
        self.reward
    }
    fn done(&self) -> sandgym_env_api::Done {
        self.done
    }
}

/// A tokenizer for [`PickTool`] text.
pub fn pick_tokenizer() -> Tokenizer {
    pick_tokenizer_of(300)
}

/// A tokenizer for [`PickTool`] text with a vocabulary of `size`.
pub fn pick_tokenizer_of(size: usize) -> Tokenizer {
    let env = PickTool::new();
    let mut lines = vec![tool_list(&env.spec().tools)];
    for c in COLOURS {
        lines.push(format!("Call the tool {c}."));
        lines.push(format!(
            r#"{{"thought":"","action":{{"tool_name":"{c}","parameters":{{}}}}}}"#
        ));
    }
    Tokenizer::train(lines.into_iter().cycle().take(200), size).unwrap()
}

/// A very small policy.
/// A model of `config` initialised from `seed`. The backend's random source is global, so
/// seeding and initialising happen under one lock shared by every test here: without it, runs
/// of the same test start from different weights.
pub fn seeded<B: burn::tensor::backend::Backend>(
    config: &PolicyConfig,
    seed: u64,
) -> sandgym_policy::PolicyModel<B> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let device = Default::default();
    B::seed(&device, seed);
    config.init::<B>(&device)
}

pub fn tiny(vocab: usize) -> PolicyConfig {
    PolicyConfig::new(vocab)
        .with_d_model(32)
        .with_n_layers(1)
        .with_n_heads(2)
        .with_n_kv_heads(2)
        .with_d_ff(64)
}
