//! The HTTP/1.1 server of the two servers here (on hyper and tokio), and OpenAI-style error
//! answers.
//!
//! Connections are served by hyper on a single-threaded tokio runtime of the server's own, so
//! thousands of idle or slow connections cost a task each, not a thread. Every read is bounded
//! in size and in time ([`HttpLimits`]): the request head (size, header count, and time to
//! arrive — which also closes idle keep-alive connections), the body (size, time, and the bytes
//! all connections together may hold). A request is answered on tokio's blocking pool, since
//! the handlers block (sampling, upstream calls, SQLite). Malformed requests get a 4xx from
//! hyper or from here; nothing a client sends can panic the server.
//!
//! Measured with `sandgym bench proxy` (release builds, 2 cores, run alternately, three runs
//! each): the proxy's added p50 is 0.22–0.23 ms here against 0.22–0.27 ms on the previous
//! thread-per-connection server (p99 0.34–0.42 against 0.29–0.42). In a debug build a
//! multi-threaded runtime with `block_in_place` measured no better than the blocking pool.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use crate::{ProxyError, Result};

/// Largest request body accepted by default (bytes).
pub const MAX_BODY: usize = 16 << 20;

/// Bounds on what one client, and all of them together, can make a server hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Largest request body (bytes); a larger one gets a 413.
    pub max_body: usize,
    /// Request bodies held at once by all connections together (bytes); a request that would
    /// pass it gets a 503 instead of waiting.
    pub max_buffered_bodies: usize,
    /// Largest request head (request line and headers, bytes; at least 8 KiB); more gets a 431.
    pub max_head: usize,
    /// Most headers in a request; more gets a 431.
    pub max_headers: usize,
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Time for a request head to arrive, counted from when the connection is ready for it
    /// (so it also closes idle keep-alive connections).
    pub head_timeout: Duration,
    /// Time for a request body to arrive once its head has; a slower body gets a 408.
    pub body_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_body: MAX_BODY,
            max_buffered_bodies: 256 << 20,
            max_head: 64 << 10,
            max_headers: 64,
            max_connections: 4096,
            head_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// A parsed request.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path with its query string.
    pub path: String,
    /// Header names (lower-cased) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Set once the client has gone before its answer (a handler may stop working for it).
    pub gone: Gone,
}

/// Whether a request's client has gone: its connection closed before the answer was sent.
#[derive(Clone, Debug, Default)]
pub struct Gone(Arc<AtomicBool>);

impl Gone {
    /// True once the client has gone.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Sets [`Gone`] when dropped armed: hyper drops a request's future when its connection closes
/// before the answer.
struct GoneOnDrop(Option<Gone>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        if let Some(gone) = self.0.take() {
            gone.set();
        }
    }
}

impl Request {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without its query string.
    pub fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }
}

/// An answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// JSON body.
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON answer with `status`.
    pub fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            body: serde_json::to_vec(value).expect("JSON serialises"),
        }
    }

    /// Raw JSON bytes with `status`.
    pub fn bytes(status: u16, body: Vec<u8>) -> Self {
        Self { status, body }
    }
}

/// An HTTP error answer in the OpenAI format.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpError {
    /// Status code.
    pub status: u16,
    /// Message for the caller.
    pub message: String,
}

impl HttpError {
    /// A 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// An error with `status`.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// The JSON body: `{"error": {"message", "type", "code"}}`.
    pub fn body(&self) -> Value {
        let kind = match self.status {
            400 | 408 | 411 | 413 | 422 | 431 => "invalid_request_error",
            404 => "not_found_error",
            405 => "method_not_allowed",
            502..=504 => "upstream_error",
            _ => "server_error",
        };
        json!({"error": {"message": self.message, "type": kind, "code": self.status}})
    }
}

impl From<HttpError> for Response {
    fn from(e: HttpError) -> Self {
        Response::json(e.status, &e.body())
    }
}

/// Parses a JSON body into `T`, with the parser's message on failure.
pub fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, HttpError> {
    serde_json::from_slice(bytes)
        .map_err(|e| HttpError::bad_request(format!("invalid JSON body: {e}")))
}

type Handler = dyn Fn(Request) -> Response + Send + Sync;

