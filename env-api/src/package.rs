//! [`EnvPackage`]: everything sandgym knows about one env, exported by the env's own crate as
//! one value, so that bundling an env with the `sandgym` tool is that crate (with its guest
//! wrapper and workspace entries) plus one line in the tool's registry.

use serde_json::{Map, Value};

use crate::{Agent, Demonstration, Result};

/// Makes the demonstrator of an env configuration: an agent that plays each task's known
/// solution ([`Demonstration::Solution`]) or a typical mistake and its repair
/// ([`Demonstration::Recovery`]); an error for a kind it does not model or a configuration it
/// cannot read.
pub type MakeDemonstrator = fn(&Map<String, Value>, Demonstration) -> Result<Box<dyn Agent>>;

/// One env as a package: its id's name, how to build it natively and in the sandbox, the
/// agents that come with it, how to train on it, and the harness it was refactored from.
///
/// ```
/// use sandgym_env_api::{Env, EnvPackage, ResetOptions, make, play, RecordTrajectory};
/// let package: &EnvPackage = &sandgym_env_api::toy::PACKAGE;
/// (package.register)();
/// let mut env = RecordTrajectory::new(make(&format!("{}-v0", package.name))?);
/// let mut agent = (package.baseline.unwrap())();
/// assert!(play(&mut env, &mut agent, 3, &ResetOptions::default(), 16)?.success);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct EnvPackage {
    /// Its name: the id without the version (`sql-agent`).
    pub name: &'static str,
    /// The guest crate (in the project's guest workspace) that builds it as a WebAssembly
    /// component.
    pub guest: &'static str,
    /// Registers its native build in the process-wide [`Registry`](crate::Registry).
    pub register: fn(),
    /// Its scripted baseline (the hand-written harness logic), if it has one.
    pub baseline: Option<fn() -> Box<dyn Agent>>,
    /// Its demonstrator, if the env knows its tasks' solutions (demonstrations for the SFT
    /// warm-start).
    pub demonstrator: Option<MakeDemonstrator>,
    /// How the trainer's defaults are shaped to its episodes, in order ([`Preset`]).
    pub presets: &'static [Preset],
    /// The env configuration (JSON) that training a pretrained model uses when it is given
    /// none: what the main job trains on, where it differs from the env's defaults.
    pub train_config: Option<&'static str>,
    /// The name of the harness it was refactored from (`sql`, `support`: the agents of the
    /// harnesses crate), for the proxy approach.
    pub harness: Option<&'static str>,
    /// Its `Env` implementation's source files (and the per-episode narrowing written for
    /// it), for the integration cost the comparison reports; empty for an env without a
    /// harness.
    pub source: &'static [&'static str],
}

/// Which models a [`Preset`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresetModels {
    /// Every model.
    Any,
    /// Pretrained models only: applied after the trainer's own defaults for a pretrained
    /// model (LoRA-sized steps, the prompt encoded without gradient).
    Pretrained,
}

/// Which algorithms a [`Preset`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresetAlgos {
    /// Every algorithm.
    Any,
    /// Those that sample a group of rollouts per task (GRPO, RLOO, DAPO).
    Group,
    /// Those that sample one rollout per task (PPO, REINFORCE++).
    Single,
}

/// A JSON merge patch over the trainer's settings (`TrainConfig` in the trainer crate, the
/// shape of a run's `config.json` `train` part) that shapes them to an env's episodes: its
/// turns, tokens and budget. An env's presets apply in order, those for every model first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The models it is for.
    pub models: PresetModels,
    /// The algorithms it is for.
    pub algos: PresetAlgos,
    /// The patch: one JSON object.
    pub patch: &'static str,
}

impl Preset {
    /// A patch for every model and algorithm.
    pub const fn any(patch: &'static str) -> Self {
        Self {
            models: PresetModels::Any,
            algos: PresetAlgos::Any,
            patch,
        }
    }

    /// The same patch, for pretrained models only.
    pub const fn pretrained(self) -> Self {
        Self {
            models: PresetModels::Pretrained,
            ..self
        }
    }

    /// The same patch, for group algorithms only.
    pub const fn group(self) -> Self {
        Self {
            algos: PresetAlgos::Group,
            ..self
        }
    }

    /// The same patch, for single-rollout algorithms only.
    pub const fn single(self) -> Self {
        Self {
            algos: PresetAlgos::Single,
            ..self
        }
    }

    /// Whether it applies to a model (`pretrained` or not) trained by a group algorithm
    /// (`group`) or not.
    pub fn applies(&self, pretrained: bool, group: bool) -> bool {
        let model = match self.models {
            PresetModels::Any => true,
            PresetModels::Pretrained => pretrained,
        };
        let algo = match self.algos {
            PresetAlgos::Any => true,
            PresetAlgos::Group => group,
            PresetAlgos::Single => !group,
        };
        model && algo
    }
}
