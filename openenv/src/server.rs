//! The server: axum routes for OpenEnv's HTTP endpoints and its `/ws` sessions, with the
//! limits on sessions, idle time and message size.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use sandgym_env_api::{BoxEnv, EnvSpec};

use crate::error::ServeError;
use crate::protocol::{
    ErrorCode, ResetRequest, StepRequest, WireError, frame, only_keys, rpc, rpc_error,
};
use crate::schema::{action_schema, observation_schema, state_schema};
use crate::session::Session;

/// Makes one env instance: one per WebSocket session, one per stateless HTTP request.
pub type EnvFactory = Arc<dyn Fn() -> sandgym_env_api::Result<BoxEnv> + Send + Sync>;

/// The server's settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The address to bind (`host:port`; port 0 picks a free one).
    pub listen: String,
    /// Most concurrent WebSocket sessions; one more is answered `CAPACITY_REACHED`.
    pub max_sessions: usize,
    /// A session with no message for this long is ended with `SESSION_ERROR`.
    pub idle_timeout: Duration,
    /// The largest WebSocket message or HTTP body accepted, in bytes.
    pub max_message_bytes: usize,
    /// The seed of the first reset that names none (each later one takes the next).
    pub first_seed: u64,
    /// Threads that run env calls (resets, steps, making envs); calls beyond them wait their
    /// turn. Env calls are CPU-bound, so more threads than cores only add switching: on 2
    /// cores, with tokio's default of up to 512, `bench env-server`'s sql-agent at 64
    /// sessions fell in some runs to about a fifth of its bounded throughput, at p99 0.8 s. A
    /// few per core leaves room for calls that run long (a guest at its CPU deadline)
    /// without stalling the rest.
    pub env_threads: usize,
}

/// [`ServeConfig::env_threads`]' default: four per core the process may use.
pub fn default_env_threads() -> usize {
    4 * std::thread::available_parallelism().map_or(1, usize::from)
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8000".into(),
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(300),
            max_message_bytes: 1 << 20,
            first_seed: 0,
            env_threads: default_env_threads(),
        }
    }
}

impl ServeConfig {
    /// Checks the limits are in range (as [`EnvServer::start`] does).
    pub fn validate(&self) -> Result<(), ServeError> {
        let bad = |m: String| Err(ServeError::Config(m));
        if self.max_sessions == 0 || self.max_sessions > 1 << 20 {
            return bad(format!(
                "max_sessions {} is not in 1..=1048576",
                self.max_sessions
            ));
        }
        if !(1024..=(64 << 20)).contains(&self.max_message_bytes) {
            return bad(format!(
                "max_message_bytes {} is not in 1 KiB..=64 MiB",
                self.max_message_bytes
            ));
        }
        if !(1..=4096).contains(&self.env_threads) {
            return bad(format!(
                "env_threads {} is not in 1..=4096",
                self.env_threads
            ));
        }
        if self.idle_timeout.is_zero() || self.idle_timeout > Duration::from_secs(7 * 86_400) {
            return bad(format!(
                "idle_timeout {:?} is not in (0, 7 days]",
                self.idle_timeout
            ));
        }
        Ok(())
    }
}

/// What every handler shares.
pub struct Shared {
    pub(crate) factory: EnvFactory,
    pub(crate) spec: EnvSpec,
    config: ServeConfig,
    active: AtomicUsize,
    seeds: AtomicU64,
}

impl Shared {
    /// The seed of a reset that names none.
    pub(crate) fn next_seed(&self) -> u64 {
        self.seeds.fetch_add(1, Ordering::Relaxed)
    }
}

/// A running env server; dropping it stops it (open sessions are closed).
pub struct EnvServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for EnvServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvServer")
            .field("addr", &self.addr)
            .field("env", &self.shared.spec.id.to_string())
            .finish_non_exhaustive()
    }
}

