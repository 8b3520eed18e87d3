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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    sandgym::register_builtin_envs();
    let result = match cli.command {
        Command::Envs(args) => cli::envs::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
