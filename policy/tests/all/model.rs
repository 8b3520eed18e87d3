//! The burn model: KV-cached sampling agrees with full forward passes; checkpoints.

use burn::tensor::{Int, Tensor, TensorData};
use sandgym_policy::{
    ActionLimits, PolicyConfig, PolicyModel, Prefill, RowControl, SampleConfig, ToolCallGrammar,
    checkpoint, generate, generate_with, load, sequence_logprobs,
};

// The same tests run on the GPU when built with `--features cuda` (see scripts/gpu-check.sh).
#[cfg(not(feature = "cuda"))]
pub(crate) type Infer = sandgym_policy::Cpu;
#[cfg(not(feature = "cuda"))]
type Train = sandgym_policy::CpuTrain;
#[cfg(feature = "cuda")]
pub(crate) type Infer = sandgym_policy::Gpu;
#[cfg(feature = "cuda")]
type Train = sandgym_policy::GpuTrain;

pub(crate) fn select_device() -> burn::tensor::Device<Infer> {
    Default::default()
}

pub(crate) fn config(vocab: usize) -> PolicyConfig {
    PolicyConfig::new(vocab)
        .with_d_model(64)
        .with_n_layers(2)
        .with_n_heads(4)
        .with_n_kv_heads(2)
        .with_d_ff(128)
}

#[test]
fn kv_cached_sampling_matches_one_full_forward_pass() {
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let prompts: Vec<Vec<u32>> = vec![vec![5, 9, 17], (20..32).collect(), vec![7; 7], vec![3]];
    let mut constraints = vec![None, None, None, None];
    let sample = SampleConfig {
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens: 150,
        seed: 4,
    };
    // `end` outside the vocabulary: rows run the whole budget, long enough for the cache to
    // write steps into its free slots in place and to outgrow its buffers twice.
    let out = generate(&model, &prompts, &mut constraints, 10_000, &sample, &device).unwrap();
    for (prompt, s) in prompts.iter().zip(&out) {
        assert_eq!(s.tokens.len(), 150);
        let full = sequence_logprobs(&model, prompt, &s.tokens, &[], 0.9, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "cached {a} vs full {b}");
        }
    }
}

#[test]
fn shared_prefixes_are_encoded_once_and_sample_as_if_alone() {
    // A batch as rollouts make it: one prompt repeated for a group, prompts sharing a long
    // prefix ("system turn + schema") then differing, one a prefix of another, one alone.
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let system: Vec<u32> = (40..70).collect();
    let with = |tail: &[u32]| -> Vec<u32> { system.iter().chain(tail).copied().collect() };
    let prompts: Vec<Vec<u32>> = vec![
        with(&[1, 2, 3]),
        with(&[1, 2, 3]),
        with(&[1, 2, 4, 5, 6, 7]),
        with(&[9]),
        with(&[1, 2]),
        vec![200, 201],
        vec![8],
        with(&[1, 2, 3]),
    ];
    let prefill = sandgym_policy::prefill(&model, &prompts, &device);
    for (r, p) in prompts.iter().enumerate() {
        assert_eq!(prefill.next_pos[r], p.len() as i64);
    }
    prefilled_as_alone(&model, &prompts, prefill);
    // Decoding continues from that cache exactly as from the prompt alone.
    sampled_as_full(&model, &prompts, 6, 11, false);
}

/// `prefill`'s logits after each of `prompts` are those of the prompt's own forward pass, and
/// its valid slots as many as the prompt's tokens.
fn prefilled_as_alone(model: &PolicyModel<Infer>, prompts: &[Vec<u32>], prefill: Prefill<Infer>) {
    let vocab = model.vocab_size();
    let got: Vec<f32> = prefill.logits.into_data().to_vec().unwrap();
    for (r, p) in prompts.iter().enumerate() {
        let ids: Vec<i64> = p.iter().map(|&t| i64::from(t)).collect();
        let all = logits(model, &ids);
        let want = &all[(ids.len() - 1) * vocab..];
        for (a, b) in got[r * vocab..(r + 1) * vocab].iter().zip(want) {
            assert!((a - b).abs() < 1e-4, "row {r}: shared {a} vs alone {b}");
        }
        assert_eq!(
            prefill.valid[r].iter().filter(|&&v| v).count(),
            p.len(),
            "row {r}"
        );
    }
}

