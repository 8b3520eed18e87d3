//! One client's env and episode: what a WebSocket connection (or one stateless HTTP request)
//! drives. Its calls block (an env step may run a sandboxed guest for seconds), so the server
//! runs them on the blocking pool.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Value, json};

use sandgym_env_api::{Action, BoxEnv, Done, StepRecord};

use crate::protocol::{
    ErrorCode, ResetRequest, RpcRequest, StepRequest, WireError, ended, reset_data, rpc, rpc_error,
    rpc_result, step_data, tool_action,
};
use crate::schema::mcp_tools;
use crate::server::Shared;

/// A client's env instance and where its episode stands.
pub struct Session {
    shared: std::sync::Arc<Shared>,
    env: Option<BoxEnv>,
    episode_id: Option<String>,
    instruction: String,
    seed: Option<u64>,
    steps: u64,
    reward: Option<f64>,
    done: Done,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("episode_id", &self.episode_id)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session with a fresh env from the server's factory.
    pub fn open(shared: std::sync::Arc<Shared>) -> Result<Self, WireError> {
        let mut me = Self {
            shared,
            env: None,
            episode_id: None,
            instruction: String::new(),
            seed: None,
            steps: 0,
            reward: None,
            done: Done::Running,
        };
        me.env()?;
        Ok(me)
    }

    fn env(&mut self) -> Result<&mut BoxEnv, WireError> {
        if self.env.is_none() {
            let made = catch_unwind(AssertUnwindSafe(|| (self.shared.factory)()))
                .map_err(|_| WireError::new(ErrorCode::FactoryError, "making the env panicked"))?
                .map_err(|e| {
                    WireError::new(ErrorCode::FactoryError, format!("cannot make the env: {e}"))
                })?;
            self.env = Some(made);
        }
        Ok(self.env.as_mut().expect("made above"))
    }

    /// Runs `f` on the env; an env that panics is dropped (the next call makes a fresh one)
    /// and the panic is an `EXECUTION_ERROR`.
    fn guarded<T>(
        &mut self,
        f: impl FnOnce(&mut BoxEnv) -> Result<T, WireError>,
    ) -> Result<T, WireError> {
        let env = self.env()?;
        match catch_unwind(AssertUnwindSafe(|| f(env))) {
            Ok(r) => r,
            Err(payload) => {
                self.env = None;
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                Err(WireError::new(
                    ErrorCode::ExecutionError,
                    format!("the env panicked ({what}); the next reset makes a fresh one"),
                ))
            }
        }
    }

    /// Starts an episode; the reply's `data`.
    pub fn reset(&mut self, request: ResetRequest) -> Result<Value, WireError> {
        let seed = request.seed.unwrap_or_else(|| self.shared.next_seed());
        let observation = self.guarded(|env| {
            env.reset(seed, &request.options)
                .map_err(|e| WireError::from_env(&e))
        })?;
        self.episode_id = request.episode_id;
        self.instruction = observation.content.clone();
        self.seed = Some(seed);
        self.steps = 0;
        self.reward = None;
        self.done = Done::Running;
        Ok(reset_data(&observation, self.episode_id.as_deref()))
    }

    /// Runs a step's request; the reply's `data`.
    pub fn step(&mut self, request: StepRequest) -> Result<Value, WireError> {
        match request {
            StepRequest::ListTools => {
                let tools = mcp_tools(&self.shared.spec);
                Ok(
                    json!({"observation": tools, "reward": self.reward, "done": self.done.is_done()}),
                )
            }
            StepRequest::Act(action) => {
                let record = self.act(&action)?;
                let observation = self.env()?.observe();
                Ok(step_data(
                    &observation,
                    &record,
                    self.steps,
                    self.episode_id.as_deref(),
                ))
            }
        }
    }

    fn act(&mut self, action: &Action) -> Result<StepRecord, WireError> {
        let (observation, reward, done) = self.guarded(|env| {
            let observation = env.step(action).map_err(|e| WireError::from_env(&e))?;
            Ok((observation, env.reward(), env.done()))
        })?;
        self.steps += 1;
        self.reward = Some(reward);
        self.done = done;
        let mut record = StepRecord::new(&self.instruction, action, observation.content, reward);
        record.done = done;
        record.episode = self.episode_id.clone();
        Ok(record)
    }

    /// The session's state (OpenEnv's `State`: `episode_id`, `step_count`, and more).
    pub fn state(&self) -> Value {
        json!({
            "episode_id": self.episode_id,
            "step_count": self.steps,
            "env_id": self.shared.spec.id.to_string(),
            "seed": self.seed,
            "reward": self.reward,
            "done": self.done.is_done(),
            "ended": ended(self.done),
        })
    }

    /// Answers an MCP JSON-RPC request: `tools/list`, or `tools/call`, which steps this
    /// session's episode with that tool call (a tool the env rejects is a result with
    /// `isError`, as MCP has it).
    pub fn mcp(&mut self, request: &Value) -> Value {
        let request = match RpcRequest::parse(request) {
            Ok(r) => r,
            Err(response) => return response,
        };
        let id = request.id.clone();
        match request.method.as_str() {
            "tools/list" => rpc_result(id, mcp_tools(&self.shared.spec)),
            "tools/call" => {
                let Some(name) = request.params.get("name").and_then(Value::as_str) else {
                    return rpc_error(id, rpc::INVALID_PARAMS, "tools/call needs a string `name`");
                };
                let arguments = request
                    .params
                    .get("arguments")
                    .cloned()
                    .unwrap_or(json!({}));
                let action = match tool_action(name.to_owned(), arguments) {
                    Ok(action) => action,
                    Err(e) => return rpc_error(id, rpc::INVALID_PARAMS, e.message),
                };
                match self.act(&action) {
                    Ok(record) => rpc_result(
                        id,
                        json!({
                            "content": [{"type": "text", "text": record.observation}],
                            "isError": false,
                            "_meta": {"reward": record.reward, "done": record.done.is_done()},
                        }),
                    ),
                    Err(e) if e.code == ErrorCode::ValidationError => rpc_result(
                        id,
                        json!({"content": [{"type": "text", "text": e.message}], "isError": true}),
                    ),
                    Err(e) => rpc_error(id, rpc::INTERNAL_ERROR, e.message),
                }
            }
            other => rpc_error(id, rpc::METHOD_NOT_FOUND, format!("no method {other:?}")),
        }
    }
}
