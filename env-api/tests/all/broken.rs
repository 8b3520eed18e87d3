//! Deliberately broken envs, each with one contract violation, built on the toy env.

use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    None,
    /// Draws the episode from an internal counter instead of the seed.
    IgnoresSeed,
    /// Returns NaN rewards after a step.
    NanReward,
    /// Accepts steps after the episode ended.
    StepsAfterTerminal,
    /// Panics when given an unknown tool.
    PanicsOnInvalidAction,
    /// Returns rewards above the declared maximum.
    RewardOutOfRange,
    /// Panics on every step (for VecEnv).
    PanicsOnStep,
    /// Changes its state before rejecting an invalid action.
    MutatesOnInvalidAction,
    /// Narrows its `guess` tool to 1, 2 or 3 and its answer to "pass" (not a flaw).
    NarrowsWell,
    /// Narrows a tool it does not have.
    NarrowsAnUnknownTool,
    /// "Narrows" `guess` to numbers up to 1,000, beyond the spec's 100.
    NarrowsWider,
}

pub struct Broken {
    inner: GuessNumber,
    flaw: Flaw,
    episodes: u64,
    stepped: bool,
    extra: u32,
}

impl Broken {
    /// The reset observation with this env's narrowing, if its flaw has one.
    fn narrowed(&self, obs: Observation) -> Observation {
        let guess = |max: i64| {
            Schema::object().property(
                "number",
                Schema::integer().with_enum((1..=max).filter(|n| *n <= 3 || *n == max)),
                true,
            )
        };
        let narrowing = match self.flaw {
            Flaw::NarrowsWell => Narrowing::default()
                .tool("guess", guess(3))
                .response(Schema::string().with_enum(["pass"])),
            Flaw::NarrowsAnUnknownTool => Narrowing::default().tool("shout", Schema::object()),
            Flaw::NarrowsWider => Narrowing::default().tool("guess", guess(1000)),
            _ => return obs,
        };
        obs.with_narrowing(&narrowing)
    }

    pub fn new(flaw: Flaw) -> Self {
        Self {
            inner: GuessNumber::new(),
            flaw,
            episodes: 0,
            stepped: false,
            extra: 0,
        }
    }
}

impl Env for Broken {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        self.episodes += 1;
        self.stepped = false;
        self.extra = 0;
        let seed = if self.flaw == Flaw::IgnoresSeed {
            self.episodes
        } else {
            seed
        };
        let obs = self.inner.reset(seed, options)?;
        Ok(self.narrowed(obs))
    }

    fn observe(&self) -> Observation {
        let mut obs = self.inner.observe();
        if !self.stepped {
            obs = self.narrowed(obs);
        }
        if self.extra > 0 {
            obs.content.push_str(&"!".repeat(self.extra as usize));
        }
        obs
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        match self.flaw {
            Flaw::PanicsOnStep => panic!("broken env: step always panics"),
            Flaw::PanicsOnInvalidAction => {
                let call = action.tool_call();
                if let Some(call) = call {
                    let _tool = self
                        .spec()
                        .tool(&call.tool_name)
                        .expect("broken env: tool must exist");
                }
            }
            Flaw::StepsAfterTerminal if self.inner.done().is_done() => {
                return Ok(self.inner.observe());
            }
            Flaw::MutatesOnInvalidAction
                if validate_action(&self.spec().tools, action).is_err() =>
            {
                self.extra += 1;
            }
            _ => {}
        }
        let obs = self.inner.step(action)?;
        self.stepped = true;
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        match self.flaw {
            Flaw::NanReward if self.stepped => f64::NAN,
            Flaw::RewardOutOfRange if self.stepped => 2.0,
            _ => self.inner.reward(),
        }
    }

    fn done(&self) -> Done {
        self.inner.done()
    }
}