/// Sampling `max_new_tokens` from `prompts` in one batch gives, token by token, the
/// log-probs of a full pass over each prompt and its sample (`whole`: every one of them).
fn sampled_as_full(
    model: &PolicyModel<Infer>,
    prompts: &[Vec<u32>],
    max_new_tokens: usize,
    seed: u64,
    whole: bool,
) {
    let device = select_device();
    let mut constraints: Vec<_> = prompts.iter().map(|_| None).collect();
    let sample = SampleConfig {
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens,
        seed,
    };
    let out = generate(model, prompts, &mut constraints, 10_000, &sample, &device).unwrap();
    for (prompt, s) in prompts.iter().zip(&out) {
        let full = sequence_logprobs(model, prompt, &s.tokens, &[], 0.9, &device);
        if whole {
            assert_eq!(s.logprobs.len(), full.len());
        }
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "cached {a} vs full {b}");
        }
    }
}

#[test]
fn a_prefix_every_prompt_shares_is_held_once_and_attended_as_if_copied() {
    // Every prompt starts with the same system turn and schema: the cache holds it once, and
    // the rows attend to it by broadcasting; logits, decoding and a later continuation match
    // each prompt alone.
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let system: Vec<u32> = (40..75).collect();
    let with = |tail: &[u32]| -> Vec<u32> { system.iter().chain(tail).copied().collect() };
    let prompts: Vec<Vec<u32>> = vec![
        with(&[1, 2, 3]),
        with(&[9]),
        with(&[1, 2, 4, 5, 6, 7, 8, 9, 10]),
        with(&[1, 2, 3]),
        with(&[250, 251]),
    ];
    let mut prefill = sandgym_policy::prefill(&model, &prompts, &device);
    let (k, _) = prefill
        .cache
        .layer(0)
        .shared()
        .expect("the prefix is shared");
    assert_eq!(k.dims()[0], 1, "held once");
    assert_eq!(k.dims()[2], system.len());
    assert_eq!(prefill.cache.len(), prefill.valid[0].len());
    prefilled_as_alone(&model, &prompts, prefill);
    sampled_as_full(&model, &prompts, 9, 5, true);
}

#[test]
fn a_prefill_in_windows_gives_the_cache_and_logits_of_one_pass() {
    // Long multi-turn histories: a shared system turn, then tails of different lengths
    // (padding before the shorter ones), encoded 16 columns at a time.
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let system: Vec<u32> = (40..90).collect();
    let prompts: Vec<Vec<u32>> = [70usize, 23, 41, 1, 70]
        .iter()
        .enumerate()
        .map(|(r, &n)| {
            let tail = (0..n).map(|i| ((i * 7 + r * 13) % 250) as u32 + 1);
            system.iter().copied().chain(tail).collect()
        })
        .collect();
    let whole = sandgym_policy::prefill(&model, &prompts, &device);
    let windows = sandgym_policy::prefill_within(&model, &prompts, 1, &device);
    assert_eq!(windows.valid, whole.valid);
    assert_eq!(windows.next_pos, whole.next_pos);
    let close = |a: Vec<f32>, b: Vec<f32>, what: &str| {
        assert_eq!(a.len(), b.len(), "{what}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-4, "{what}: windows {x} vs one pass {y}");
        }
    };
    let got: Vec<f32> = windows.logits.into_data().to_vec().unwrap();
    close(
        got.clone(),
        whole.logits.into_data().to_vec().unwrap(),
        "logits",
    );
    let layers = whole.cache.into_layers().into_iter();
    for (l, (a, b)) in windows
        .cache
        .into_layers()
        .into_iter()
        .zip(layers)
        .enumerate()
    {
        let ((ka, va), (kb, vb)) = (a.unwrap(), b.unwrap());
        assert_eq!(ka.dims(), kb.dims(), "layer {l}");
        // Padding slots too: each attends to the valid slots before it and itself either way.
        close(
            ka.into_data().to_vec().unwrap(),
            kb.into_data().to_vec().unwrap(),
            "keys",
        );
        close(
            va.into_data().to_vec().unwrap(),
            vb.into_data().to_vec().unwrap(),
            "values",
        );
    }
    // And each row's logits are those of the prompt alone.
    let vocab = 300;
    for (r, p) in prompts.iter().enumerate() {
        let ids: Vec<i64> = p.iter().map(|&t| i64::from(t)).collect();
        let all = logits(&model, &ids);
        close(
            got[r * vocab..(r + 1) * vocab].to_vec(),
            all[(ids.len() - 1) * vocab..].to_vec(),
            "alone",
        );
    }
}

