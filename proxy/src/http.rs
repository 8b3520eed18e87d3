//! A small HTTP/1.1 server for the two servers here, and OpenAI-style error answers.
//!
//! One thread per connection (up to a cap), keep-alive, bodies framed by `Content-Length`
//! (a chunked request body gets a 411), headers parsed by `httparse`. A request is handled on
//! its connection's thread, so a call costs no hand-off between threads. Malformed requests
//! get a 400 and the connection is closed; nothing a client sends can panic the server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{ProxyError, Result};

/// Largest request body accepted (bytes).
pub const MAX_BODY: usize = 16 << 20;
/// Largest request head (request line and headers) accepted (bytes).
const MAX_HEAD: usize = 64 << 10;
/// Most connections served at once; more are answered 503.
const MAX_CONNECTIONS: usize = 512;
/// How often an idle connection checks whether the server is stopping.
const IDLE_POLL: Duration = Duration::from_millis(500);

/// A parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path with its query string.
    pub path: String,
    /// Header names (lower-cased) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
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
            400 | 411 | 413 | 422 | 431 => "invalid_request_error",
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

/// A running server; stops accepting when dropped (open connections end at their next idle
/// poll).
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and serves every request with `handler`.
    pub fn start(
        addr: &str,
        handler: impl Fn(Request) -> Response + Send + Sync + 'static,
    ) -> Result<Self> {
        let listener = TcpListener::bind(addr).map_err(|e| ProxyError::Bind {
            addr: addr.to_owned(),
            reason: e.to_string(),
        })?;
        let local = listener.local_addr().map_err(|e| ProxyError::Bind {
            addr: addr.to_owned(),
            reason: e.to_string(),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let live = Arc::new(AtomicUsize::new(0));
        let accept = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("http-accept-{}", local.port()))
                .spawn(move || accept_loop(&listener, &stop, &handler, &live))
                .map_err(|e| ProxyError::Bind {
                    addr: addr.to_owned(),
                    reason: e.to_string(),
                })?
        };
        Ok(Self {
            addr: local,
            stop,
            accept: Some(accept),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    stop: &Arc<AtomicBool>,
    handler: &Arc<Handler>,
    live: &Arc<AtomicUsize>,
) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let busy = HttpError::new(503, "too many connections");
            let _ = write_response(&mut stream, &busy.into(), false);
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (stop, handler, count) = (stop.clone(), handler.clone(), live.clone());
        let spawned = std::thread::Builder::new()
            .name("http-conn".into())
            .spawn(move || {
                connection(stream, &stop, handler.as_ref());
                count.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // No thread for it: the connection was dropped (closed) with the closure.
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

enum Read1 {
    Request(Request, bool),
    Closed,
    Bad(HttpError),
}

fn connection(stream: TcpStream, stop: &AtomicBool, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(IDLE_POLL));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        match read_request(&mut reader, stop) {
            Read1::Request(request, keep_alive) => {
                let response = handler(request);
                if write_response(&mut writer, &response, keep_alive).is_err() || !keep_alive {
                    return;
                }
            }
            Read1::Closed => return,
            Read1::Bad(e) => {
                let _ = write_response(&mut writer, &e.into(), false);
                return;
            }
        }
    }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn read_request(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Read1 {
    // The head: read until the blank line, polling the stop flag while idle.
    let mut head = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut head) {
            Ok(0) => return Read1::Closed,
            Ok(_) => {
                if head == b"\r\n" {
                    head.clear(); // a stray CRLF between requests
                    continue;
                }
                if head.ends_with(b"\r\n\r\n") {
                    break;
                }
                if head.len() > MAX_HEAD {
                    return Read1::Bad(HttpError::new(431, "request head too large"));
                }
            }
            Err(e) if would_block(&e) => {
                if stop.load(Ordering::SeqCst) {
                    return Read1::Closed;
                }
            }
            Err(_) => return Read1::Closed,
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) | Err(_) => {
            return Read1::Bad(HttpError::bad_request("malformed HTTP request"));
        }
    }
    let method = parsed.method.unwrap_or("").to_owned();
    let path = parsed.path.unwrap_or("").to_owned();
    let http10 = parsed.version == Some(0);
    let headers: Vec<(String, String)> = parsed
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).trim().to_owned(),
            )
        })
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if get("transfer-encoding").is_some() {
        return Read1::Bad(HttpError::new(411, "send the body with a Content-Length"));
    }
    let length = match get("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= MAX_BODY => n,
        Some(Ok(_)) => {
            return Read1::Bad(HttpError::new(413, format!("body over {MAX_BODY} bytes")));
        }
        Some(Err(_)) => return Read1::Bad(HttpError::bad_request("invalid Content-Length")),
    };
    let connection = get("connection").map(str::to_ascii_lowercase);
    let keep_alive = match connection.as_deref() {
        Some(c) if c.contains("close") => false,
        Some(c) if c.contains("keep-alive") => true,
        _ => !http10,
    };
    let mut body = vec![0; length];
    let mut filled = 0;
    while filled < length {
        match reader.read(&mut body[filled..]) {
            Ok(0) => return Read1::Closed,
            Ok(n) => filled += n,
            Err(e) if would_block(&e) => {
                if stop.load(Ordering::SeqCst) {
                    return Read1::Closed;
                }
            }
            Err(_) => return Read1::Closed,
        }
    }
    Read1::Request(
        Request {
            method,
            path,
            headers,
            body,
        },
        keep_alive,
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_response(
    stream: &mut TcpStream,
    response: &Response,
    keep_alive: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: {}\r\n\r\n",
        response.status,
        reason(response.status),
        response.body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    let mut out = Vec::with_capacity(head.len() + response.body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(&response.body);
    stream.write_all(&out)?;
    stream.flush()
}
