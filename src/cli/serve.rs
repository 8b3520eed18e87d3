//! `sandgym serve-policy`: a policy checkpoint behind an OpenAI-compatible API.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sandgym::policy::{Cpu, checkpoint};
use sandgym::proxy::{PolicyServer, ServerConfig};
use sandgym::trainer::policy_dir;

/// Options of `sandgym serve-policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A run directory (its last checkpoint) or a policy checkpoint directory.
    #[arg(long)]
    checkpoint: PathBuf,
    /// Port (0 picks a free one; the address is printed on the first line of stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Most prompt tokens accepted.
    #[arg(long, default_value_t = 4096)]
    max_context: usize,
    /// Most requests generated in one batch.
    #[arg(long, default_value_t = 32)]
    max_batch: usize,
    /// The model name served.
    #[arg(long, default_value = "sandgym-policy")]
    model: String,
}

/// Runs the subcommand until the process is stopped.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (_, model, tokenizer) =
        checkpoint::load::<Cpu>(&policy_dir(&args.checkpoint), &Default::default())?;
    let server = PolicyServer::start(
        model.for_inference(),
        tokenizer,
        ServerConfig {
            listen: format!("{}:{}", args.host, args.port),
            model_name: args.model.clone(),
            max_context: args.max_context,
            max_batch: args.max_batch,
            ..ServerConfig::default()
        },
    )?;
    println!("{}/v1", server.url());
    std::io::stdout().flush()?;
    eprintln!(
        "serving {} as {:?}; stop with Ctrl-C",
        args.checkpoint.display(),
        args.model
    );
    loop {
        std::thread::park();
    }
}