#[test]
fn a_continued_history_samples_as_if_encoded_whole() {
    // Turn one of three episodes of different lengths, then turn two continuing each one's
    // cache with its action and a new observation: the same samples as a fresh generation
    // over the whole histories, and the caches encode exactly the prompts.
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let system: Vec<u32> = (40..80).collect();
    let first: Vec<Vec<u32>> = [5usize, 31, 12]
        .iter()
        .map(|&n| {
            system
                .iter()
                .copied()
                .chain((0..n as u32).map(|i| 100 + i))
                .collect()
        })
        .collect();
    let sample = SampleConfig {
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens: 7,
        seed: 21,
    };
    let none: Vec<Option<sandgym_policy::SeqCache<Infer>>> = vec![None, None, None];
    let mut constraints = vec![None, None, None];
    let (turn1, caches) = sandgym_policy::generate_continuing(
        &model,
        &first,
        &none,
        &mut constraints,
        10_000,
        &sample,
        &device,
    )
    .unwrap();
    for (c, p) in caches.iter().zip(&first) {
        assert_eq!(c.tokens(), p.as_slice());
    }
    let second: Vec<Vec<u32>> = first
        .iter()
        .zip(&turn1)
        .enumerate()
        .map(|(r, (p, s))| {
            let observation = (0..(3 + 9 * r) as u32).map(|i| 200 + i);
            p.iter()
                .chain(&s.tokens)
                .copied()
                .chain(observation)
                .collect()
        })
        .collect();
    let bases: Vec<_> = caches.into_iter().map(Some).collect();
    assert!(
        bases
            .iter()
            .zip(&second)
            .all(|(b, p)| b.as_ref().unwrap().continues(p))
    );
    let (continued, next) = sandgym_policy::generate_continuing(
        &model,
        &second,
        &bases,
        &mut constraints,
        10_000,
        &sample,
        &device,
    )
    .unwrap();
    let whole = generate(&model, &second, &mut constraints, 10_000, &sample, &device).unwrap();
    for (r, (a, b)) in continued.iter().zip(&whole).enumerate() {
        assert_eq!(a.tokens, b.tokens, "row {r}");
        for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
            assert!((x - y).abs() < 1e-4, "row {r}: continued {x} vs whole {y}");
        }
        let full = sequence_logprobs(&model, &second[r], &a.tokens, &[], 0.9, &device);
        for (x, y) in a.logprobs.iter().zip(&full) {
            assert!((x - y).abs() < 1e-4, "row {r}: continued {x} vs full {y}");
        }
        assert_eq!(next[r].tokens(), second[r].as_slice());
    }
    // A base that does not continue its prompt is ignored: the prompts are encoded whole.
    let stale: Vec<_> = next.into_iter().map(Some).collect();
    let (again, _) = sandgym_policy::generate_continuing(
        &model,
        &first,
        &stale,
        &mut constraints,
        10_000,
        &sample,
        &device,
    )
    .unwrap();
    for (a, b) in again.iter().zip(&turn1) {
        assert_eq!(a.tokens, b.tokens);
    }
    // A last turn continues the same bases and keeps nothing: the same samples.
    let (_, bases) = sandgym_policy::generate_continuing(
        &model,
        &first,
        &none,
        &mut constraints,
        10_000,
        &sample,
        &device,
    )
    .unwrap();
    let bases: Vec<_> = bases.into_iter().map(Some).collect();
    let last = sandgym_policy::generate_continuing_last(
        &model,
        &second,
        &bases,
        &mut constraints,
        10_000,
        &sample,
        &device,
    )
    .unwrap();
    for (r, (a, b)) in last.iter().zip(&continued).enumerate() {
        assert_eq!(a.tokens, b.tokens, "row {r}");
        assert_eq!(a.logprobs, b.logprobs, "row {r}");
    }
}

