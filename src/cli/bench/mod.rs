//! `sandgym bench`: whole-pipeline figures, each against a baseline measured in the same run.

mod crash;
mod env_server;
mod online;
mod proxy;
mod serve;
mod sql_scale;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sandgym::env_api::toy::GuessNumber;
use sandgym::env_api::{Action, DEFAULT_MAX_STEPS, Env, RecordTrajectory, ResetOptions, play};
use sandgym::sandbox::{Guest, Sandbox, SandboxConfig};
use serde_json::{Map, Value, json};

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
    /// generates (`--model`, `--rounds`).
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
    let figures = match args.what {
        What::Sandbox => sandbox(Duration::from_secs_f64(args.seconds))?,
        What::Envs => {
            let mut figures = envs(Duration::from_secs_f64(args.seconds))?;
            figures.extend(sql_scale::run(&args.rows, args.max_rows_read)?);
            figures
        }
        What::Crash => crash::run(args.trials, args.seed)?,
        What::Proxy => proxy::run(Duration::from_secs_f64(args.seconds.max(1.0)), args.rate)?,
        What::Serve => serve::run(&args.model, args.rounds.clamp(1, 1000), 8, 256)?,
        What::Online => online::run(
            Duration::from_secs_f64(args.seconds.max(1.0)),
            args.rate,
            &args.model,
            args.rounds.clamp(1, 1000),
        )?,
        What::EnvServer => match args.soak {
            Some(episodes) => env_server::soak(episodes)?,
            None => env_server::run(
                Duration::from_secs_f64(args.seconds.max(0.1)),
                args.max_sessions,
                args.rate,
            )?,
        },
        What::Policy => {
            struct Policy<'a>(&'a Args);
            impl sandgym::policy::OnDevice for Policy<'_> {
                type Output = anyhow::Result<Map<String, Value>>;
                fn run<B: burn::tensor::backend::AutodiffBackend>(
                    self,
                    device: B::Device,
                ) -> Self::Output {
                    policy::<B>(self.0, &device, &self.0.device.to_string())
                }
            }
            args.device.dispatch(Policy(args))??
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Object(figures))?);
    } else {
        print_table(&figures);
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

/// Per bundled env: the task, a representative query step, and the figures native vs WASM.
fn envs(budget: Duration) -> anyhow::Result<Map<String, Value>> {
    let cases = [
        (
            "sql-agent-v0",
            "shop-count_table-0-0",
            Action::tool(
                "run_sql",
                json!({"query": "SELECT status, COUNT(*) FROM orders GROUP BY status"}),
            ),
        ),
        (
            "customer-service-v0",
            "support-0000",
            Action::tool("search_kb", json!({"query": "refund after return"})),
        ),
    ];
    let mut out = Map::new();
    for (id, task, action) in cases {
        let mut figures = Map::new();
        let mut per_backend = Vec::new();
        for backend in [sandgym::Backend::Native, sandgym::Backend::Wasm] {
            let mut env = sandgym::make_env(id, backend, &Map::new())?;
            let options = ResetOptions::default().with_task(task);
            env.reset(0, &options)?;
            env.step(&action)?;
            let step = per_call(budget, || {
                env.step(&action).expect("step");
            });
            let mut seed = 0;
            let reset = per_call(budget, || {
                seed += 1;
                env.reset(seed, &ResetOptions::default()).expect("reset");
            });
            let episodes = baseline_steps_per_s(env, id, budget)?;
            let name = match backend {
                sandgym::Backend::Native => "native",
                sandgym::Backend::Wasm => "wasm",
            };
            figures.insert(
                name.into(),
                json!({"query_step_us": us(step), "reset_us": us(reset), "baseline_steps_per_s": episodes.round()}),
            );
            per_backend.push((step, episodes));
        }
        let ratio = per_backend[1].0.as_secs_f64() / per_backend[0].0.as_secs_f64();
        figures.insert(
            "query_step_ratio_wasm_over_native".into(),
            json!((ratio * 100.0).round() / 100.0),
        );
        out.insert(id.into(), Value::Object(figures));
    }
    out.insert(
        "sql-agent-v0 real-size SQLite dump".into(),
        sql_scale::sqlite_dump(budget)?,
    );
    Ok(out)
}

/// Env steps per second of baseline episodes (reset included), for about `budget`.
fn baseline_steps_per_s(
    env: sandgym::env_api::BoxEnv,
    id: &str,
    budget: Duration,
) -> anyhow::Result<f64> {
    let mut env = RecordTrajectory::new(env);
    let start = Instant::now();
    let (mut steps, mut seed) = (0usize, 0u64);
    let limit = env.spec().max_episode_steps.unwrap_or(DEFAULT_MAX_STEPS);
    while start.elapsed() < budget {
        let mut agent = sandgym::registry::baseline(id).context("no baseline")?;
        let episode = play(&mut env, &mut agent, seed, &ResetOptions::default(), limit)?;
        anyhow::ensure!(episode.error.is_none(), "{id}: {:?}", episode.error);
        seed += 1;
        steps += episode.steps;
    }
    Ok(steps as f64 / start.elapsed().as_secs_f64())
}

/// Mean time per call of `f`, over rounds of about `budget`, as the median of three rounds.
fn per_call(budget: Duration, mut f: impl FnMut()) -> Duration {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let mut n = 0u32;
        while start.elapsed() < budget / 3 {
            for _ in 0..64 {
                f();
            }
            n += 64;
        }
        rounds.push(start.elapsed() / n);
    }
    rounds.sort();
    rounds[1]
}