/// A running server; stops accepting when dropped (open connections get a second to finish).
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and serves every request with `handler`, under
    /// the default [`HttpLimits`].
    pub fn start(
        addr: &str,
        handler: impl Fn(Request) -> Response + Send + Sync + 'static,
    ) -> Result<Self> {
        Self::start_with(addr, HttpLimits::default(), handler)
    }

    /// [`Server::start`] under `limits`.
    pub fn start_with(
        addr: &str,
        limits: HttpLimits,
        handler: impl Fn(Request) -> Response + Send + Sync + 'static,
    ) -> Result<Self> {
        let bind = |e: std::io::Error| ProxyError::Bind {
            addr: addr.to_owned(),
            reason: e.to_string(),
        };
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(format!("http-{}", local.port()))
            .enable_all()
            .build()
            .map_err(bind)?;
        let (stop, stopped) = watch::channel(false);
        let handler: Arc<Handler> = Arc::new(handler);
        let thread = std::thread::Builder::new()
            .name(format!("http-accept-{}", local.port()))
            .spawn(move || {
                runtime.block_on(accept_loop(listener, limits, handler, stopped));
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(bind)?;
        Ok(Self {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What every connection of a server shares.
struct Shared {
    limits: HttpLimits,
    handler: Arc<Handler>,
    /// One permit per byte of request body held.
    bodies: Arc<Semaphore>,
}

async fn accept_loop(
    listener: std::net::TcpListener,
    limits: HttpLimits,
    handler: Arc<Handler>,
    mut stopped: watch::Receiver<bool>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    // Semaphores hold at most MAX_PERMITS: a larger limit means no limit, not a panic.
    let permits = |n: usize| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS)));
    let connections = permits(limits.max_connections);
    let shared = Arc::new(Shared {
        bodies: permits(limits.max_buffered_bodies),
        limits,
        handler,
    });
    loop {
        let accepted = tokio::select! {
            _ = stopped.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of file descriptors or similar: let connections finish before retrying.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            // Best effort, never waiting on the client: a 503 if its socket takes it at once.
            let busy = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            let _ = stream.try_write(busy.as_bytes());
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (shared, mut stopped) = (shared.clone(), stopped.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(shared.limits.head_timeout)
                .max_buf_size(shared.limits.max_head.max(8192))
                .max_headers(shared.limits.max_headers);
            let service = {
                let shared = shared.clone();
                service_fn(move |request| respond(request, shared.clone()))
            };
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
                }
            }
        });
    }
}

fn reply(response: Response) -> hyper::Response<Full<Bytes>> {
    let mut reply = hyper::Response::new(Full::new(Bytes::from(response.body)));
    *reply.status_mut() = hyper::StatusCode::from_u16(response.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    reply.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    reply
}

fn error(status: u16, message: impl Into<String>) -> hyper::Response<Full<Bytes>> {
    reply(HttpError::new(status, message).into())
}

async fn respond(
    request: hyper::Request<Incoming>,
    shared: Arc<Shared>,
) -> std::result::Result<hyper::Response<Full<Bytes>>, Infallible> {
    let limits = &shared.limits;
    let (parts, body) = request.into_parts();
    // hyper has checked the framing: the exact size is known unless the body is chunked.
    let declared = hyper::body::Body::size_hint(&body)
        .exact()
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if declared.is_some_and(|n| n > limits.max_body) {
        return Ok(error(413, format!("body over {} bytes", limits.max_body)));
    }
    // Hold the body's bytes (a chunked body: the largest allowed) against the server-wide
    // budget while it is read and answered.
    let reserve = declared.unwrap_or(limits.max_body);
    let held = u32::try_from(reserve)
        .ok()
        .and_then(|n| shared.bodies.clone().try_acquire_many_owned(n).ok());
    if held.is_none() {
        return Ok(error(
            503,
            "the server holds too many request bodies; retry",
        ));
    }
    let collected = tokio::time::timeout(
        limits.body_timeout,
        Limited::new(body, limits.max_body).collect(),
    )
    .await;
    let body = match collected {
        Ok(Ok(body)) => body.to_bytes().to_vec(),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Ok(error(413, format!("body over {} bytes", limits.max_body)));
        }
        Ok(Err(e)) => return Ok(error(400, format!("cannot read the body: {e}"))),
        Err(_) => {
            return Ok(error(
                408,
                format!("the body did not arrive within {:?}", limits.body_timeout),
            ));
        }
    };
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).trim().to_owned(),
            )
        })
        .collect();
    let request = Request {
        method: parts.method.as_str().to_owned(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned()),
        headers,
        body,
        gone: Gone::default(),
    };
    let mut guard = GoneOnDrop(Some(request.gone.clone()));
    let handler = shared.handler.clone();
    let response = tokio::task::spawn_blocking(move || handler(request))
        .await
        .unwrap_or_else(|_| HttpError::new(500, "the handler failed").into());
    guard.0 = None;
    drop(held);
    Ok(reply(response))
}
