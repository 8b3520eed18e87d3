//! The dashboard's HTTP routes: the page's files and a small JSON API.
//!
//! - `GET /api/summary` — what is shown: the source, the run's configuration, problems;
//! - `GET /api/metrics` — `metrics.jsonl` and `eval.jsonl` rows;
//! - `GET /api/episodes` — the episode list (or the proxy's rollouts);
//! - `GET /api/episode?id=…` — one episode whole (or one rollout's calls);
//! - `POST /api/replay?id=…` — the episode's actions played again in the env from its seed;
//! - `POST /api/baseline?id=…` — the scripted baseline on the same task and seed;
//! - `GET /api/labels`, `POST /api/labels` — the labels file;
//! - `GET /api/decisions` — a run's published policy versions and what the following server
//!   did with each (`versions/decisions.jsonl`: staged, promoted, rolled back, refused).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::env_api::{Action, ResetOptions, Trajectory};
use crate::labels::{Label, Verdict, append_label};
use crate::trainer::EpisodeLog;
use crate::{Backend, EnvTarget};

use super::assets::ASSETS;
use super::source::{Partial, Source, SourceKind, for_page, read_jsonl};
use super::traces;

/// What the routes share.
pub(super) struct App {
    pub source: Source,
    pub labels: std::path::PathBuf,
    pub env: Option<EnvTarget>,
    /// Served on a loopback address: requests must name a loopback host.
    pub loopback: bool,
}

/// A JSON answer, or an error as `{"error": "…"}` with its status.
type Answer = Result<Value, (StatusCode, String)>;

fn respond(answer: Answer) -> Response {
    match answer {
        Ok(v) => axum::Json(v).into_response(),
        Err((status, message)) => (status, axum::Json(json!({"error": message}))).into_response(),
    }
}

fn bad(message: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, message.into())
}

fn not_found(message: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, message.into())
}

/// Runs `work` on a blocking thread; a panic in it is an error answer, not a dead server.
async fn blocking(app: Arc<App>, work: impl FnOnce(&App) -> Answer + Send + 'static) -> Response {
    let answer = tokio::task::spawn_blocking(move || work(&app))
        .await
        .unwrap_or_else(|e| {
            Err((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the request failed inside the server: {e}"),
            ))
        });
    respond(answer)
}

pub(super) fn router(app: Arc<App>) -> Router {
    let mut router = Router::new()
        .route("/api/summary", get(summary))
        .route("/api/metrics", get(metrics))
        .route("/api/episodes", get(episodes))
        .route("/api/episode", get(episode))
        .route("/api/replay", axum::routing::post(replay))
        .route("/api/baseline", axum::routing::post(baseline))
        .route("/api/labels", get(labels).post(add_label))
        .route("/api/decisions", get(decisions));
    for asset in ASSETS {
        router = router.route(
            asset.path,
            get(move || async move {
                (
                    [
                        (header::CONTENT_TYPE, asset.content_type),
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    asset.body,
                )
            }),
        );
    }
    router
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(|| async { respond(Err(not_found("no such page"))) })
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            same_origin_only,
        ))
        .with_state(app)
}

/// Refuses what a page of another site could make a browser send here: a request naming a
/// host other than loopback while the dashboard listens on loopback (DNS rebinding), and a
/// POST whose body is not declared JSON (a form or plain-text POST needs no CORS preflight,
/// so any page could send one; a JSON one from another origin is stopped by the browser,
/// since this server answers no preflight).
async fn same_origin_only(
    State(app): State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers();
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (host, content_type) = (text(header::HOST), text(header::CONTENT_TYPE));
    let post = request.method() == axum::http::Method::POST;
    if app.loopback {
        let name = match host.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => host.as_str(),
        };
        if !matches!(name, "localhost" | "127.0.0.1" | "[::1]") {
            return respond(Err((
                StatusCode::FORBIDDEN,
                format!("this dashboard answers requests for localhost, not `{host}`"),
            )));
        }
    }
    if post && !content_type.starts_with("application/json") {
        return respond(Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "POST requests here carry `content-type: application/json`".into(),
        )));
    }
    next.run(request).await
}

