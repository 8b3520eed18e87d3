//! The `sandgym` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// sandgym: LLM-agent harnesses as sandboxed RL environments.
#[derive(Debug, Parser)]
#[command(name = "sandgym", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the registered environments with their tools and parameter schemas.
    Envs(cli::envs::Args),
    /// Run episodes of an env with an agent; report reward, success and speed.
    Run(cli::run::Args),
    /// Check that an env keeps the Env contract (determinism, invalid actions, termination, …).
    Check(cli::check::Args),
    /// Measure performance figures (`sandgym bench sandbox`).
    Bench(cli::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    sandgym::register_builtin_envs();
    let result = match cli.command {
        Command::Envs(args) => cli::envs::run(&args),
        Command::Run(args) => cli::run::run(&args),
        Command::Check(args) => cli::check::run(&args),
        Command::Bench(args) => cli::bench::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
