//! The `sandgym` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// mimalloc instead of the system allocator: a training pass allocates and frees tensors of
/// megabytes to hundreds of megabytes by the thousand, which glibc's malloc hands back to the
/// kernel (mmap/munmap) and then faults in, zeroed, again (measured: 7% of a pass's CPU time in
/// clearing pages); mimalloc keeps and reuses them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Make a new env crate of one's own (`sandgym new env NAME`).
    New(cli::new::Args),
    /// Train a policy on an env: SFT warm-start on the scripted baseline, then RL
    /// (GRPO, PPO, RLOO, DAPO or REINFORCE++).
    Train(cli::train::Args),
    /// Supervised fine-tuning on the scripted baseline's episodes or an Agent Template JSONL.
    Sft(cli::sft::Args),
    /// A policy's success rate and mean reward next to the scripted baseline's.
    Eval(cli::eval::Args),
    /// Serve a policy checkpoint as an OpenAI-compatible chat-completions API.
    ServePolicy(cli::serve::Args),
    /// Serve an env over OpenEnv's protocol (WebSocket sessions, HTTP, MCP tools).
    ServeEnv(cli::serve_env::Args),
    /// Record the model calls of unmodified harnesses in front of an OpenAI-compatible server.
    Proxy(cli::proxy::Args),
    /// Train the same policy the env way and the proxy way, and report them side by side.
    Compare(cli::compare::Args),
    /// Pretrained models: list the known ones, fetch one into the cache.
    Model(cli::model::Args),
    /// Measure performance figures (`sandgym bench sandbox`).
    Bench(cli::bench::Args),
    /// A web dashboard of a run (curves, episodes, replay, labels), an episodes file or the
    /// proxy's traces.
    View(cli::view::Args),
}

/// Output piped into a reader that stops early (`sandgym bench proxy | head`) ends the
/// process quietly, as for other Unix tools, instead of a panic in `println!`.
fn quiet_broken_pipes() {
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE disposition at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// An error and its causes on one line, each cause once: many errors already show their
/// source in their own message, which `{:#}` would repeat.
fn chain_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

fn main() -> ExitCode {
    quiet_broken_pipes();
    let cli = Cli::parse();
    sandgym::register_builtin_envs();
    let result = match cli.command {
        Command::Envs(args) => cli::envs::run(&args),
        Command::Run(args) => cli::run::run(&args),
        Command::Check(args) => cli::check::run(&args),
        Command::New(args) => cli::new::run(&args),
        Command::Train(args) => cli::train::run(&args),
        Command::Sft(args) => cli::sft::run(&args),
        Command::Eval(args) => cli::eval::run(&args),
        Command::ServePolicy(args) => cli::serve::run(&args),
        Command::ServeEnv(args) => cli::serve_env::run(&args),
        Command::View(args) => cli::view::run(&args),
        Command::Proxy(args) => cli::proxy::run(&args),
        Command::Compare(args) => cli::compare::run(&args),
        Command::Bench(args) => cli::bench::run(&args),
        Command::Model(args) => cli::model::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", chain_text(&e));
            ExitCode::FAILURE
        }
    }
}