/// The `?id=` of a request, whatever else it has.
type Params = Query<std::collections::HashMap<String, String>>;

/// Runs `work` on the request's `?id=` on a blocking thread; no id is a 400.
async fn with_id(
    app: Arc<App>,
    Query(params): Params,
    work: impl FnOnce(&App, String) -> Answer + Send + 'static,
) -> Response {
    match params.get("id").filter(|id| !id.is_empty()).cloned() {
        Some(id) => blocking(app, move |app| work(app, id)).await,
        None => respond(Err(bad("give ?id=EPISODE"))),
    }
}

async fn summary(State(app): State<Arc<App>>) -> Response {
    blocking(app, |app| {
        let (config, problems) = app.source.run_config();
        // A run trained through the recording proxy keeps its traces beside its episodes.
        let traces = (app.source.kind == SourceKind::Run)
            .then(|| crate::trainer::RunDir::new(&app.source.path).traces())
            .filter(|p| p.is_file())
            .map(|p| p.display().to_string());
        Ok(json!({
            "kind": app.source.kind,
            "path": app.source.path.display().to_string(),
            "config": config,
            "traces": traces,
            "labels": app.labels.display().to_string(),
            "problems": problems,
        }))
    })
    .await
}

async fn decisions(State(app): State<Arc<App>>) -> Response {
    blocking(app, |app| {
        let dir = crate::online::default_publish_dir(&app.source.path);
        let (decisions, problems) = match crate::proxy::decisions(&dir) {
            Ok(d) => (d, Vec::new()),
            Err(e) => (Vec::new(), vec![e.to_string()]),
        };
        let versions: Vec<Value> = crate::proxy::published::list(&dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(_, m)| m.ok())
            .map(|m| {
                json!({"version": m.version, "rollouts": m.rollouts.len(),
                       "reward_mean": m.reward_mean, "published_us": m.published_us})
            })
            .collect();
        Ok(json!({"decisions": decisions, "versions": versions, "problems": problems}))
    })
    .await
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    blocking(app, |app| Ok(app.source.metrics())).await
}

async fn episodes(State(app): State<Arc<App>>) -> Response {
    blocking(app, |app| match app.source.kind {
        SourceKind::Traces => {
            let r = traces::rollouts(&app.source.path);
            Ok(json!({"rollouts": r.items, "problems": r.problems}))
        }
        _ => {
            let s = app.source.summaries();
            Ok(json!({"episodes": s.items, "problems": s.problems}))
        }
    })
    .await
}

async fn episode(State(app): State<Arc<App>>, params: Params) -> Response {
    with_id(app, params, move |app, id| match app.source.kind {
        SourceKind::Traces => traces::rollout(&app.source.path, &id).map_err(not_found),
        _ => app
            .source
            .episode(&id)
            .map(|log| for_page(&log))
            .ok_or_else(|| not_found(format!("no episode `{id}`"))),
    })
    .await
}

impl App {
    fn log(&self, id: &str) -> Result<EpisodeLog, (StatusCode, String)> {
        if self.source.kind == SourceKind::Traces {
            return Err(bad(
                "a proxy trace has no env steps to replay or label; view the run that trained on it",
            ));
        }
        self.source
            .episode(id)
            .ok_or_else(|| not_found(format!("no episode `{id}`")))
    }

    /// The env an episode was played on, and how to run it.
    fn target(&self, log: &EpisodeLog) -> Result<(EnvTarget, Backend), (StatusCode, String)> {
        if let Some(t) = &self.env {
            return Ok((t.clone(), Backend::Wasm));
        }
        if self.source.kind == SourceKind::Run {
            let run = crate::RunMeta::read(&self.source.path)
                .map_err(|e| bad(format!("the run's config.json: {e}")))?;
            return Ok((run.run.target(), run.run.backend));
        }
        // A file of records: the env id starts the episode id (`env-id/seed=N`).
        let id = log
            .records
            .first()
            .and_then(|r| r.episode.as_deref())
            .and_then(|e| e.split('/').next())
            .filter(|id| !id.is_empty())
            .ok_or_else(|| bad("the episode does not say its env; start view with --env ID"))?;
        Ok((EnvTarget::new(id), Backend::Wasm))
    }
}

