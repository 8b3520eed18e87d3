//! The `sandgym` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// mimalloc instead of the system allocator: a training pass allocates and frees tensors of
/// megabytes to hundreds of megabytes by the thousand, which glibc's malloc hands back to the
/// kernel (mmap/munmap) and then faults in, zeroed, again (measured: 7% of a pass's CPU time in
/// clearing pages); mimalloc keeps and reuses them (see [`keep_freed_memory`]).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its index in `mi_option_e`, the same in mimalloc 2 and 3;
/// libmimalloc-sys is pinned exactly, and names the options on either side of it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const _: () = assert!(MI_OPTION_PURGE_DELAY + 1 == libmimalloc_sys::mi_option_use_numa_nodes);

/// mimalloc's `arena_purge_mult` option (the multiplier of `purge_delay` for arenas, 10 by
/// default): four after `max_warnings`, which the crate names, past `max_segment_reclaim`,
/// `destroy_on_exit` and `arena_reserve` (`mi_option_e` of mimalloc 3, which the pinned crate
/// builds, and of mimalloc 2 alike).
const MI_OPTION_ARENA_PURGE_MULT: libmimalloc_sys::mi_option_t = 24;
const _: () = assert!(MI_OPTION_ARENA_PURGE_MULT == libmimalloc_sys::mi_option_max_warnings + 4);

/// Tells mimalloc to keep freed memory for 60 s before it returns it to the kernel, in
/// segments and arenas alike (its defaults: 10 ms, and 10× that for arenas). A training pass
/// frees tensors of megabytes to hundreds of megabytes and allocates the same sizes again on
/// the next pass; memory returned to the kernel is faulted in and zeroed again, and on a
/// virtual machine that hands free guest memory back to its host that costs far more than the
/// zeroing: a fresh 2 GB buffer took 7–25 s to touch here against 0.3 s for one just freed.
/// `perf`: `clear_page_erms` was 10% of an SFT pass's CPU time at the defaults and a quarter of
/// `bench policy`'s forward+backward passes with a 10 s delay. `bench policy` on SmolLM2-135M,
/// forward+backward after a first pass: 111 tokens/s with 10 s (arenas 100 s), 140 never
/// purging, 143 with 60 s (arenas 600 s), 135–158 with 60 s for both. Never purging kept a process
/// at its high-water mark for good (a customer-service evaluation of 90 long episodes at once
/// held 23 GB); 60 s for arenas returns whole blocks sooner than the old 100 s did.
/// `MIMALLOC_PURGE_DELAY` or `MIMALLOC_ARENA_PURGE_MULT` in the environment still wins.
fn keep_freed_memory() {
    for (option, value, variable) in [
        (MI_OPTION_PURGE_DELAY, 60_000, "MIMALLOC_PURGE_DELAY"),
        (MI_OPTION_ARENA_PURGE_MULT, 1, "MIMALLOC_ARENA_PURGE_MULT"),
    ] {
        if std::env::var_os(variable).is_none() {
            // SAFETY: mi_option_set writes one of mimalloc's option slots; the indices are in
            // range (checked at compile time against options the crate names).
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

/// OpenBLAS's worker threads spin for about 0.1 s after each product before they sleep
/// (`OPENBLAS_THREAD_TIMEOUT`, 2^28 cycles by default), and between the policy's products the
/// CPU runs the fused elementwise kernels on rayon's threads: on 2 cores the spinning took 18%
/// of a forward+backward pass (`perf`: `blas_thread_server`). 2^4 cycles makes them sleep at
/// once (forward+backward on SmolLM2-135M: 76 → 86 tokens/s). A value in the environment
/// wins; OpenBLAS reads it when the policy loads it (`sandgym_policy::blas`).
fn quiet_blas_threads() {
    if std::env::var_os("OPENBLAS_THREAD_TIMEOUT").is_none() {
        // SAFETY: the first statement of `main`, before any thread exists, so nothing reads
        // the environment concurrently.
        unsafe { std::env::set_var("OPENBLAS_THREAD_TIMEOUT", "4") };
    }
}

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
    /// Serve a policy checkpoint as an OpenAI-compatible chat-completions API (with
    /// `--follow`, the versions a learner publishes: canary, shadow, promotion, rollback).
    ServePolicy(cli::serve::Args),
    /// Learn from live traffic: train a run on the recording proxy's rewarded rollouts as
    /// they arrive and publish each update for `serve-policy --follow`.
    Learn(cli::learn::Args),
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
    quiet_blas_threads();
    keep_freed_memory();
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
        Command::Learn(args) => cli::learn::run(&args),
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
