//! Agents: anything that picks an env's actions from its observations — a scripted baseline,
//! a demonstrator that plays each task's solution, a model behind an API.

use crate::{Action, Observation};

/// Something that picks actions from observations. It is given the reset observation (the
/// instruction) first, then each step's observation.
///
/// ```
/// use sandgym_env_api::{Action, Agent, Observation};
/// struct Quit;
/// impl Agent for Quit {
///     fn act(&mut self, _: &Observation) -> Action { Action::respond("done") }
/// }
/// assert!(Quit.failure().is_none() && Quit.imitate());
/// ```
pub trait Agent {
    /// The next action.
    fn act(&mut self, observation: &Observation) -> Action;

    /// Why the agent could not decide its last action (e.g. its model server failed), in
    /// which case that action is a placeholder and the episode should end as failed.
    fn failure(&self) -> Option<&str> {
        None
    }

    /// Whether its last action is one to learn from: `false` for a demonstrator's deliberate
    /// mistake, which SFT shows as context but does not imitate.
    fn imitate(&self) -> bool {
        true
    }
}

impl<A: Agent + ?Sized> Agent for Box<A> {
    fn act(&mut self, observation: &Observation) -> Action {
        (**self).act(observation)
    }

    fn failure(&self) -> Option<&str> {
        (**self).failure()
    }

    fn imitate(&self) -> bool {
        (**self).imitate()
    }
}

/// What a demonstrator plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demonstration {
    /// Each task's solution.
    Solution,
    /// A typical mistake first, then the recovery (where the demonstrator models one).
    Recovery,
}