fn us(d: Duration) -> Value {
    json!((d.as_secs_f64() * 1e8).round() / 100.0)
}

fn sandbox(budget: Duration) -> anyhow::Result<Map<String, Value>> {
    let config = json!({"max": 1_000_000});
    let config = config.as_object().expect("an object");
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let guest = sandbox.load(
        sandgym::bundled_guest("guess-number-v0")
            .expect("bundled")
            .wasm,
    )?;
    // Guessing 1 keeps the episode going (the secret is almost never 1), so every step is the
    // same valid tool call with the same reply.
    let action = Action::tool("guess", json!({"number": 1})).with_thought("binary search next");
    let seed = 1;
    let mut native = GuessNumber::from_config(config)?;
    let mut wasm = guest.instantiate(config)?;
    native.reset(seed, &ResetOptions::default())?;
    wasm.reset(seed, &ResetOptions::default())?;
    anyhow::ensure!(
        native.step(&action)?.content == "higher",
        "seed {seed} has secret 1"
    );
    wasm.step(&action)?;

    let step_native = per_call(budget, || {
        native.step(&action).expect("native step");
    });
    let step_wasm = per_call(budget, || {
        wasm.step(&action).expect("wasm step");
    });
    // The same step natively plus the JSON work the boundary does (action encoded and decoded,
    // observation encoded and decoded): what remains of the WASM time is the component call
    // itself and the guest's slower code.
    let step_native_json = per_call(budget, || {
        let parsed = Action::from_json(&action.to_json()).expect("valid");
        let obs = native.step(&parsed).expect("native step");
        let text = serde_json::to_string(&obs).expect("serialisable");
        let _: sandgym::env_api::Observation = serde_json::from_str(&text).expect("parses");
    });
    let fresh = per_call(budget, || {
        let mut env = guest.instantiate(config).expect("instantiate");
        env.reset(seed, &ResetOptions::default()).expect("reset");
    });
    let reset_reused = per_call(budget, || {
        wasm.reset(seed, &ResetOptions::default()).expect("reset");
    });
    let snap = wasm.snapshot()?;
    let snapshot = per_call(budget, || {
        wasm.snapshot().expect("snapshot");
    });
    let restore = per_call(budget, || {
        wasm.restore(&snap).expect("restore");
    });
    let threads = 2;
    let steps_per_s = parallel_steps(&guest, config, &action, threads, budget)?;

    let mut out = Map::new();
    out.insert("step_native_us".into(), us(step_native));
    out.insert("step_wasm_us".into(), us(step_wasm));
    out.insert(
        "step_native_with_boundary_json_us".into(),
        us(step_native_json),
    );
    out.insert(
        "step_ratio_wasm_over_native".into(),
        json!((step_wasm.as_secs_f64() / step_native.as_secs_f64() * 100.0).round() / 100.0),
    );
    out.insert("fresh_episode_us".into(), us(fresh));
    out.insert("reset_reused_instance_us".into(), us(reset_reused));
    out.insert("snapshot_us".into(), us(snapshot));
    out.insert("restore_us".into(), us(restore));
    out.insert("snapshot_bytes".into(), json!(snap.len()));
    out.insert(
        format!("steps_per_s_{threads}_threads"),
        json!(steps_per_s.round()),
    );
    Ok(out)
}

fn parallel_steps(
    guest: &Guest,
    config: &Map<String, Value>,
    action: &Action,
    threads: usize,
    budget: Duration,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let total: anyhow::Result<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<u64> {
                    let mut env = guest.instantiate(config)?;
                    env.reset(1, &ResetOptions::default())?;
                    let mut n = 0;
                    while start.elapsed() < budget {
                        env.step(action)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .sum()
    });
    Ok(total? as f64 / start.elapsed().as_secs_f64())
}

