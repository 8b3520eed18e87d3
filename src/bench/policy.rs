//! `sandgym bench policy`: a policy's generation and training throughput on one device
//! ([`PolicyReport`]), optionally beside PyTorch's on the same model.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{peak_rss_mb, us};
use crate::ModelSource;

/// What `bench policy` measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyReport {
    /// The model.
    pub model: ModelSource,
    /// Sequences generated at once.
    pub batch: usize,
    /// Tokens generated per sequence.
    pub new_tokens_per_sequence: usize,
    /// Generated tokens per second without the tool-call constraint.
    pub tokens_per_s_unconstrained: f64,
    /// The same with it.
    pub tokens_per_s_constrained: f64,
    /// A pretrained model's prompt length for the prefill and decode figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    /// Prompt tokens per second (a pretrained model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tokens_per_s: Option<f64>,
    /// Generated tokens per second after the prefill (a pretrained model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tokens_per_s: Option<f64>,
    /// Generated tokens per second behind a long context (a pretrained model): batch
    /// [`LONG_BATCH`], prompts of [`LONG_PROMPT`] tokens, [`LONG_NEW`] tokens each, the
    /// decoding steps alone timed (after the prompts are encoded). What a
    /// multi-turn rollout's later turns cost, where the keys and values of the history
    /// outweigh the model's weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_long_context_tokens_per_s: Option<f64>,
    /// Forward and backward, per token (µs), after a first pass.
    pub fwd_bwd_us_per_token: f64,
    /// Forward and backward tokens per second, after a first pass.
    pub fwd_bwd_tokens_per_s: f64,
    /// The first pass's (what a run pays once).
    pub fwd_bwd_first_pass_tokens_per_s: f64,
    /// The model's parameters.
    pub parameters: usize,
    /// The process's peak resident memory (MB).
    pub peak_rss_mb: u64,
    /// The device (`cpu`, `cuda`).
    pub device: String,
    /// The CPU's matrix products.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm: Option<String>,
    /// Ours over PyTorch's, with `--reference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_prefill_tokens_per_s: Option<f64>,
    /// Ours over PyTorch's, with `--reference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_decode_tokens_per_s: Option<f64>,
    /// Ours over PyTorch's, with `--reference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_fwd_bwd_tokens_per_s: Option<f64>,
    /// Ours over PyTorch's, with `--reference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_fwd_bwd_first_pass_tokens_per_s: Option<f64>,
    /// PyTorch's own figures (`benches/pytorch/policy_bench.py`), with `--reference`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch: Option<Value>,
}

