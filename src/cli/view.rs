//! `sandgym view`: the web dashboard over a run directory, an episodes file or a trace store.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sandgym::view::{Source, ViewConfig, ViewServer};

/// Options of `sandgym view`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run directory (curves and episodes, live while it trains), a JSONL file of Agent
    /// Template records or episode logs, or the recording proxy's `traces.db`.
    source: PathBuf,
    /// Port (0 picks a free one; the page's URL is printed on the first line of stdout).
    #[arg(long, default_value_t = 8765)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Where labels go (default: `labels.jsonl` in the run directory, or beside the file).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// The env the episodes were played on, for replay and the baseline, when the source does
    /// not say (a run directory does): a registered id or a guest component (`.wasm`).
    #[arg(long)]
    env: Option<String>,
    /// The env's configuration (with `--env`): a JSON object, inline or in a file.
    #[arg(long, requires = "env")]
    env_config: Option<String>,
}

/// Runs the subcommand until the process is stopped.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let source = Source::open(&args.source)?;
    let env = match &args.env {
        Some(env) => Some(sandgym::EnvTarget::parse(env, args.env_config.as_deref())?),
        None => None,
    };
    let server = ViewServer::start(
        source,
        ViewConfig {
            listen: format!("{}:{}", args.host, args.port),
            labels: args.labels.clone(),
            env,
        },
    )?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    eprintln!(
        "showing {} at {}; stop with Ctrl-C",
        args.source.display(),
        server.url()
    );
    server.wait();
    Ok(ExitCode::SUCCESS)
}