#[test]
fn rows_end_at_their_own_budget_or_when_stopped() {
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let prompts: Vec<Vec<u32>> = vec![vec![5, 9, 17], vec![20, 21], vec![7; 4]];
    let mut constraints = vec![None, None, None];
    let sample = SampleConfig {
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens: 16,
        seed: 4,
    };
    let stopped = std::sync::atomic::AtomicBool::new(false);
    let stop = |row: usize| row == 2 && stopped.load(std::sync::atomic::Ordering::Relaxed);
    // Row 2's client "leaves" before generation: it gets nothing; rows 0 and 1 stop at their
    // own budgets instead of the batch's, and no row counts as finished.
    stopped.store(true, std::sync::atomic::Ordering::Relaxed);
    let control = RowControl {
        max_new_tokens: Some(&[3, 9, 16]),
        stop: Some(&stop),
    };
    let out = generate_with(
        &model,
        &prompts,
        &mut constraints,
        10_000,
        &sample,
        &device,
        &control,
    )
    .unwrap();
    let lengths: Vec<usize> = out.iter().map(|s| s.tokens.len()).collect();
    assert_eq!(lengths, [3, 9, 0]);
    assert!(out.iter().all(|s| !s.finished));
    // The tokens kept are scored like any others.
    for (prompt, s) in prompts.iter().zip(&out).take(2) {
        let full = sequence_logprobs(&model, prompt, &s.tokens, &[], 0.9, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "cached {a} vs full {b}");
        }
    }
}

#[test]
fn constrained_sampling_logprobs_are_those_of_the_masked_distribution() {
    let tok = crate::tokenizer();
    let device = select_device();
    let model = config(tok.vocab_size()).init::<Infer>(&device);
    let tools = &crate::episodes()[0].0;
    let grammar = ToolCallGrammar::new(
        tok,
        tools,
        ActionLimits {
            thought_chars: 16,
            response_chars: 24,
        },
    )
    .unwrap();
    let template = sandgym_policy::Template::new(tok);
    let mut prompts = Vec::new();
    for (_, t) in crate::episodes().iter().step_by(2).take(3) {
        let mut p = template
            .prompt(tools, &t.records[0].instruction)
            .unwrap()
            .ids;
        p.truncate(40 + prompts.len() * 13);
        p.extend(template.generation_prefix());
        prompts.push(p);
    }
    let mut constraints: Vec<_> = prompts
        .iter()
        .map(|_| Some(grammar.matcher().unwrap()))
        .collect();
    let sample = SampleConfig {
        temperature: 1.0,
        top_p: 1.0,
        max_new_tokens: 300,
        seed: 9,
    };
    let out = generate(
        &model,
        &prompts,
        &mut constraints,
        tok.end(),
        &sample,
        &device,
    )
    .unwrap();
    for (prompt, s) in prompts.iter().zip(&out) {
        assert!(s.finished, "{}", tok.decode(&s.tokens).unwrap());
        // Replay the constraint to get each step's mask, then score in one pass.
        let mut matcher = grammar.matcher().unwrap();
        let masks: Vec<Option<sandgym_policy::TokenMask>> = s
            .tokens
            .iter()
            .map(|&t| {
                let m = matcher.allowed().unwrap();
                matcher.consume(t).unwrap();
                Some(sandgym_policy::TokenMask::from_bools(&m))
            })
            .collect();
        let full = sequence_logprobs(&model, prompt, &s.tokens, &masks, 1.0, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "cached {a} vs full {b}");
        }
        let text = tok.decode(&s.tokens[..s.tokens.len() - 1]).unwrap();
        let action = sandgym_env_api::Action::from_json(&text).unwrap();
        sandgym_env_api::validate_action(tools, &action).unwrap();
    }
}

fn logits(model: &sandgym_policy::PolicyModel<Infer>, ids: &[i64]) -> Vec<f32> {
    let device = select_device();
    let n = ids.len();
    let tokens = Tensor::<Infer, 2, Int>::from_data(TensorData::new(ids.to_vec(), [1, n]), &device);
    let positions = Tensor::<Infer, 2, Int>::from_data(
        TensorData::new((0..n as i64).collect::<Vec<_>>(), [1, n]),
        &device,
    );
    let mut bias = vec![f32::NEG_INFINITY; n * n];
    for q in 0..n {
        for k in 0..=q {
            bias[q * n + k] = 0.0;
        }
    }
    let bias = Tensor::<Infer, 4>::from_data(TensorData::new(bias, [1, 1, n, n]), &device);
    model
        .forward(tokens, positions, bias, None)
        .logits
        .into_data()
        .to_vec()
        .unwrap()
}