impl EnvServer {
    /// Makes one env (for its spec), binds `config.listen` and serves in the background.
    pub fn start(factory: EnvFactory, config: ServeConfig) -> Result<Self, ServeError> {
        config.validate()?;
        let spec = factory()?.spec().clone();
        let listener =
            std::net::TcpListener::bind(&config.listen).map_err(|source| ServeError::Bind {
                addr: config.listen.clone(),
                source,
            })?;
        let addr = listener.local_addr().map_err(ServeError::Runtime)?;
        listener
            .set_nonblocking(true)
            .map_err(ServeError::Runtime)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(config.env_threads)
            .thread_name("sandgym-env-server")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let shared = Arc::new(Shared {
            factory,
            spec,
            seeds: AtomicU64::new(config.first_seed),
            config,
            active: AtomicUsize::new(0),
        });
        let app = router(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(ServeError::Runtime)?
        };
        let thread = std::thread::Builder::new()
            .name("sandgym-env-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    });
                    if let Err(e) = served.await {
                        eprintln!("env server stopped: {e}");
                    }
                });
                // Open sessions and env calls in flight end with the runtime.
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .map_err(ServeError::Runtime)?;
        Ok(Self {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The server's base URL (`http://host:port`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The env served.
    pub fn spec(&self) -> &EnvSpec {
        &self.shared.spec
    }

    /// WebSocket sessions open now.
    pub fn active_sessions(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for EnvServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    let limit = shared.config.max_message_bytes;
    Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "healthy"})) }),
        )
        .route("/sessions", get(sessions))
        .route("/metadata", get(metadata))
        .route("/schema", get(schema))
        .route(
            "/spec",
            get(|State(s): State<Arc<Shared>>| async move { axum::Json(s.spec.clone()) }),
        )
        .route("/openapi.json", get(openapi))
        .route("/state", get(http_state))
        .route("/reset", post(http_reset))
        .route("/step", post(http_step))
        .route("/mcp", post(http_mcp))
        .route("/ws", get(ws))
        .fallback(|| async { detail(StatusCode::NOT_FOUND, "Not Found") })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

/// A FastAPI-style error body, as OpenEnv's HTTP endpoints answer.
fn detail(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"detail": message.into()}))).into_response()
}

fn failure(e: WireError) -> Response {
    let status = match e.code {
        ErrorCode::ValidationError | ErrorCode::InvalidJson | ErrorCode::UnknownType => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ErrorCode::CapacityReached | ErrorCode::FactoryError => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ExecutionError | ErrorCode::SessionError => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (
        status,
        axum::Json(json!({"detail": e.message, "code": e.code})),
    )
        .into_response()
}

async fn metadata(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "name": s.spec.id.to_string(),
        "description": s.spec.description,
        "readme_content": Value::Null,
        "version": env!("CARGO_PKG_VERSION"),
        "author": Value::Null,
        "documentation_url": Value::Null,
    }))
    .into_response()
}

async fn schema(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "action": action_schema(&s.spec),
        "observation": observation_schema(&s.spec),
        "state": state_schema(&s.spec),
    }))
    .into_response()
}

async fn openapi(State(s): State<Arc<Shared>>) -> Response {
    let answer = |what: &str, schema: Value| json!({"200": {"description": what, "content": {"application/json": {"schema": schema}}}});
    let step_result = json!({"type": "object", "properties": {
        "observation": observation_schema(&s.spec), "reward": {"type": ["number", "null"]},
        "done": {"type": "boolean"}}});
    let body = |schema: Value| json!({"content": {"application/json": {"schema": schema}}});
    axum::Json(json!({
        "openapi": "3.1.0",
        "info": {
            "title": format!("sandgym {}", s.spec.id),
            "description": s.spec.description,
            "version": env!("CARGO_PKG_VERSION"),
        },
        "paths": {
            "/reset": {"post": {"summary": "Reset a fresh env", "requestBody": body(json!({"type": "object"})),
                "responses": answer("the first observation", step_result.clone())}},
            "/step": {"post": {"summary": "Reset a fresh env and take one action",
                "requestBody": body(json!({"type": "object", "properties": {"action": action_schema(&s.spec)}, "required": ["action"]})),
                "responses": answer("the observation after the action", step_result)}},
            "/state": {"get": {"summary": "The state of a fresh env", "responses": answer("state", state_schema(&s.spec))}},
            "/health": {"get": {"summary": "Health", "responses": answer("healthy", json!({"type": "object"}))}},
            "/metadata": {"get": {"summary": "The env's name and description", "responses": answer("metadata", json!({"type": "object"}))}},
            "/schema": {"get": {"summary": "JSON Schemas of action, observation and state", "responses": answer("schemas", json!({"type": "object"}))}},
            "/mcp": {"post": {"summary": "MCP JSON-RPC: tools/list, tools/call", "responses": answer("a JSON-RPC response", json!({"type": "object"}))}},
            "/ws": {"get": {"summary": "A WebSocket session: reset, step, state, mcp and close messages", "responses": {"101": {"description": "switching protocols"}}}},
        },
    }))
    .into_response()
}

