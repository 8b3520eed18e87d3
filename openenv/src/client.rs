//! An env on another machine: [`RemoteEnv`] implements [`Env`] over OpenEnv's WebSocket
//! protocol, so sandgym's rollouts, evaluations and `run` drive a `sandgym serve-env` (or any
//! OpenEnv server whose tools MCP lists) as if the env were local.

use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, ErrorKind, Observation, ResetOptions,
    Schema, ToolSpec,
};

/// Whether `env` names a remote env (`ws://…`, `wss://…`, `http://…`, `https://…`).
pub fn is_remote(env: &str) -> bool {
    ["ws://", "wss://", "http://", "https://"]
        .iter()
        .any(|p| env.starts_with(p))
}

/// An env served over OpenEnv's protocol, one WebSocket session per instance. A session the
/// server ended (idle too long) or a dropped connection is opened again on the next reset; a
/// server that cannot be reached fails that call with an episode error.
pub struct RemoteEnv {
    spec: EnvSpec,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    ws: String,
    timeout: Duration,
    /// The session is gone (the connection failed, or the server ended it, e.g. for idling):
    /// the next reset opens a new one.
    broken: bool,
    /// Whether the server is sandgym's (Agent Template actions, typed error kinds).
    native: bool,
    last: Observation,
    reward: f64,
    done: Done,
}

impl std::fmt::Debug for RemoteEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEnv")
            .field("env", &self.spec.id.to_string())
            .finish_non_exhaustive()
    }
}

fn remote(kind: ErrorKind, message: impl Into<String>) -> EnvError {
    EnvError::Remote {
        kind,
        message: message.into(),
    }
}

fn other(message: impl Into<String>) -> EnvError {
    remote(ErrorKind::Other, message)
}

/// The server's HTTP base URL and its WebSocket URL.
fn urls(env: &str) -> (String, String) {
    let base = env.trim_end_matches('/').trim_end_matches("/ws");
    let http = base
        .replacen("wss://", "https://", 1)
        .replacen("ws://", "http://", 1);
    let ws = http
        .replacen("https://", "wss://", 1)
        .replacen("http://", "ws://", 1);
    (http.clone(), format!("{ws}/ws"))
}

fn get_json(agent: &ureq::Agent, url: &str) -> Result<Value, EnvError> {
    let mut response = agent
        .get(url)
        .call()
        .map_err(|e| other(format!("GET {url}: {e}")))?;
    if response.status().as_u16() != 200 {
        return Err(other(format!("GET {url}: status {}", response.status())));
    }
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| other(format!("GET {url}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| other(format!("GET {url}: not JSON ({e})")))
}

/// The env's spec: sandgym's own (`GET /spec`), or one built from OpenEnv's `/metadata` and
/// the MCP tool list for another server (its rewards are taken as unbounded).
fn fetch_spec(agent: &ureq::Agent, http: &str) -> Result<(EnvSpec, bool), EnvError> {
    if let Ok(v) = get_json(agent, &format!("{http}/spec")) {
        let spec = serde_json::from_value(v)
            .map_err(|e| other(format!("{http}/spec is not an env spec: {e}")))?;
        return Ok((spec, true));
    }
    let meta = get_json(agent, &format!("{http}/metadata"))?;
    let name = meta["name"].as_str().unwrap_or("remote");
    let id = name
        .parse::<EnvId>()
        .or_else(|_| EnvId::new(sanitize(name), 0))
        .map_err(|e| other(format!("the server's name {name:?}: {e}")))?;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mut response = agent
        .post(format!("{http}/mcp"))
        .header("content-type", "application/json")
        .send(list.to_string())
        .map_err(|e| other(format!("POST {http}/mcp: {e}")))?;
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| other(format!("POST {http}/mcp: {e}")))?;
    let tools: Value = serde_json::from_str(&text)
        .map_err(|e| other(format!("POST {http}/mcp: not JSON ({e})")))?;
    // An env of MCP tools ends its episodes itself: it takes no final response.
    let mut spec = EnvSpec::new(id)
        .with_description(meta["description"].as_str().unwrap_or_default())
        .with_reward_range(f64::MIN, f64::MAX)
        .without_response();
    for t in tools["result"]["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default();
        let parameters = serde_json::from_value::<Schema>(t["inputSchema"].clone())
            .unwrap_or_else(|_| Schema::object());
        let tool = ToolSpec::new(name, t["description"].as_str().unwrap_or_default())
            .with_parameters(parameters);
        spec = spec.with_tool(tool);
    }
    Ok((spec, false))
}

/// A WebSocket to `ws` whose reads and writes give up after `timeout`.
fn open(ws: &str, timeout: Duration) -> Result<WebSocket<MaybeTlsStream<TcpStream>>, EnvError> {
    let (mut socket, _) = tungstenite::connect(ws)
        .map_err(|e| remote(ErrorKind::Episode, format!("cannot connect to {ws}: {e}")))?;
    if let MaybeTlsStream::Plain(stream) = socket.get_mut() {
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| other(format!("{ws}: {e}")))?;
    }
    Ok(socket)
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-').to_owned();
    if s.is_empty() { "remote".into() } else { s }
}