#[test]
fn checkpoints_round_trip_and_bad_ones_are_refused() {
    let tok = crate::tokenizer();
    let device = select_device();
    let cfg = config(tok.vocab_size());
    let model = cfg.init::<Infer>(&device);
    let dir = std::env::temp_dir().join(format!("sandgym-ckpt-{}", std::process::id()));
    checkpoint::save(&dir, &cfg, &model, tok).unwrap();
    let (cfg2, back, tok2) = load::checkpoint::<Infer>(&dir, &device).unwrap();
    assert_eq!(cfg2, cfg);
    assert_eq!(tok2.to_json(), tok.to_json());
    let ids = [1i64, 2, 50, 60, 70];
    assert_eq!(logits(&model, &ids), logits(&back, &ids));
    // Saving again replaces the checkpoint atomically.
    checkpoint::save(&dir, &cfg, &back, tok).unwrap();
    // A truncated weights file is a clear error.
    let weights = dir.join("model.mpk");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = load::checkpoint::<Infer>(&dir, &device).unwrap_err();
    assert!(err.to_string().contains("bad checkpoint"), "{err}");
    // Weights that do not match the config are refused too.
    std::fs::write(&weights, &bytes).unwrap();
    let other = cfg.clone().with_d_model(32).with_d_ff(64);
    burn::config::Config::save(&other, dir.join("config.json")).unwrap();
    let err = load::checkpoint::<Infer>(&dir, &device).unwrap_err();
    assert!(err.to_string().contains("bad checkpoint"), "{err}");
    let impossible = cfg.clone().with_n_heads(3);
    burn::config::Config::save(&impossible, dir.join("config.json")).unwrap();
    let err = load::checkpoint::<Infer>(&dir, &device).unwrap_err();
    assert!(err.to_string().contains("heads"), "{err}");
    std::fs::write(dir.join("config.json"), "{").unwrap();
    assert!(load::checkpoint::<Infer>(&dir, &device).is_err());
    // Fuzzed: each file damaged at random loads or fails, never panics.
    checkpoint::save(&dir, &cfg, &model, tok).unwrap();
    let mut rng = sandgym_env_api::SplitMix64::new(0xC4EC);
    for file in ["model.mpk", "config.json", "tokenizer.json"] {
        let good = std::fs::read(dir.join(file)).unwrap();
        for _ in 0..60 {
            std::fs::write(dir.join(file), crate::mutate_bytes(&good, &mut rng)).unwrap();
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                load::checkpoint::<Infer>(&dir, &device).map(drop)
            }));
            assert!(loaded.is_ok(), "a damaged {file} made the load panic");
        }
        std::fs::write(dir.join(file), &good).unwrap();
    }
    load::checkpoint::<Infer>(&dir, &device).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn observation_tokens_carry_no_gradient() {
    use sandgym_policy::{Template, masked_mean, token_logprobs};
    type B = Train;
    let tok = crate::tokenizer();
    let device = select_device();
    let (tools, trajectory) = &crate::episodes()[1];
    let rendered = Template::new(tok).trajectory(tools, trajectory).unwrap();
    let n = rendered.ids.len() - 1;
    let vocab = tok.vocab_size();
    // Position i predicts token i + 1; its loss weight is that token's mask.
    let targets: Vec<i64> = rendered.ids[1..].iter().map(|&t| i64::from(t)).collect();
    let mask: Vec<f32> = rendered.loss_mask[1..]
        .iter()
        .map(|&m| f32::from(u8::from(m)))
        .collect();
    let logits =
        Tensor::<B, 3>::random([1, n, vocab], burn::tensor::Distribution::Default, &device)
            .require_grad();
    let targets = Tensor::<B, 2, Int>::from_data(TensorData::new(targets, [1, n]), &device);
    let weights = Tensor::<B, 2>::from_data(TensorData::new(mask.clone(), [1, n]), &device);
    let loss = masked_mean(token_logprobs(logits.clone(), targets, None, 1.0), weights).neg();
    let grads = loss.backward();
    let grad: Vec<f32> = logits.grad(&grads).unwrap().into_data().to_vec().unwrap();
    let mut trained = 0;
    for (i, m) in mask.iter().enumerate() {
        let row = &grad[i * vocab..(i + 1) * vocab];
        let norm: f32 = row.iter().map(|g| g.abs()).sum();
        if *m == 0.0 {
            assert_eq!(
                norm, 0.0,
                "position {i} predicts a prompt/observation token but has gradient"
            );
        } else {
            assert!(norm > 0.0);
            trained += 1;
        }
    }
    assert!(trained > 0 && trained < n, "{trained}/{n}");
}