/// Runs `f` on a fresh session on the blocking pool (OpenEnv's HTTP endpoints are stateless).
async fn fresh<T: Send + 'static>(
    s: &Arc<Shared>,
    f: impl FnOnce(&mut Session) -> Result<T, WireError> + Send + 'static,
) -> Result<T, WireError> {
    let s = s.clone();
    tokio::task::spawn_blocking(move || f(&mut Session::open(s)?))
        .await
        .map_err(|e| {
            WireError::new(
                ErrorCode::ExecutionError,
                format!("the request failed: {e}"),
            )
        })?
}

/// The JSON object of a body (`None` for an empty one).
fn body_object(body: &Bytes) -> Result<Option<Map<String, Value>>, WireError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        Ok(_) => Err(WireError::invalid("the body must be a JSON object")),
        Err(e) => Err(WireError::invalid(format!("the body is not JSON: {e}"))),
    }
}

async fn http_state(State(s): State<Arc<Shared>>) -> Response {
    match fresh(&s, |session| Ok(session.state())).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => failure(e),
    }
}

async fn http_reset(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let request =
        match body_object(&body).and_then(|o| ResetRequest::parse(o.map(Value::Object).as_ref())) {
            Ok(r) => r,
            Err(e) => return failure(e),
        };
    match fresh(&s, move |session| session.reset(request)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => failure(e),
    }
}

/// `{"action": ..., "timeout_s"?, "request_id"?, <reset keys>?}`: a fresh env is reset (with
/// the reset keys given) and takes the action.
async fn http_step(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let parsed = body_object(&body).and_then(|o| {
        let mut o = o.ok_or_else(|| WireError::invalid("a step needs a body with `action`"))?;
        let action = o
            .remove("action")
            .ok_or_else(|| WireError::invalid("a step needs `action`"))?;
        o.remove("timeout_s");
        o.remove("request_id");
        Ok((
            StepRequest::parse(&action)?,
            ResetRequest::parse(Some(&Value::Object(o)))?,
        ))
    });
    let (step, reset) = match parsed {
        Ok(p) => p,
        Err(e) => return failure(e),
    };
    match fresh(&s, move |session| {
        session.reset(reset)?;
        session.step(step)
    })
    .await
    {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => failure(e),
    }
}

/// MCP over HTTP: `tools/list`, or `tools/call` on a fresh env reset with `params.seed`.
async fn http_mcp(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let answer = rpc_error(Value::Null, rpc::PARSE_ERROR, format!("not JSON: {e}"));
            return axum::Json(answer).into_response();
        }
    };
    let seed = request.pointer("/params/seed").and_then(Value::as_u64);
    let calls = request.get("method").and_then(Value::as_str) == Some("tools/call");
    let answer = fresh(&s, move |session| {
        if calls {
            let reset = ResetRequest {
                seed,
                ..ResetRequest::default()
            };
            if let Err(e) = session.reset(reset) {
                let id = request.get("id").cloned().unwrap_or(Value::Null);
                return Ok(rpc_error(id, rpc::INTERNAL_ERROR, e.message));
            }
        }
        Ok(session.mcp(&request))
    })
    .await;
    match answer {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => {
            axum::Json(rpc_error(Value::Null, rpc::INTERNAL_ERROR, e.message)).into_response()
        }
    }
}

async fn ws(State(s): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    let limit = s.config.max_message_bytes;
    upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| session_loop(s, socket))
}

/// A session's place in the server's count; leaving frees it.
struct Slot(Arc<Shared>);

