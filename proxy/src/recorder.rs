//! The recording proxy: transparent for the harness, it forwards chat completions to the
//! upstream server and records each call (request, response, token ids, log-probs, timing)
//! under its rollout id; at a rollout's end the caller posts its reward.
//!
//! Routes:
//! - `POST /rollouts/{id}/v1/chat/completions` — a call of rollout `id` (or `POST
//!   /v1/chat/completions` with an `x-rollout-id` header; untagged calls go to rollout
//!   `untagged`);
//! - `POST /rollouts/{id}/reward` with `{"reward": 1.0, "info": {…}}` — returns once the
//!   reward is committed, with the number of calls recorded for the rollout;
//! - anything else under `/v1/` (e.g. `GET /v1/models`) is forwarded unrecorded.
//!
//! A call is forwarded with its rollout id in an `x-rollout-id` header, so a policy server
//! that runs a canary keeps a rollout on one policy version. A reward for a rollout with no
//! recorded call is a 404; one for a rollout a learner has already trained on is a 409.
//!
//! Streaming (`"stream": true`) is refused with a 400: token ids and log-probs are captured
//! from whole responses.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::Result;
use crate::http::{self, HttpError, Request, Response, Server};
use crate::store::{CallRecord, RewardRecord, TraceWriter};

/// Where the proxy listens and forwards.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyConfig {
    /// Upstream base URL, e.g. `http://127.0.0.1:8000` (paths are appended as called).
    pub upstream: String,
    /// Listen address (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Idle connections kept open to the upstream.
    pub upstream_connections: usize,
    /// Upstream timeout.
    pub timeout: Duration,
    /// How long recording a call waits for the trace database while another process holds
    /// its write lock; past it the client gets a 503 (retry) and the call is not counted.
    pub record_timeout: Duration,
}

impl ProxyConfig {
    /// Defaults for `upstream`, on a free loopback port.
    pub fn new(upstream: impl Into<String>) -> Self {
        Self {
            upstream: upstream.into(),
            listen: "127.0.0.1:0".into(),
            upstream_connections: 64,
            timeout: Duration::from_secs(300),
            record_timeout: Duration::from_secs(60),
        }
    }
}

struct State {
    upstream: String,
    agent: ureq::Agent,
    writer: TraceWriter,
    /// Per rollout: the next call's sequence number, and the calls recorded. A sequence number
    /// is taken once the upstream has answered, so a failed forward leaves no gap.
    seqs: Mutex<HashMap<String, (i64, i64)>>,
}

/// A running recording proxy; stops when dropped.
pub struct Proxy {
    server: Server,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.server.addr())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Opens the trace database `db` and starts serving.
    pub fn start(config: &ProxyConfig, db: &Path) -> Result<Self> {
        let writer = TraceWriter::open_waiting(db, config.record_timeout)?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.timeout))
            .max_idle_connections(config.upstream_connections)
            .max_idle_connections_per_host(config.upstream_connections)
            .build()
            .into();
        let state = std::sync::Arc::new(State {
            upstream: config.upstream.trim_end_matches('/').to_owned(),
            agent,
            writer,
            seqs: Mutex::new(HashMap::new()),
        });
        let server = Server::start(&config.listen, move |request| handle(&state, &request))?;
        Ok(Self { server })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The base URL a harness should use for rollout `id` (ends in `/v1`).
    pub fn base_url(&self, rollout: &str) -> String {
        format!("http://{}/rollouts/{rollout}/v1", self.addr())
    }
}

/// Unix time now, in microseconds (0 before the epoch).
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// `/rollouts/{id}/rest` → (`Some(id)`, `/rest`); other paths unchanged.
fn split_rollout(path: &str) -> Result<(Option<String>, String), HttpError> {
    let Some(rest) = path.strip_prefix("/rollouts/") else {
        return Ok((None, path.to_owned()));
    };
    let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    Ok((Some(rollout_id(id)?), format!("/{tail}")))
}

