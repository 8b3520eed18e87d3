//! `sandgym view`: a local web dashboard over a run directory, a JSONL file of episodes, or the
//! recording proxy's trace store — the curves of a run (live while it trains), its episodes
//! with their steps and tokens, a replay of any episode in the sandbox, the scripted baseline
//! on the same task and seed, and labels that feed `sandgym sft --data labels.jsonl`.
//!
//! The server is axum on a small tokio runtime of its own; the page (plain HTML, CSS and a
//! script, with the uPlot charting library vendored under `assets/vendor/uplot`) is compiled
//! into the binary, so nothing is fetched from elsewhere. Every request that reads or plays
//! runs on a blocking thread; no input — a malformed request, an unknown episode, a file being
//! written — takes the server down: each answer is JSON, errors as `{"error": "…"}`.

mod api;
mod assets;
pub mod source;
pub mod traces;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use source::{EpisodeSummary, Partial, Source, SourceError, SourceKind};

use crate::EnvTarget;

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The source cannot be read at all.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The server's runtime could not start.
    #[error("the dashboard's server: {0}")]
    Runtime(#[source] std::io::Error),
}

/// How to serve a source.
#[derive(Clone, Debug)]
pub struct ViewConfig {
    /// The address to listen on (`127.0.0.1:8765`; port 0 picks a free one).
    pub listen: String,
    /// Where labels are appended (default: `labels.jsonl` in the run directory, or beside
    /// the file).
    pub labels: Option<PathBuf>,
    /// The env the source's episodes were played on, for replay and the baseline, when the
    /// source does not say (a run directory says; a file's episode ids name a bundled env).
    pub env: Option<EnvTarget>,
}

impl Default for ViewConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8765".into(),
            labels: None,
            env: None,
        }
    }
}

/// A running dashboard; it stops when dropped.
#[derive(Debug)]
pub struct ViewServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ViewServer {
    /// Serves `source` as `config` says.
    pub fn start(source: Source, config: ViewConfig) -> Result<Self, ViewError> {
        let listener =
            std::net::TcpListener::bind(&config.listen).map_err(|source| ViewError::Bind {
                addr: config.listen.clone(),
                source,
            })?;
        let addr = listener.local_addr().map_err(ViewError::Runtime)?;
        listener.set_nonblocking(true).map_err(ViewError::Runtime)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sandgym-view")
            .enable_all()
            .build()
            .map_err(ViewError::Runtime)?;
        let labels = config.labels.clone().unwrap_or_else(|| match source.kind {
            SourceKind::Run => source.path.join(crate::labels::LABELS_FILE),
            _ => source
                .path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(crate::labels::LABELS_FILE),
        });
        let app = api::router(Arc::new(api::App {
            source,
            labels,
            env: config.env,
            loopback: addr.ip().is_loopback(),
        }));
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(ViewError::Runtime)?
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sandgym-view".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = axum::serve(listener, app).with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    });
                    if let Err(e) = served.await {
                        eprintln!("dashboard stopped: {e}");
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .map_err(ViewError::Runtime)?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Serves until the process is stopped.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ViewServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