impl Slot {
    fn take(s: &Arc<Shared>) -> Option<Self> {
        let before = s.active.fetch_add(1, Ordering::SeqCst);
        if before >= s.config.max_sessions {
            s.active.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Self(s.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn error_frame(e: &WireError) -> Value {
    json!({"type": "error", "data": e.to_data()})
}

/// `GET /sessions` (a sandgym extension, like `/spec`): the WebSocket sessions held now and
/// the most allowed. A session's slot is given back a moment after its socket closes, so a
/// client about to fill the server can wait here until the last one's sessions are gone.
async fn sessions(State(s): State<Arc<Shared>>) -> axum::Json<Value> {
    let max = s.config.max_sessions;
    axum::Json(json!({
        "active_sessions": s.active.load(Ordering::SeqCst).min(max),
        "max_sessions": max,
    }))
}

async fn send(socket: &mut WebSocket, frame: &Value) -> bool {
    socket.send(Message::text(frame.to_string())).await.is_ok()
}

async fn session_loop(s: Arc<Shared>, mut socket: WebSocket) {
    let Some(_slot) = Slot::take(&s) else {
        let max = s.config.max_sessions;
        let frame = json!({"type": "error", "data": {
            "message": format!("the server holds its most sessions ({max}); try again later"),
            "code": ErrorCode::CapacityReached,
            "active_sessions": s.active.load(Ordering::SeqCst).min(max),
            "max_sessions": max,
        }});
        send(&mut socket, &frame).await;
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    let opened = {
        let s = s.clone();
        tokio::task::spawn_blocking(move || Session::open(s)).await
    };
    let mut session = match opened {
        Ok(Ok(session)) => Some(Box::new(session)),
        Ok(Err(e)) => {
            send(&mut socket, &error_frame(&e)).await;
            let _ = socket.send(Message::Close(None)).await;
            return;
        }
        Err(e) => {
            let e = WireError::new(
                ErrorCode::FactoryError,
                format!("making the env failed: {e}"),
            );
            send(&mut socket, &error_frame(&e)).await;
            return;
        }
    };
    loop {
        let message = match tokio::time::timeout(s.config.idle_timeout, socket.recv()).await {
            Err(_) => {
                let e = WireError::new(
                    ErrorCode::SessionError,
                    format!(
                        "no message for {:?}: the session is closed",
                        s.config.idle_timeout
                    ),
                );
                send(&mut socket, &error_frame(&e)).await;
                let _ = socket.send(Message::Close(None)).await;
                break;
            }
            // The client left, or broke the protocol (a message over the size limit, bad UTF-8).
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(m))) => m,
        };
        let text = match message {
            Message::Text(t) => t,
            Message::Binary(_) => {
                let e = WireError::new(
                    ErrorCode::InvalidJson,
                    "binary frames are not understood: send JSON text frames",
                );
                if !send(&mut socket, &error_frame(&e)).await {
                    break;
                }
                continue;
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let (reply, close) = match handle(&s, &mut session, text.as_str()).await {
            Ok(Some(reply)) => (reply, false),
            Ok(None) => break,
            Err(e) => (error_frame(&e), false),
        };
        if !send(&mut socket, &reply).await || close {
            break;
        }
    }
}

/// Runs `f` on the session on the blocking pool; a session lost to a failed task is made
/// again on the next message.
async fn on_session<T: Send + 'static>(
    s: &Arc<Shared>,
    session: &mut Option<Box<Session>>,
    f: impl FnOnce(&mut Session) -> T + Send + 'static,
) -> Result<T, WireError> {
    let current = session.take();
    let s = s.clone();
    // Making a fresh env runs here too, not on the async workers: it can take the guest's
    // whole start-up budget.
    let joined = tokio::task::spawn_blocking(move || {
        let mut current = match current {
            Some(current) => current,
            None => Box::new(Session::open(s)?),
        };
        let out = f(&mut current);
        Ok((current, out))
    })
    .await;
    match joined {
        Ok(Ok((current, out))) => {
            *session = Some(current);
            Ok(out)
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(WireError::new(
            ErrorCode::ExecutionError,
            format!("the request failed ({e}); the next one gets a fresh env"),
        )),
    }
}

/// One text frame's reply (`None` for `close`).
async fn handle(
    s: &Arc<Shared>,
    session: &mut Option<Box<Session>>,
    text: &str,
) -> Result<Option<Value>, WireError> {
    let (kind, object) = frame(text)?;
    let observation = |data: Value| Some(json!({"type": "observation", "data": data}));
    match kind.as_str() {
        "reset" => {
            only_keys(&object, &["data"])?;
            let request = ResetRequest::parse(object.get("data"))?;
            let data = on_session(s, session, move |x| x.reset(request)).await??;
            Ok(observation(data))
        }
        "step" => {
            only_keys(&object, &["data"])?;
            let data = object
                .get("data")
                .ok_or_else(|| WireError::invalid("a step needs `data`: the action"))?;
            let request = StepRequest::parse(data)?;
            let data = on_session(s, session, move |x| x.step(request)).await??;
            Ok(observation(data))
        }
        "state" => {
            only_keys(&object, &[])?;
            let state = on_session(s, session, |x| x.state()).await?;
            Ok(Some(json!({"type": "state", "data": state})))
        }
        "mcp" => {
            only_keys(&object, &["data"])?;
            let data = object.get("data").cloned().unwrap_or(Value::Null);
            let answer = on_session(s, session, move |x| x.mcp(&data)).await?;
            Ok(Some(json!({"type": "mcp", "data": answer})))
        }
        "close" => Ok(None),
        other => Err(WireError::new(
            ErrorCode::UnknownType,
            format!("Unknown message type: {other} (known: reset, step, state, mcp, close)"),
        )),
    }
}