/// A rollout id as given in a path or an `x-rollout-id` header, checked alike.
fn rollout_id(id: &str) -> Result<String, HttpError> {
    if id.is_empty()
        || id.len() > 200
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(HttpError::bad_request(
            "rollout ids are 1-200 characters of [A-Za-z0-9-_.:]",
        ));
    }
    Ok(id.to_owned())
}

fn handle(state: &State, request: &Request) -> Response {
    let started = Instant::now();
    let at_us = now_us();
    let path = request.route();
    let result = (|| {
        let (tagged, rest) = split_rollout(path)?;
        let rollout = match (tagged, request.header("x-rollout-id")) {
            (Some(id), _) => id,
            (None, Some(header)) => rollout_id(header)?,
            (None, None) => "untagged".into(),
        };
        let body = &request.body;
        match (request.method.as_str(), rest.as_str()) {
            ("POST", "/reward") => reward(state, &rollout, body),
            ("POST", "/v1/chat/completions") => {
                let auth = request.header("authorization").map(str::to_owned);
                completion(state, &rollout, &rest, body, auth, at_us, started)
            }
            (method @ ("GET" | "POST"), p) if p.starts_with("/v1/") => {
                forward(state, method, &rest, body, None, None)
                    .map(|(status, body, _)| (status, body))
            }
            (method, _) => Err(HttpError::new(404, format!("no route for {method} {path}"))),
        }
    })();
    match result {
        Ok((status, body)) => Response::bytes(status, body),
        Err(e) => e.into(),
    }
}

fn reward(state: &State, rollout: &str, body: &[u8]) -> Result<(u16, Vec<u8>), HttpError> {
    let value: Value = http::parse(body)?;
    let reward = value
        .get("reward")
        .and_then(Value::as_f64)
        .filter(|r| r.is_finite())
        .ok_or_else(|| HttpError::bad_request("body needs a finite number `reward`"))?;
    let info = value.get("info").cloned().unwrap_or(Value::Null);
    state
        .writer
        .reward(RewardRecord {
            rollout: rollout.to_owned(),
            reward,
            info,
        })
        .map_err(|e| match e {
            crate::ProxyError::UnknownRollout(_) => HttpError::new(404, e.to_string()),
            crate::ProxyError::AlreadyTrained { .. } => HttpError::new(409, e.to_string()),
            other => HttpError::new(500, other.to_string()),
        })?;
    let calls = state
        .seqs
        .lock()
        .expect("seq lock")
        .get(rollout)
        .map_or(0, |&(_, recorded)| recorded);
    let answer = json!({"rollout": rollout, "reward": reward, "calls": calls});
    Ok((200, answer.to_string().into_bytes()))
}

fn forward(
    state: &State,
    method: &str,
    path: &str,
    body: &[u8],
    auth: Option<String>,
    rollout: Option<&str>,
) -> Result<(u16, Vec<u8>, Duration), HttpError> {
    let url = format!("{}{path}", state.upstream);
    let clock = Instant::now();
    let upstream = |e: ureq::Error| HttpError::new(502, format!("upstream {url}: {e}"));
    let mut response = if method == "GET" {
        state.agent.get(&url).call().map_err(upstream)?
    } else {
        let mut call = state
            .agent
            .post(&url)
            .header("content-type", "application/json");
        if let Some(auth) = &auth {
            call = call.header("authorization", auth);
        }
        // The policy server keeps one rollout's calls on one policy version (canary routing).
        if let Some(rollout) = rollout {
            call = call.header("x-rollout-id", rollout);
        }
        call.send(body).map_err(upstream)?
    };
    let status = response.status().as_u16();
    let bytes = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .map_err(upstream)?;
    Ok((status, bytes, clock.elapsed()))
}

/// Most bytes of a request kept in its record when the upstream refused it (not a 2xx): the
/// record still shows what was refused, without storing, say, a 15 MB prompt in full.
const REFUSED_REQUEST_KEPT: usize = 64 << 10;

