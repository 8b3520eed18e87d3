//! The harnesses' tool service backed by an env's business logic.
//!
//! A harness calls tools through [`sandgym_harnesses::Tools`]; here each call becomes a step
//! of a native env instance, so the orders database, the SQL engine and the simulated
//! customer are exactly the envs' own. The harness never sees rewards: the service adds them
//! up for whoever runs the harness (the comparison posts them to the recording proxy).

use sandgym_chat_api::ToolDef;
use sandgym_harnesses::{HarnessError, Tools};
use serde_json::{Map, Value};

use crate::env_api::{Action, BoxEnv, Observation, ResetOptions};

/// A [`Tools`] service over one env episode.
pub struct EnvTools {
    env: BoxEnv,
    definitions: Vec<ToolDef>,
    reward: f64,
    /// The info of the env's last observation.
    last_info: Map<String, Value>,
    steps: usize,
}

impl std::fmt::Debug for EnvTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvTools")
            .field("reward", &self.reward)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl EnvTools {
    /// Starts an episode of `env` with `seed` and `options`; returns the service and the
    /// opening text (the task the harness is given).
    pub fn start(
        mut env: BoxEnv,
        seed: u64,
        options: &ResetOptions,
    ) -> crate::env_api::Result<(Self, String)> {
        let opening = env.reset(seed, options)?;
        // The tools as this episode narrows them, so a constraining server (the policy
        // server) decodes the harness's calls under the episode's own schemas.
        let spec = match crate::env_api::Narrowing::from_info(&opening.info)? {
            Some(narrowing) => narrowing.apply(env.spec())?,
            None => env.spec().clone(),
        };
        let definitions = crate::chat_agent::tool_defs(&spec);
        Ok((
            Self {
                env,
                definitions,
                reward: 0.0,
                last_info: Map::new(),
                steps: 0,
            },
            opening.content,
        ))
    }

    /// Total reward of the episode so far.
    pub fn reward(&self) -> f64 {
        self.reward
    }

    /// Whether the episode succeeded ([`episode_success`](crate::env_api::episode_success)).
    pub fn success(&self) -> bool {
        crate::env_api::episode_success(&self.last_info, self.env.done(), self.reward)
    }

    /// Env steps taken.
    pub fn steps(&self) -> usize {
        self.steps
    }

    fn step(&mut self, action: &Action) -> Result<Observation, crate::env_api::EnvError> {
        let obs = self.env.step(action)?;
        self.steps += 1;
        self.reward += self.env.reward();
        self.last_info = obs.info.clone();
        Ok(obs)
    }
}

impl Tools for EnvTools {
    fn definitions(&self) -> Vec<ToolDef> {
        self.definitions.clone()
    }

    fn call(&mut self, name: &str, arguments: &str) -> sandgym_harnesses::Result<String> {
        let params: Map<String, Value> = match serde_json::from_str(arguments) {
            Ok(p) => p,
            Err(e) => return Ok(format!("error: the arguments are not a JSON object: {e}")),
        };
        match self.step(&Action::tool(name, Value::Object(params))) {
            Ok(obs) => Ok(obs.content),
            // A bad call is the model's mistake: it reads the error, as from any API.
            Err(e) if e.is_invalid_action() => Ok(format!("error: {e}")),
            Err(e) => Err(HarnessError::Tool(e.to_string())),
        }
    }

    fn finish(&mut self, answer: &str) -> sandgym_harnesses::Result<()> {
        match self.step(&Action::respond(answer)) {
            Ok(_) => Ok(()),
            Err(e) if e.is_invalid_action() => Ok(()),
            Err(e) => Err(HarnessError::Tool(e.to_string())),
        }
    }

    fn finished(&self) -> bool {
        self.env.done().is_done()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool that traps in the sandbox is an error of this harness run, not a crash.
    #[test]
    fn a_trapping_tool_is_an_error_of_the_run() {
        let guest = crate::sandbox::Sandbox::shared()
            .unwrap()
            .load(sandgym_guest_artifacts::HOSTILE.wasm)
            .unwrap();
        let env = guest.instantiate(&Map::new()).unwrap();
        let (mut tools, _) = EnvTools::start(Box::new(env), 0, &ResetOptions::default()).unwrap();
        assert_eq!(tools.call("ping", "{}").unwrap(), "pong 1");
        let err = tools.call("attack", r#"{"kind": "panic"}"#).unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert!(tools.finished());
        assert!(!tools.success());
    }
}