/// Generation and training throughput of a policy on one device: decode tokens/s at batch 64
/// with and without the tool-call constraint, prefill tokens/s, forward+backward tokens/s
/// (after a first pass, and that first pass), peak memory; with `--reference`, the same
/// figures from PyTorch and the ratios.
pub fn run<B: burn::tensor::backend::AutodiffBackend>(
    model_source: &ModelSource,
    seconds: f64,
    reference: Option<&Path>,
    device: &B::Device,
    name: &str,
) -> anyhow::Result<PolicyReport> {
    use crate::policy::{
        ActionLimits, SampleConfig, Template, ToolCallGrammar, generate, masked_mean,
        token_logprobs,
    };
    use burn::module::AutodiffModule;
    use burn::tensor::{Int, Tensor, TensorData};
    let tiny = !model_source.is_pretrained();
    let choice = crate::training::ModelChoice {
        model: model_source.clone(),
        lora_rank: 0,
    };
    let (config, train, tok) = crate::training::initial_policy::<B>(&choice, 0, device)?;
    let model = train.valid();
    let env = crate::make_env("sql-agent-v0", crate::Backend::Native, &Map::new())?;
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
    let mut out = PolicyReport {
        model: model_source.clone(),
        batch,
        new_tokens_per_sequence: new_tokens,
        tokens_per_s_unconstrained: free.round(),
        tokens_per_s_constrained: constrained.round(),
        ..PolicyReport::default()
    };
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
            crate::policy::causal_bias::<B::InnerBackend>(prompt_len, device).repeat_dim(0, batch),
            None,
        );
        <B::InnerBackend as burn::tensor::backend::Backend>::sync(device)?;
        let prefill = start.elapsed();
        let (_, total) = rate(&rows, false)?;
        let decode = (batch * new_tokens) as f64 / (total.saturating_sub(prefill)).as_secs_f64();
        out.prompt_tokens = Some(prompt_len);
        out.prefill_tokens_per_s =
            Some(((batch * prompt_len) as f64 / prefill.as_secs_f64()).round());
        out.decode_tokens_per_s = Some(decode.round());
        // Behind a long context: the prompts encoded first, then only the decoding steps
        // timed (a difference of two generations would carry the prefill's own spread).
        let mut decoder = crate::policy::Decoder::new(&model, u32::MAX, device);
        decoder.admit(
            random_ids(LONG_BATCH, LONG_PROMPT)
                .chunks(LONG_PROMPT)
                .enumerate()
                .map(|(id, prompt)| crate::policy::RowRequest {
                    id,
                    prompt: prompt.to_vec(),
                    constraint: None,
                    temperature: 1.0,
                    top_p: 1.0,
                    max_new_tokens: LONG_NEW,
                    seed: id as u64,
                })
                .collect(),
        );
        let start = Instant::now();
        while !decoder.is_idle() {
            decoder.step(&|_| false);
        }
        let elapsed = start.elapsed();
        let generated: usize = decoder
            .done()
            .iter()
            .filter_map(|d| d.result.as_ref().ok())
            .map(|s| s.tokens.len())
            .sum();
        out.decode_long_context_tokens_per_s =
            Some((generated as f64 / elapsed.as_secs_f64()).round());
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
            crate::policy::causal_bias::<B>(t, device).repeat_dim(0, b),
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
    out.fwd_bwd_us_per_token = us(elapsed / (b * t) as u32);
    out.fwd_bwd_tokens_per_s = ((b * t) as f64 / elapsed.as_secs_f64()).round();
    out.fwd_bwd_first_pass_tokens_per_s = ((b * t) as f64 / first.as_secs_f64()).round();
    out.parameters = burn::module::Module::num_params(&model);
    out.peak_rss_mb = peak_rss_mb();
    out.device = name.to_owned();
    if name == "cpu" {
        out.gemm = Some(match crate::policy::blas::get() {
            Some(b) => format!("OpenBLAS ({})", b.path.display()),
            None => "burn-flex (the gemm crate)".into(),
        });
    }
    if let Some(python) = reference {
        let theirs = pytorch_reference(
            python,
            &model_source.to_string(),
            batch,
            prompt_len,
            new_tokens,
        )?;
        let vs = |ours: Option<f64>, key: &str| {
            let theirs = theirs[key].as_f64()?;
            Some((ours? / theirs * 1000.0).round() / 1000.0)
        };
        out.ratio_prefill_tokens_per_s = vs(out.prefill_tokens_per_s, "prefill_tokens_per_s");
        out.ratio_decode_tokens_per_s = vs(out.decode_tokens_per_s, "decode_tokens_per_s");
        out.ratio_fwd_bwd_tokens_per_s = vs(Some(out.fwd_bwd_tokens_per_s), "fwd_bwd_tokens_per_s");
        out.ratio_fwd_bwd_first_pass_tokens_per_s = vs(
            Some(out.fwd_bwd_first_pass_tokens_per_s),
            "fwd_bwd_first_pass_tokens_per_s",
        );
        out.pytorch = Some(theirs);
    }
    Ok(out)
}

/// Sequences of the long-context decode figure.
pub const LONG_BATCH: usize = 8;
/// Prompt tokens of each (about a support conversation's history).
pub const LONG_PROMPT: usize = 1024;
/// Tokens each generates.
pub const LONG_NEW: usize = 64;

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
    let gguf = match crate::policy::pretrained::KnownModel::find(model) {
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
