//! `sandgym serve-policy`: a policy checkpoint behind an OpenAI-compatible API; with
//! `--follow DIR`, new versions a learner publishes there are tried and served as they come.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sandgym::policy::{Cpu, load};
use sandgym::proxy::judge::Judge;
use sandgym::proxy::published::version_policy;
use sandgym::proxy::{
    Express, FollowConfig, FollowState, Follower, PolicyServer, ServerConfig, Trial,
};
use sandgym::trainer::RunDir;

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
    /// Most requests decoded together in one batch (new ones join it between decode steps).
    #[arg(long, default_value_t = 32)]
    max_batch: usize,
    /// Requests of at most this many new tokens (`max_tokens`) that arrive while longer ones
    /// decode run in a batch of their own, stepped ahead of the long batch (0: they join it).
    #[arg(long, default_value_t = Express::default().tokens)]
    express_tokens: usize,
    /// Most decode steps in a row a long batch waits for the short ones' batch.
    #[arg(long, default_value_t = Express::default().wait)]
    express_wait: usize,
    /// The model name served.
    #[arg(long, default_value = "sandgym-policy")]
    model: String,
    /// MiB of finished generations' keys and values kept per version, so that an agent's
    /// next call encodes only what its conversation added (0: none kept, every prompt is
    /// encoded whole).
    #[arg(long, default_value_t = 1024)]
    prefix_cache_mib: usize,
    /// Follow a publish directory (`sandgym learn --publish DIR`): each new version is tried
    /// and served; decisions go to DIR/decisions.jsonl. A restart serves the last promoted
    /// version found there.
    #[arg(long)]
    follow: Option<PathBuf>,
    /// The recording proxy's trace database: with it a new version is tried as a canary
    /// (or shadow) and promoted or rolled back on its rewards; without it, served at once.
    #[arg(long, requires = "follow")]
    traces: Option<PathBuf>,
    /// Share of rollouts the candidate answers during its trial (0 < share <= 1).
    #[arg(long, default_value_t = 0.25)]
    canary: f64,
    /// Try candidates in shadow instead: they answer every request unseen and are compared
    /// with the served answers (promotion is then by hand).
    #[arg(long, requires = "traces")]
    shadow: bool,
    /// Confidence of a verdict over the whole trial: the judge looks at --min-rollouts,
    /// doubling, and --max-rollouts, each look needing 1 - (1 - confidence) / looks.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// Rollouts each version needs in a trial before the judge's first look.
    #[arg(long, default_value_t = 20)]
    min_rollouts: u64,
    /// Candidate rollouts after which a candidate not shown better is rolled back.
    #[arg(long, default_value_t = 400)]
    max_rollouts: u64,
}

/// Runs the subcommand until the process is stopped.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // A restarted follower serves the version it last promoted.
    let resumed = match &args.follow {
        Some(dir) => sandgym::proxy::last_incumbent(dir)?,
        None => None,
    };
    let (dir, version) = match resumed {
        Some(n) => (
            version_policy(args.follow.as_deref().expect("resumed"), n),
            format!("v{n}"),
        ),
        None => (RunDir::new(&args.checkpoint).policy(), "v0".to_owned()),
    };
    let prefix_cache_bytes = crate::cli::prefix_cache_bytes(args.prefix_cache_mib)?;
    let (config, model, tokenizer) = load::checkpoint::<Cpu>(&dir, &Default::default())?;
    let server = PolicyServer::start(
        model.for_inference(),
        tokenizer.clone(),
        ServerConfig {
            listen: format!("{}:{}", args.host, args.port),
            model_name: args.model.clone(),
            max_context: args.max_context,
            max_batch: args.max_batch,
            version: version.clone(),
            prefix_cache_bytes,
            express: Express {
                tokens: args.express_tokens,
                wait: args.express_wait,
            },
            ..ServerConfig::default()
        },
    )?;
    let _follower = match &args.follow {
        Some(follow) => {
            let state = FollowState::new(
                FollowConfig {
                    dir: follow.clone(),
                    traces: args.traces.clone(),
                    trial: if args.shadow {
                        Trial::Shadow
                    } else {
                        Trial::Canary { share: args.canary }
                    },
                    judge: Judge {
                        confidence: args.confidence,
                        min_rollouts: args.min_rollouts,
                        max_rollouts: args.max_rollouts,
                    },
                    poll: Duration::from_millis(100),
                },
                server.controls(),
                (&version, &config, &tokenizer),
            )?;
            Some(Follower::start(state))
        }
        None => None,
    };
    println!("{}/v1", server.url());
    std::io::stdout().flush()?;
    eprintln!(
        "serving {} ({version}) as {:?}; stop with Ctrl-C",
        dir.display(),
        args.model
    );
    loop {
        std::thread::park();
    }
}
