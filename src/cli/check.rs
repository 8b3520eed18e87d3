//! `sandgym check`: run `check_env` on a bundled env or a guest file, optionally under a
//! composed reward (how a reward plugin is checked: against an env it rewards).

use std::process::ExitCode;

use anyhow::Context;
use sandgym::env_api::{BoxEnv, CheckReport, check_env};
use sandgym::{Backend, EnvTarget};

/// Options of `sandgym check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A registered env id (`guess-number-v0`) or the path of a guest component (`.wasm`).
    target: String,
    /// Check the native build.
    #[arg(long, conflicts_with = "wasm")]
    native: bool,
    /// Check the WebAssembly build in the sandbox (the default).
    #[arg(long)]
    wasm: bool,
    /// The env's configuration: a JSON object, inline or in a file; `"@PATH"` strings in it
    /// are replaced by that file's contents (e.g. `{"tasks_jsonl": "@tasks.jsonl"}`).
    #[arg(long)]
    env_config: Option<String>,
    /// Check the env under this reward (terms, or a reward plugin's `.wasm`): the plugin must
    /// load, declare a valid name and range, and keep the env's contract.
    #[arg(long, long_help = crate::cli::env_args::REWARD_HELP)]
    reward: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also play every task with the env's demonstrator (its known solution) and count the
    /// actions the constrained decoder's grammar, as the episode narrows it, cannot write: a
    /// task whose answer is outside it cannot be learned (envs with a task list and a
    /// demonstrator: the bundled SQL and support envs, with any `--env-config`).
    #[arg(long)]
    narrowing: bool,
}

/// Runs the subcommand: exit 0 when the env keeps the contract, 1 on hard failures.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let target = EnvTarget::parse(&args.target, args.env_config.as_deref())?
        .with_reward(sandgym::target::parse_reward(args.reward.as_deref())?)?;
    let backend = if args.native {
        Backend::Native
    } else {
        Backend::Wasm
    };
    let made = target.make(backend);
    if made.is_err() && target.is_file() && is_reward_plugin(&args.target) {
        anyhow::bail!(
            "{} is a reward plugin, not an env: check it against an env it rewards, e.g. \
             `sandgym check guess-number-v0 --reward {}`",
            args.target,
            args.target
        );
    }
    let mut env: BoxEnv = made.with_context(|| format!("loading {}", args.target))?;
    let report = check_env(&mut env);
    let coverage = if args.narrowing {
        let coverage = sandgym::narrowing::coverage(&target, backend)?;
        if coverage.is_none() {
            anyhow::bail!(
                "{} has no demonstrator or no task list: --narrowing needs both",
                args.target
            );
        }
        coverage
    } else {
        None
    };
    if args.json {
        let mut json = to_json(&report);
        if let Some(c) = &coverage {
            json["narrowing"] = serde_json::to_value(c)?;
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{report}");
        if let Some(c) = &coverage {
            print!("{c}");
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Whether the file at `path` loads as a reward plugin.
fn is_reward_plugin(path: &str) -> bool {
    sandgym::sandbox::Sandbox::shared()
        .and_then(|s| s.load_reward_file(std::path::Path::new(path)))
        .is_ok()
}

fn to_json(report: &CheckReport) -> serde_json::Value {
    let findings = |list: &[sandgym::env_api::Finding]| {
        list.iter()
            .map(|f| serde_json::json!({"check": f.check, "message": f.message}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "env": report.env_id,
        "ok": report.is_ok(),
        "checks": report.checks_run,
        "failures": findings(&report.failures),
        "warnings": findings(&report.warnings),
    })
}
