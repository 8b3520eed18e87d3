//! `sandgym bench`: runs a benchmark of [`sandgym::bench`] and prints its report, as a table
//! or as JSON.

use std::process::ExitCode;
use std::time::Duration;

use sandgym::bench;
use serde_json::{Map, Value};

/// What to measure.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum What {
    /// The WASM sandbox: step round trip against native, fresh episodes, threads, snapshots.
    Sandbox,
    /// The bundled envs, native and in WASM: reset latency, per-query latency, steps/s; the
    /// SQL env on the music fixture and on generated databases of `--rows` rows (joins,
    /// grouping, nested queries).
    Envs,
    /// The policy on the CPU: generated tokens/s at batch 64 with and without the tool-call
    /// constraint, forward+backward time per token.
    Policy,
    /// The recording proxy: added latency p50/p99 at ~1,000 requests/s against a fast
    /// upstream on loopback, and that no answered call is missing from the store.
    Proxy,
    /// Learning while serving: the proxy's requests/s and latency alone and while a training
    /// run uses the same cores (canned upstream), and the time from a published update to
    /// the first answer of the new version (`--model`, `--rounds`).
    Online,
    /// The policy server: a short request's latency alone and while a batch of long requests
    /// generates, four short requests arriving 10 ms apart (`--model`, `--rounds`).
    Serve,
    /// An env server (OpenEnv's protocol) on loopback: sessions held, requests/s and
    /// round-trip p50/p99 over WebSocket and HTTP, for guess-number and sql-agent at growing
    /// numbers of concurrent sessions.
    EnvServer,
    /// `train` killed with SIGKILL at random moments, then resumed: how many of `--trials`
    /// runs end whole (every iteration logged once, the checkpoint at the last iteration).
    Crash,
}

/// Options of `sandgym bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The benchmark to run.
    what: What,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Seconds per measurement (longer is steadier).
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// Where `bench policy` runs: cpu, or cuda (a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: sandgym::policy::DeviceKind,
    /// `bench env-server`: instead of the latency cases, play this many episodes of each env
    /// over 64 sessions and sample the process's resident memory (a soak).
    #[arg(long)]
    soak: Option<usize>,
    /// `bench env-server`: leave out cases with more concurrent sessions than this.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// `bench envs`: the sizes (rows per large table) of the generated SQL databases.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 10_000, 100_000])]
    rows: Vec<usize>,
    /// `bench envs`: the SQL env's row budget per query on the generated databases (the
    /// env's `max_rows_read`; default, the env's own).
    #[arg(long, default_value_t = sandgym_env_sql::DEFAULT_MAX_ROWS_READ)]
    max_rows_read: u64,
    /// `bench online`: versions published and waited for; `bench serve`: rounds measured.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// `bench crash`: kill-and-resume trials.
    #[arg(long, default_value_t = 20)]
    trials: usize,
    /// `bench crash`: the seed the kill times are drawn from.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Requests per second `bench proxy` sends (and `bench env-server`'s open-loop case).
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// The model `bench policy` (and `bench online`'s swaps) measures: `tiny` (the default), a known pretrained model, a
    /// `.gguf` file or a Hugging Face directory.
    #[arg(long, default_value = sandgym::ModelSource::TINY)]
    model: sandgym::ModelSource,
    /// A Python with torch, transformers, gguf and accelerate: `bench policy` then also runs
    /// `benches/pytorch/policy_bench.py` on the same GGUF model and prints the ratios.
    #[arg(long)]
    reference: Option<std::path::PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let seconds = |at_least: f64| Duration::from_secs_f64(args.seconds.max(at_least));
    let figures = match args.what {
        What::Sandbox => serde_json::to_value(bench::sandbox::run(seconds(0.0))?)?,
        What::Envs => serde_json::to_value(bench::envs::run(
            seconds(0.0),
            &args.rows,
            args.max_rows_read,
        )?)?,
        What::Crash => serde_json::to_value(bench::crash::run(
            &std::env::current_exe()?,
            args.trials,
            args.seed,
        )?)?,
        What::Proxy => serde_json::to_value(bench::proxy::run(seconds(1.0), args.rate)?)?,
        What::Serve => serde_json::to_value(bench::serve::run(
            &args.model,
            args.rounds.clamp(1, 1000),
            8,
            256,
            4,
        )?)?,
        What::Online => serde_json::to_value(bench::online::run(
            &std::env::current_exe()?,
            seconds(1.0),
            args.rate,
            &args.model,
            args.rounds.clamp(1, 1000),
        )?)?,
        What::EnvServer => match args.soak {
            Some(episodes) => serde_json::to_value(bench::env_server::soak(episodes)?)?,
            None => serde_json::to_value(bench::env_server::run(
                seconds(0.1),
                args.max_sessions,
                args.rate,
            )?)?,
        },
        What::Policy => {
            struct Policy<'a>(&'a Args);
            impl sandgym::policy::OnDevice for Policy<'_> {
                type Output = anyhow::Result<bench::policy::PolicyReport>;
                fn run<B: burn::tensor::backend::AutodiffBackend>(
                    self,
                    device: B::Device,
                ) -> Self::Output {
                    let a = self.0;
                    bench::policy::run::<B>(
                        &a.model,
                        a.seconds,
                        a.reference.as_deref(),
                        &device,
                        &a.device.to_string(),
                    )
                }
            }
            serde_json::to_value(args.device.dispatch(Policy(args))??)?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else if let Value::Object(figures) = &figures {
        print_table(figures);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(figures: &Map<String, Value>) {
    fn rows(table: &mut comfy_table::Table, prefix: &str, figures: &Map<String, Value>) {
        for (k, v) in figures {
            match v {
                Value::Object(inner) => rows(table, &format!("{prefix}{k}."), inner),
                other => {
                    table.add_row(vec![format!("{prefix}{k}"), other.to_string()]);
                }
            }
        }
    }
    let mut table = sandgym::table::new(&["figure", "value"]);
    rows(&mut table, "", figures);
    println!("{table}");
}