#[test]
fn forward_last_is_the_last_position_of_a_full_forward_pass() {
    let device = select_device();
    for tied in [false, true] {
        let model = config(300).with_tie_embeddings(tied).init::<Infer>(&device);
        let ids: Vec<i64> = vec![4, 8, 15, 16, 23, 42];
        let n = ids.len();
        let full = logits(&model, &ids);
        let tokens = Tensor::<Infer, 2, Int>::from_data(TensorData::new(ids, [1, n]), &device);
        let positions = Tensor::<Infer, 1, Int>::arange(0..n as i64, &device).reshape([1, n]);
        let mut bias = vec![f32::NEG_INFINITY; n * n];
        for q in 0..n {
            for k in 0..=q {
                bias[q * n + k] = 0.0;
            }
        }
        let bias = Tensor::<Infer, 4>::from_data(TensorData::new(bias, [1, 1, n, n]), &device);
        let out = model.forward_last(tokens, positions, bias, None);
        assert_eq!(out.logits.dims(), [1, 1, 300]);
        assert_eq!(out.values.dims(), [1, 1]);
        let last: Vec<f32> = out.logits.into_data().to_vec().unwrap();
        // Relative: tied embeddings give logits near 60, where f32 rounding of a different
        // summation order is ~1e-5.
        for (a, b) in last.iter().zip(&full[(n - 1) * 300..]) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "last {a} vs full {b} (tied {tied})"
            );
        }
    }
}

#[test]
fn forward_rows_are_those_rows_of_a_full_forward_pass() {
    let device = select_device();
    for tied in [false, true] {
        let model = config(300).with_tie_embeddings(tied).init::<Infer>(&device);
        let (b, n) = (2, 6);
        let ids: Vec<i64> = vec![4, 8, 15, 16, 23, 42, 7, 9, 11, 13, 3, 5];
        let tokens =
            || Tensor::<Infer, 2, Int>::from_data(TensorData::new(ids.clone(), [b, n]), &device);
        let positions = || {
            Tensor::<Infer, 1, Int>::arange(0..n as i64, &device)
                .reshape([1, n])
                .repeat_dim(0, b)
        };
        let mut causal = vec![f32::NEG_INFINITY; b * n * n];
        for r in 0..b {
            for q in 0..n {
                for k in 0..=q {
                    causal[r * n * n + q * n + k] = 0.0;
                }
            }
        }
        let bias = || {
            Tensor::<Infer, 4>::from_data(TensorData::new(causal.clone(), [b, 1, n, n]), &device)
        };
        let full = model.forward(tokens(), positions(), bias(), None);
        let full_logits: Vec<f32> = full.logits.into_data().to_vec().unwrap();
        let full_values: Vec<f32> = full.values.into_data().to_vec().unwrap();
        // Out of order and across both rows of the batch.
        let rows: Vec<i64> = vec![11, 1, 6, 5];
        let k = rows.len();
        let picked = model.forward_rows(
            tokens(),
            positions(),
            bias(),
            None,
            Tensor::<Infer, 1, Int>::from_data(TensorData::new(rows.clone(), [k]), &device),
        );
        assert_eq!(picked.logits.dims(), [k, 300]);
        let got: Vec<f32> = picked.logits.into_data().to_vec().unwrap();
        for (i, &row) in rows.iter().enumerate() {
            let want = &full_logits[row as usize * 300..(row as usize + 1) * 300];
            for (a, w) in got[i * 300..(i + 1) * 300].iter().zip(want) {
                assert!(
                    (a - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "row {row}: {a} vs {w} (tied {tied})"
                );
            }
        }
        let values: Vec<f32> = picked.values.into_data().to_vec().unwrap();
        assert_eq!(values.len(), b * n);
        for (a, w) in values.iter().zip(&full_values) {
            assert!((a - w).abs() <= 1e-5 * (1.0 + w.abs()), "{a} vs {w}");
        }
        // No rows: no logits, and the values all the same.
        let none = model.forward_rows(
            tokens(),
            positions(),
            bias(),
            None,
            Tensor::<Infer, 1, Int>::from_data(TensorData::new(Vec::<i64>::new(), [0]), &device),
        );
        assert_eq!(none.logits.dims(), [0, 300]);
        assert_eq!(none.values.dims(), [b, n]);
    }
}

/// Every float parameter's gradient, flattened, in the model's order.
struct Grads<'a> {
    grads: &'a <Train as burn::tensor::backend::AutodiffBackend>::Gradients,
    out: Vec<Vec<f32>>,
}