/// The process's peak resident memory in MB (Linux; 0 elsewhere).
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// Generation and training throughput of a policy on one device: decode tokens/s at batch 64
/// with and without the tool-call constraint, prefill tokens/s, forward+backward tokens/s
/// (after a first pass, and that first pass), peak memory; with `--reference`, the same
/// figures from PyTorch and the ratios.
fn policy<B: burn::tensor::backend::AutodiffBackend>(
    args: &Args,
    device: &B::Device,
    name: &str,
) -> anyhow::Result<Map<String, Value>> {
    use burn::module::AutodiffModule;
    use burn::tensor::{Int, Tensor, TensorData};
    use sandgym::policy::{
        ActionLimits, SampleConfig, Template, ToolCallGrammar, generate, masked_mean,
        token_logprobs,
    };
    let seconds = args.seconds;
    let tiny = !args.model.is_pretrained();
    let choice = sandgym::training::ModelChoice {
        model: args.model.clone(),
        lora_rank: 0,
    };
    let (config, train, tok) = sandgym::training::initial_policy::<B>(&choice, 0, device)?;
    let model = train.valid();
    let env = sandgym::make_env("sql-agent-v0", sandgym::Backend::Native, &Map::new())?;
    let tools = env.spec().tools.clone();
    let grammar = ToolCallGrammar::new(&tok, &tools, ActionLimits::default())?;
    let template = Template::new(&tok);
    let batch = 64;
    let new_tokens = if seconds < 0.2 { 4 } else { 32 };
    let prompt_len = if tiny { 0 } else { 96 };
    let prompt = {
        let mut p = template
            .prompt(
                &tools,
                "Database `shop`: customers(id, name). Question: How many customers are there?",
            )?
            .ids;
        p.extend(template.generation_prefix());
        p
    };
    let prompts = vec![prompt; batch];
    let sample = SampleConfig {
        max_new_tokens: new_tokens,
        ..SampleConfig::default()
    };
    let rate = |prompts: &[Vec<u32>], constrained: bool| -> anyhow::Result<(f64, Duration)> {
        let mut constraints: Vec<_> = (0..batch)
            .map(|_| constrained.then(|| grammar.matcher()).transpose())
            .collect::<Result<_, _>>()?;
        let start = Instant::now();
        let out = generate(&model, prompts, &mut constraints, u32::MAX, &sample, device)?;
        let tokens: usize = out.iter().map(|s| s.tokens.len()).sum();
        Ok((
            tokens as f64 / start.elapsed().as_secs_f64(),
            start.elapsed(),
        ))
    };
    let free = rate(&prompts, false)?.0;
    let constrained = rate(&prompts, true)?.0;
    let mut out = Map::new();
    out.insert("model".into(), json!(args.model));
    out.insert("batch".into(), json!(batch));
    out.insert("new_tokens_per_sequence".into(), json!(new_tokens));
    out.insert("tokens_per_s_unconstrained".into(), json!(free.round()));
    out.insert(
        "tokens_per_s_constrained".into(),
        json!(constrained.round()),
    );
    let random_ids = |b: usize, t: usize| -> Vec<u32> {
        (0..b * t)
            .map(|i| (i * 7919 % (config.vocab_size - 20) + 10) as u32)
            .collect()
    };
    if prompt_len > 0 {
        // Prefill of batch x prompt_len random tokens, then decode after it: the generation
        // time minus the prefill time, per generated token (as the PyTorch reference does).
        let ids = random_ids(batch, prompt_len);
        let rows: Vec<Vec<u32>> = ids.chunks(prompt_len).map(<[u32]>::to_vec).collect();
        let start = Instant::now();
        let _ = model.forward_last(
            Tensor::<B::InnerBackend, 2, Int>::from_data(
                TensorData::new(
                    ids.iter().map(|&i| i64::from(i)).collect(),
                    [batch, prompt_len],
                ),
                device,
            ),
            Tensor::<B::InnerBackend, 1, Int>::arange(0..prompt_len as i64, device)
                .reshape([1, prompt_len])
                .repeat_dim(0, batch),
            sandgym::policy::causal_bias::<B::InnerBackend>(prompt_len, device)
                .repeat_dim(0, batch),
            None,
        );
        <B::InnerBackend as burn::tensor::backend::Backend>::sync(device)?;
        let prefill = start.elapsed();
        let (_, total) = rate(&rows, false)?;
        let decode = (batch * new_tokens) as f64 / (total.saturating_sub(prefill)).as_secs_f64();
        out.insert("prompt_tokens".into(), json!(prompt_len));
        out.insert(
            "prefill_tokens_per_s".into(),
            json!(((batch * prompt_len) as f64 / prefill.as_secs_f64()).round()),
        );
        out.insert("decode_tokens_per_s".into(), json!(decode.round()));
    }
    // Forward + backward: batch 8 x 128 tokens through the autodiff backend, every weight. The
    // first pass pays what a training run pays once (page faults of fresh buffers, BLAS
    // threads starting); the figure is the mean of the passes after it, as in the PyTorch
    // reference, and the first pass is reported on its own.
    let (b, t) = (8, 128);
    let ids: Vec<i64> = random_ids(b, t).into_iter().map(i64::from).collect();
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [b, t]), device);
    let positions = Tensor::<B, 1, Int>::arange(0..t as i64, device)
        .reshape([1, t])
        .repeat_dim(0, b);
    let pass = || -> anyhow::Result<Duration> {
        let start = Instant::now();
        let fwd = train.forward(
            tokens.clone(),
            positions.clone(),
            sandgym::policy::causal_bias::<B>(t, device).repeat_dim(0, b),
            None,
        );
        let loss = masked_mean(
            token_logprobs(fwd.logits, tokens.clone(), None, 1.0),
            Tensor::ones([b, t], device),
        );
        drop(loss.backward());
        B::sync(device)?;
        Ok(start.elapsed())
    };
    let first = pass()?;
    let warm = (0..FWD_BWD_WARM_PASSES)
        .map(|_| pass())
        .collect::<anyhow::Result<Vec<_>>>()?;
    let elapsed = warm.iter().sum::<Duration>() / FWD_BWD_WARM_PASSES as u32;
    out.insert("fwd_bwd_us_per_token".into(), us(elapsed / (b * t) as u32));
    out.insert(
        "fwd_bwd_tokens_per_s".into(),
        json!(((b * t) as f64 / elapsed.as_secs_f64()).round()),
    );
    out.insert(
        "fwd_bwd_first_pass_tokens_per_s".into(),
        json!(((b * t) as f64 / first.as_secs_f64()).round()),
    );
    out.insert(
        "parameters".into(),
        json!(burn::module::Module::num_params(&model)),
    );
    out.insert("peak_rss_mb".into(), json!(peak_rss_mb()));
    out.insert("device".into(), json!(name));
    if name == "cpu" {
        let gemm = match sandgym::policy::blas::get() {
            Some(b) => format!("OpenBLAS ({})", b.path.display()),
            None => "burn-flex (the gemm crate)".into(),
        };
        out.insert("gemm".into(), json!(gemm));
    }
    if let Some(python) = &args.reference {
        let reference = pytorch_reference(
            python,
            &args.model.to_string(),
            batch,
            prompt_len,
            new_tokens,
        )?;
        for (ours, theirs) in [
            ("prefill_tokens_per_s", "prefill_tokens_per_s"),
            ("decode_tokens_per_s", "decode_tokens_per_s"),
            ("fwd_bwd_tokens_per_s", "fwd_bwd_tokens_per_s"),
            (
                "fwd_bwd_first_pass_tokens_per_s",
                "fwd_bwd_first_pass_tokens_per_s",
            ),
        ] {
            if let (Some(a), Some(b)) = (out[ours].as_f64(), reference[theirs].as_f64()) {
                out.insert(
                    format!("ratio_{ours}"),
                    json!((a / b * 1000.0).round() / 1000.0),
                );
            }
        }
        out.insert("pytorch".into(), reference);
    }
    Ok(out)
}

/// Forward+backward passes timed after the first (here and in the PyTorch reference).
const FWD_BWD_WARM_PASSES: usize = 2;

/// Runs `benches/pytorch/policy_bench.py` with `python` on the GGUF file of `model`.
fn pytorch_reference(
    python: &std::path::Path,
    model: &str,
    batch: usize,
    prompt: usize,
    new_tokens: usize,
) -> anyhow::Result<Value> {
    let gguf = match sandgym::policy::pretrained::KnownModel::find(model) {
        Some(known) => known.fetch()?,
        None if model.ends_with(".gguf") => std::path::PathBuf::from(model),
        None => anyhow::bail!("--reference needs a known model or a .gguf file"),
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/pytorch/policy_bench.py");
    let output = std::process::Command::new(python)
        .arg(&script)
        .arg("--gguf")
        .arg(&gguf)
        .args([
            "--batch",
            &batch.to_string(),
            "--prompt",
            &prompt.max(1).to_string(),
        ])
        .args(["--new-tokens", &new_tokens.to_string()])
        .args(["--train-batch", "8", "--train-len", "128"])
        .args(["--warm-passes", &FWD_BWD_WARM_PASSES.to_string()])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "the PyTorch reference failed (it needs torch, transformers, gguf and accelerate): {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}