/// The options that reset the env to `log`'s episode again.
fn reset_options(log: &EpisodeLog) -> ResetOptions {
    let mut options = log.options.clone();
    if log.task.is_some() {
        options.task = log.task.clone();
    }
    options
}

async fn replay(State(app): State<Arc<App>>, params: Params) -> Response {
    with_id(app, params, move |app, id| {
        let log = app.log(&id)?;
        let (target, backend) = app.target(&log)?;
        let env_id = target.id().map_err(|e| bad(e.to_string()))?;
        let mut env = target.make(backend).map_err(|e| bad(e.to_string()))?;
        let mut t = Trajectory::new(format!("{env_id}/seed={}", log.seed));
        for r in &log.records {
            t.push(r.clone());
        }
        let result = crate::replay::replay(&mut *env, &t, &reset_options(&log));
        Ok(match result {
            Ok(()) => json!({
                "reproduced": true,
                "steps": log.records.len(),
                "env": env_id,
                "backend": backend,
            }),
            Err(d) => json!({
                "reproduced": false,
                "steps": log.records.len(),
                "env": env_id,
                "backend": backend,
                "step": d.step,
                "what": d.what,
            }),
        })
    })
    .await
}

async fn baseline(State(app): State<Arc<App>>, params: Params) -> Response {
    with_id(app, params, move |app, id| {
        let log = app.log(&id)?;
        let (target, _) = app.target(&log)?;
        let env_id = target.id().map_err(|e| bad(e.to_string()))?;
        if crate::registry::baseline(&env_id).is_none() {
            return Err(not_found(format!("{env_id} has no scripted baseline")));
        }
        let played = crate::play::baseline_episodes(&target, [log.seed], &reset_options(&log))
            .map_err(|e| bad(format!("{e:#}")))?;
        let e = played
            .into_iter()
            .next()
            .ok_or_else(|| bad("the baseline played no episode"))?;
        Ok(json!({
            "records": e.trajectory.records,
            "reward": e.trajectory.total_reward(),
            "success": e.success,
            "error": e.error,
        }))
    })
    .await
}

async fn labels(State(app): State<Arc<App>>) -> Response {
    blocking(app, |app| {
        let read: Partial<Value> = read_jsonl(&app.labels, false);
        Ok(json!({"labels": read.items, "problems": read.problems}))
    })
    .await
}

/// What the page posts to label an episode.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelRequest {
    episode: String,
    verdict: Verdict,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    step: Option<usize>,
    /// Agent Template JSON text of the action that should have been taken at `step`.
    #[serde(default)]
    corrected_action: Option<String>,
}