/// The request text a call's record keeps.
fn kept_request(body: &[u8], status: u16) -> String {
    if (200..300).contains(&status) || body.len() <= REFUSED_REQUEST_KEPT {
        return String::from_utf8_lossy(body).into_owned();
    }
    format!(
        "{}… [{} bytes; the upstream refused it with {status}]",
        String::from_utf8_lossy(&body[..REFUSED_REQUEST_KEPT]),
        body.len()
    )
}

fn ids<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Option<Vec<T>> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn completion(
    state: &State,
    rollout: &str,
    path: &str,
    body: &[u8],
    auth: Option<String>,
    at_us: i64,
    started: Instant,
) -> Result<(u16, Vec<u8>), HttpError> {
    let request: Value = http::parse(body)?;
    if !request.is_object() {
        return Err(HttpError::bad_request("the body must be a JSON object"));
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(HttpError::bad_request(
            "streaming is not supported by the recording proxy: token ids and log-probs are \
             captured from whole responses; send \"stream\": false",
        ));
    }
    let (status, bytes, upstream) = forward(state, "POST", path, body, auth, Some(rollout))?;
    let seq = {
        let mut seqs = state.seqs.lock().expect("seq lock");
        let (next, _) = seqs.entry(rollout.to_owned()).or_insert((0, 0));
        *next += 1;
        *next - 1
    };
    let response: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let choice = response.pointer("/choices/0");
    let logprobs = choice
        .and_then(|c| c.pointer("/logprobs/content"))
        .and_then(Value::as_array)
        // A token without a numeric log-prob makes the call's log-probs unknown (the call is
        // then not trained on), never a made-up 0.0 (probability 1).
        .and_then(|items| {
            items
                .iter()
                .map(|t| t.get("logprob").and_then(Value::as_f64).map(|v| v as f32))
                .collect::<Option<Vec<f32>>>()
        });
    let record = CallRecord {
        rollout: rollout.to_owned(),
        seq,
        at_us,
        path: path.to_owned(),
        status,
        request: kept_request(body, status),
        response: String::from_utf8_lossy(&bytes).into_owned(),
        prompt_ids: ids(response.get("prompt_token_ids")),
        completion_ids: ids(choice.and_then(|c| c.get("token_ids"))),
        logprobs,
        upstream_us: upstream.as_micros() as i64,
        total_us: started.elapsed().as_micros() as i64,
    };
    state.writer.record(record).map_err(|e| {
        HttpError::new(
            503,
            format!("the upstream answered but the call cannot be recorded ({e}); retry"),
        )
    })?;
    if let Some((_, recorded)) = state.seqs.lock().expect("seq lock").get_mut(rollout) {
        *recorded += 1;
    }
    Ok((status, bytes))
}

#[cfg(test)]
mod tests {
    use super::split_rollout;

    #[test]
    fn a_refused_request_is_kept_in_part() {
        let big = vec![b'a'; super::REFUSED_REQUEST_KEPT * 4];
        assert_eq!(super::kept_request(&big, 200).len(), big.len());
        let kept = super::kept_request(&big, 400);
        assert!(
            kept.len() < super::REFUSED_REQUEST_KEPT + 100,
            "{}",
            kept.len()
        );
        assert!(kept.ends_with("[262144 bytes; the upstream refused it with 400]"));
        assert_eq!(super::kept_request(b"{}", 400), "{}");
    }

    #[test]
    fn rollout_prefix_is_split_and_checked() {
        assert_eq!(
            split_rollout("/rollouts/r-1/v1/chat/completions").unwrap(),
            (Some("r-1".into()), "/v1/chat/completions".into())
        );
        assert_eq!(
            split_rollout("/v1/models").unwrap(),
            (None, "/v1/models".into())
        );
        assert_eq!(split_rollout("/rollouts//v1").unwrap_err().status, 400);
        assert_eq!(split_rollout("/rollouts/a%20b/v1").unwrap_err().status, 400);
    }
}