impl RemoteEnv {
    /// Connects to the server at `url` (`ws://host:port`, or its `http://` base) with
    /// `timeout` for each answer, and reads the env's spec.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self, EnvError> {
        let (http, ws) = urls(url);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let (spec, native) = fetch_spec(&agent, &http)?;
        let socket = open(&ws, timeout)?;
        Ok(Self {
            spec,
            socket,
            ws,
            timeout,
            broken: false,
            native,
            last: Observation::default(),
            reward: 0.0,
            done: Done::Running,
        })
    }

    /// Sends one message and returns its answer's `data`; an error frame is the env error it
    /// stands for.
    fn ask(&mut self, message: Value) -> Result<Value, EnvError> {
        let text = match self.exchange(&message) {
            Ok(text) => text,
            Err(e) => {
                self.broken = true;
                return Err(e);
            }
        };
        self.answer(&text)
    }

    fn exchange(&mut self, message: &Value) -> Result<tungstenite::Utf8Bytes, EnvError> {
        let lost = |e: tungstenite::Error| {
            remote(
                ErrorKind::Episode,
                format!("the env server connection failed: {e}"),
            )
        };
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(lost)?;
        loop {
            match self.socket.read().map_err(lost)? {
                Message::Text(t) => return Ok(t),
                Message::Close(_) => {
                    return Err(remote(
                        ErrorKind::Episode,
                        "the env server closed the session",
                    ));
                }
                _ => continue,
            }
        }
    }

    fn answer(&mut self, text: &str) -> Result<Value, EnvError> {
        let answer: Value = serde_json::from_str(text)
            .map_err(|e| remote(ErrorKind::Episode, format!("the server sent bad JSON: {e}")))?;
        if answer["type"] == "error" {
            let data = &answer["data"];
            let message = data["message"].as_str().unwrap_or("no message").to_owned();
            if data["code"] == "SESSION_ERROR" {
                self.broken = true;
            }
            let kind = match (data["kind"].as_str(), data["code"].as_str()) {
                (Some(k), _) => serde_json::from_value(json!(k)).unwrap_or(ErrorKind::Other),
                (None, Some("VALIDATION_ERROR")) => ErrorKind::InvalidAction,
                (None, Some("EXECUTION_ERROR")) => ErrorKind::Episode,
                _ => ErrorKind::Other,
            };
            return Err(remote(kind, message));
        }
        Ok(answer["data"].clone())
    }

    fn take_observation(&mut self, data: &Value) -> Observation {
        let o = &data["observation"];
        let content = match o.get("content").and_then(Value::as_str) {
            Some(c) => c.to_owned(),
            None => o.to_string(),
        };
        let info = o
            .get("info")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        self.reward = data["reward"].as_f64().unwrap_or(0.0);
        self.done = match (
            data["done"].as_bool(),
            o.get("ended").and_then(Value::as_str),
        ) {
            (Some(true), Some("truncated")) => Done::Truncated,
            (Some(true), _) => Done::Terminated,
            _ => Done::Running,
        };
        self.last = Observation { content, info };
        self.last.clone()
    }
}

impl Drop for RemoteEnv {
    fn drop(&mut self) {
        let _ = self
            .socket
            .send(Message::text(json!({"type": "close"}).to_string()));
        let _ = self.socket.close(None);
    }
}

impl Env for RemoteEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> sandgym_env_api::Result<Observation> {
        let mut data = json!({"seed": seed, "split": options.split});
        if let Some(task) = &options.task {
            data["task"] = json!(task);
        }
        if options.cycle {
            data["cycle"] = json!(true);
        }
        if !options.extra.is_empty() {
            data["options"] = Value::Object(options.extra.clone());
        }
        if !self.native {
            // Another server knows only the keys of OpenEnv's ResetRequest.
            data = json!({"seed": seed});
        }
        let message = json!({"type": "reset", "data": data});
        let answer = match self.ask(message.clone()) {
            // A session the server ended (idle too long) or a dropped connection: a new one.
            Err(_) if self.broken => {
                self.socket = open(&self.ws, self.timeout)?;
                self.broken = false;
                self.ask(message)?
            }
            answer => answer?,
        };
        let observation = self.take_observation(&answer);
        self.reward = 0.0;
        self.done = Done::Running;
        Ok(observation)
    }

    fn observe(&self) -> Observation {
        self.last.clone()
    }

    fn step(&mut self, action: &Action) -> sandgym_env_api::Result<Observation> {
        let data = match (&action.body, self.native) {
            (_, true) => serde_json::to_value(action).expect("an action serialises"),
            (ActionBody::ToolCall(call), false) => json!({
                "type": "call_tool", "tool_name": call.tool_name, "arguments": call.parameters,
            }),
            // An OpenEnv env built on MCP tools has no final response: its episodes end when
            // the env says so. Sent anyway, such servers close the session; refused here, the
            // agent reads why and the session goes on.
            (ActionBody::Response(_), false) => {
                return Err(EnvError::ActionRejected {
                    reason: format!(
                        "this env takes tool calls only (an OpenEnv MCP env); call one of: {}",
                        self.spec
                            .tools
                            .iter()
                            .map(|t| t.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        };
        let answer = self.ask(json!({"type": "step", "data": data}))?;
        Ok(self.take_observation(&answer))
    }

    fn reward(&self) -> f64 {
        self.reward
    }

    fn done(&self) -> Done {
        self.done
    }
}