async fn add_label(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let request: LabelRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return respond(Err(bad(format!("not a label: {e}")))),
    };
    blocking(app, move |app| {
        let log = app.log(&request.episode)?;
        let corrected = match request
            .corrected_action
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            Some(text) => {
                let action = Action::from_json(text)
                    .map_err(|e| bad(format!("the corrected action: {e}")))?;
                // Checked against the env's tools when the env is known.
                let spec = app
                    .target(&log)
                    .and_then(|(t, _)| t.spec().cloned().map_err(|e| bad(e.to_string())));
                if let (Ok(spec), Some(_)) = (spec, action.tool_call()) {
                    crate::env_api::validate_action(&spec.tools, &action)
                        .map_err(|e| bad(format!("the corrected action: {e}")))?;
                }
                Some(serde_json::to_value(&action).expect("an action serialises"))
            }
            None => None,
        };
        let env = app.target(&log).ok().and_then(|(t, _)| t.id().ok());
        let label = Label {
            episode: request.episode.clone(),
            env,
            seed: Some(log.seed),
            task: log.task.clone(),
            verdict: request.verdict,
            reason: request.reason,
            step: request.step.filter(|_| corrected.is_some()),
            corrected_action: corrected,
            records: log.records.clone(),
            labelled_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        append_label(&app.labels, &label).map_err(|e| bad(e.to_string()))?;
        Ok(json!({"saved": app.labels.display().to_string(), "label": label}))
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::super::{Source, ViewConfig, ViewServer};

    fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let _ = s.write_all(request);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        exchange(
            addr,
            format!("GET {path} HTTP/1.1\r\nhost: localhost:1\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
    }

    fn post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> String {
        let mut r = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        exchange(addr, &r)
    }

    #[test]
    fn hostile_requests_get_answers_and_the_server_stays_up() {
        let dir = std::env::temp_dir().join(format!("sandgym-view-api-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("metrics.jsonl"),
            "{\"iter\": 1, \"reward_mean\": 0.5}\n{\"it",
        )
        .unwrap();
        let server = ViewServer::start(
            Source::open(&dir).unwrap(),
            ViewConfig {
                listen: "127.0.0.1:0".into(),
                ..ViewConfig::default()
            },
        )
        .unwrap();
        let addr = server.addr();
        let metrics = get(addr, "/api/metrics");
        assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
        assert!(metrics.contains("still being written"), "{metrics}");
        for (path, status) in [
            ("/api/episode", "400"),
            ("/api/episode?id=", "400"),
            ("/api/episode?id=%ZZ", "404"),
            ("/api/episode?id=../../etc/passwd%230", "404"),
            ("/nope", "404"),
        ] {
            let r = get(addr, path);
            assert!(r.starts_with(&format!("HTTP/1.1 {status}")), "{path}: {r}");
        }
        for body in [
            &b"garbage"[..],
            b"{\"episode\": 1}",
            b"{\"episode\": \"x#0\", \"verdict\": \"good\"}",
        ] {
            let r = post(addr, "/api/labels", body);
            assert!(r.starts_with("HTTP/1.1 4"), "{r}");
            assert!(r.contains("\"error\""), "{r}");
        }
        let huge = vec![b'x'; 8 << 20];
        let r = post(addr, "/api/labels", &huge);
        assert!(r.is_empty() || r.starts_with("HTTP/1.1 4"), "{r}");
        let r = exchange(addr, b"\x00\x01 not http at all\r\n\r\n");
        assert!(!r.starts_with("HTTP/1.1 2"), "{r}");
        let r = post(addr, "/api/replay?id=x%230", b"");
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        assert!(
            !dir.join(crate::labels::LABELS_FILE).exists(),
            "nothing was labelled"
        );
        // No published versions: an empty list; a torn decision log: a problem, not a failure.
        let r = get(addr, "/api/decisions");
        assert!(r.contains("\"decisions\":[]"), "{r}");
        std::fs::create_dir_all(dir.join("versions")).unwrap();
        std::fs::write(
            dir.join("versions/decisions.jsonl"),
            "{\"at_us\": 1, \"action\": \"staged\", \"version\": \"v1\", \"incumbent\": \"v0\", \"reason\": \"r\", \"tallies\": null}\n{\"at",
        )
        .unwrap();
        let r = get(addr, "/api/decisions");
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains("decisions.jsonl"),
            "{r}"
        );
        std::fs::write(
            dir.join("versions/decisions.jsonl"),
            "{\"at_us\": 1, \"action\": \"rolled_back\", \"version\": \"v1\", \"incumbent\": \"v0\", \"reason\": \"worse\", \"tallies\": null}\n",
        )
        .unwrap();
        let r = get(addr, "/api/decisions");
        assert!(r.contains("\"rolled_back\"") && r.contains("worse"), "{r}");
        // Still serving.
        assert!(get(addr, "/api/summary").starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/").contains("sandgym view"));
        drop(server);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