impl burn::module::ModuleVisitor<Train> for Grads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<Train, D>>) {
        let g = param.val().grad(self.grads).map_or_else(Vec::new, |g| {
            g.into_data().to_vec::<f32>().expect("f32 gradient")
        });
        self.out.push(g);
    }
}

#[test]
fn a_packed_pass_gives_the_padded_passes_logits_values_and_gradients() {
    use burn::module::Module;
    use sandgym_policy::Packing;
    let device = select_device();
    let model = config(300).init::<Train>(&device);
    // Three episodes right-padded to 6, as a training pass lays them out.
    let (b, n) = (3, 6);
    let lengths = [6usize, 2, 4];
    let ids: Vec<i64> = vec![4, 8, 15, 16, 23, 42, 7, 9, 0, 0, 0, 0, 3, 5, 11, 13, 0, 0];
    let tokens =
        || Tensor::<Train, 2, Int>::from_data(TensorData::new(ids.clone(), [b, n]), &device);
    let positions = || {
        Tensor::<Train, 1, Int>::arange(0..n as i64, &device)
            .reshape([1, n])
            .repeat_dim(0, b)
    };
    let valid: Vec<Vec<bool>> = vec![vec![true; n]; b];
    let bias = || sandgym_policy::attention_bias::<Train>(&valid, n, &device);
    let real: Vec<i64> = lengths
        .iter()
        .enumerate()
        .flat_map(|(r, &l)| (0..l).map(move |j| (r * n + j) as i64))
        .collect();
    let rows =
        || Tensor::<Train, 1, Int>::from_data(TensorData::new(real.clone(), [real.len()]), &device);
    let packing = Packing::<Train>::of_lengths(&lengths, n, false, &device).expect("padding");
    assert_eq!(packing.tokens(), 12);
    let run = |packing: Option<&Packing<Train>>| {
        let out = model.forward_rows_packed(tokens(), positions(), bias(), None, rows(), packing);
        // A loss over every token's logits and value (weights so no two positions look alike).
        let k = real.len();
        let w = Tensor::<Train, 1, Int>::arange(0..(k * 300) as i64, &device)
            .float()
            .reshape([k, 300])
            .div_scalar((k * 300) as f32);
        let values = out.values.clone().reshape([b * n]).select(0, rows());
        let loss = (out.logits.clone() * w).sum() + values.clone().sum();
        let grads = loss.backward();
        let mut visitor = Grads {
            grads: &grads,
            out: Vec::new(),
        };
        model.visit(&mut visitor);
        let logits: Vec<f32> = out.logits.into_data().to_vec().unwrap();
        let values: Vec<f32> = values.into_data().to_vec().unwrap();
        (logits, values, visitor.out)
    };
    let (pl, pv, pg) = run(None);
    let (ql, qv, qg) = run(Some(&packing));
    let close = |a: &[f32], b: &[f32], what: &str| {
        assert_eq!(a.len(), b.len(), "{what}");
        let scale = b.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-3);
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-4 * scale,
                "{what}: packed {x} vs padded {y}"
            );
        }
    };
    close(&ql, &pl, "logits");
    close(&qv, &pv, "values");
    assert_eq!(qg.len(), pg.len());
    assert!(
        pg.iter().filter(|g| !g.is_empty()).count() > 10,
        "gradients reach the weights"
    );
    for (i, (q, p)) in qg.iter().zip(&pg).enumerate() {
        close(q, p, &format!("gradient of parameter {i}"));
    }
}
