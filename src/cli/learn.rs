//! `sandgym learn`: train a run on live traffic's rewarded rollouts as they arrive, and
//! publish each update for `serve-policy --follow` ([`sandgym::online`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sandgym::online::{LearnConfig, Learner, default_publish_dir};
use sandgym::policy::CpuTrain;

/// Options of `sandgym learn`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run to continue (made by `sandgym train` or `sandgym sft`); its checkpoint is
    /// saved after every update.
    #[arg(long)]
    run: PathBuf,
    /// The recording proxy's trace database.
    #[arg(long)]
    traces: PathBuf,
    /// Where versions are published (default: RUN/versions).
    #[arg(long)]
    publish: Option<PathBuf>,
    /// Rewarded rollouts per update.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Milliseconds between looks at the trace store while waiting for a batch.
    #[arg(long, default_value_t = 200)]
    poll_ms: u64,
    /// Stop after this many updates (default: run until stopped).
    #[arg(long)]
    updates: Option<u32>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let publish = args
        .publish
        .clone()
        .unwrap_or_else(|| default_publish_dir(&args.run));
    let mut learner = Learner::<CpuTrain>::for_run(
        &args.run,
        LearnConfig {
            traces: args.traces.clone(),
            publish: publish.clone(),
            batch: args.batch,
            // serve-policy decodes under the default limits.
            limits: Default::default(),
        },
    )?;
    eprintln!(
        "learning from {} in batches of {}; versions go to {}",
        args.traces.display(),
        args.batch,
        publish.display()
    );
    let done = Arc::new(AtomicBool::new(false));
    let mut made = 0u32;
    let limit = args.updates;
    learner.follow(
        Duration::from_millis(args.poll_ms.max(1)),
        || done.load(Ordering::Relaxed),
        |step| {
            made += 1;
            println!(
                "{}",
                serde_json::to_string(step).expect("a step serialises")
            );
            eprintln!(
                "published {}: {} rollouts, mean reward {:.3}, {:.1} s",
                step.version, step.rollouts, step.reward_mean, step.seconds
            );
            if limit.is_some_and(|l| made >= l) {
                done.store(true, Ordering::Relaxed);
            }
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
