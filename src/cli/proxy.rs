//! `sandgym proxy`: the recording proxy in front of an OpenAI-compatible server.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sandgym::proxy::{Proxy, ProxyConfig};

/// Options of `sandgym proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server to forward to, e.g. `http://127.0.0.1:8000` (paths are appended as called).
    #[arg(long)]
    upstream: String,
    /// Port (0 picks a free one; the address is printed on the first line of stdout).
    #[arg(long, default_value_t = 8001)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The SQLite trace database (created if missing; WAL mode).
    #[arg(long, default_value = "traces.db")]
    db: PathBuf,
}

/// Runs the subcommand until the process is stopped.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut config = ProxyConfig::new(args.upstream.trim_end_matches("/v1"));
    config.listen = format!("{}:{}", args.host, args.port);
    let proxy = Proxy::start(&config, &args.db)?;
    println!("http://{}", proxy.addr());
    std::io::stdout().flush()?;
    eprintln!(
        "recording calls to {} in {}; harnesses use http://{}/rollouts/<id>/v1 (or the \
         x-rollout-id header) and POST /rollouts/<id>/reward at the end",
        args.upstream,
        args.db.display(),
        proxy.addr()
    );
    loop {
        std::thread::park();
    }
}
