//! `sandgym serve-env`: an env (bundled, or a guest component file) behind OpenEnv's protocol.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use sandgym::Backend;
use sandgym::openenv::{EnvFactory, EnvServer, ServeConfig};

/// Options of `sandgym serve-env`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    env: crate::cli::env_args::EnvArgs,
    /// Run a bundled env natively instead of in the WASM sandbox.
    #[arg(long)]
    native: bool,
    /// Port (0 picks a free one; the address is printed on the first line of stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Most concurrent WebSocket sessions (each holds its own env instance).
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Seconds a session may stay silent before it is closed.
    #[arg(long, default_value_t = 300.0)]
    idle_timeout: f64,
    /// The largest message or request body, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_message_bytes: usize,
    /// Threads that run env calls (resets, steps, making envs); others wait their turn
    /// [default: four per core].
    #[arg(long)]
    env_threads: Option<usize>,
}

/// Runs the subcommand until the process is stopped.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if !(args.idle_timeout.is_finite() && args.idle_timeout > 0.0) {
        anyhow::bail!("--idle-timeout must be a positive number of seconds");
    }
    let serve = ServeConfig {
        listen: format!("{}:{}", args.host, args.port),
        max_sessions: args.max_sessions,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout.min(7.0 * 86_400.0)),
        max_message_bytes: args.max_message_bytes,
        first_seed: 0,
        env_threads: args
            .env_threads
            .unwrap_or_else(sandgym::openenv::default_env_threads),
    };
    serve.validate()?;
    // Every session holds a sandbox instance: the shared sandbox's pool has room for all.
    sandgym::sandbox::Sandbox::configure_shared(sandgym::sandbox::SandboxConfig {
        max_instances: u32::try_from(args.max_sessions.saturating_add(16)).unwrap_or(u32::MAX),
        ..Default::default()
    })?;
    let target = args.env.target()?;
    let backend = if args.native {
        Backend::Native
    } else {
        Backend::Wasm
    };
    let factory: EnvFactory = Arc::new(move || target.make(backend));
    let server = EnvServer::start(factory, serve)?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    eprintln!(
        "serving {} over OpenEnv's protocol (ws {}/ws); stop with Ctrl-C",
        server.spec().id,
        server.url().replacen("http", "ws", 1)
    );
    server.wait();
    Ok(ExitCode::SUCCESS)
}
