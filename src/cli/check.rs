//! `sandgym check`: run `check_env` on a bundled env or a guest file.

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
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand: exit 0 when the env keeps the contract, 1 on hard failures.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let target = EnvTarget::parse(&args.target, args.env_config.as_deref())?;
    let backend = if args.native {
        Backend::Native
    } else {
        Backend::Wasm
    };
    let mut env: BoxEnv = target
        .make(backend)
        .with_context(|| format!("loading {}", args.target))?;
    let report = check_env(&mut env);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report))?);
    } else {
        print!("{report}");
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
