//! How the learner runs its passes: micro-batches take the step one pass would, and a prompt
//! encoded without gradient gives the log-probs of a full pass.

use burn::module::AutodiffModule;
use sandgym_env_api::{Action, Env, RecordTrajectory, ResetOptions};
use sandgym_policy::{ActionLimits, CpuTrain};
use sandgym_trainer::sft::{self, SftConfig, SftExample};
use sandgym_trainer::{Learner, Passes, RolloutSettings, Sample, TrainConfig};
use serde_json::json;

use crate::{COLOURS, PickTool};

/// Samples of demonstrations on PickTool, with made-up advantages and sampling log-probs.
fn samples(tok: &sandgym_policy::Tokenizer) -> Vec<Sample> {
    let settings = RolloutSettings {
        max_turns: 1,
        max_new_tokens: 40,
        max_context: 200,
        max_observation_chars: 100,
        batch_tokens: 1 << 16,
        eval_at_once: 64,
        limits: ActionLimits {
            thought_chars: 0,
            response_chars: 8,
        },
    };
    let examples: Vec<SftExample> = (0..6)
        .map(|seed| {
            let mut env = RecordTrajectory::new(PickTool::new());
            env.reset(seed, &ResetOptions::default()).unwrap();
            env.step(&Action::tool(COLOURS[seed as usize % 4], json!({})))
                .unwrap();
            env.take_trajectory().into()
        })
        .collect();
    let spec = PickTool::new().spec().clone();
    let data = sft::samples(tok, &spec, &examples, &settings, &SftConfig::default()).unwrap();
    let mut out = data.samples;
    for (i, s) in out.iter_mut().enumerate() {
        for (j, a) in s.adv.iter_mut().enumerate() {
            *a = if (i + j) % 3 == 0 { 1.0 } else { -0.5 };
        }
        for lp in &mut s.old_logp {
            *lp = -0.7;
        }
    }
    out
}

fn learner(tok: &sandgym_policy::Tokenizer, passes: Passes) -> Learner<CpuTrain> {
    let model = crate::seeded::<CpuTrain>(&crate::tiny(tok.vocab_size()), 5);
    Learner::new(model, tok.vocab_size(), 1.0, Default::default()).with_passes(passes)
}

/// Every output of the learner's model on the samples, for comparing two models.
fn outputs(l: &Learner<CpuTrain>, samples: &[Sample]) -> Vec<f32> {
    let refs: Vec<&Sample> = samples.iter().collect();
    let vocab = crate::pick_tokenizer().vocab_size();
    let t =
        sandgym_trainer::batch::tensors::<sandgym_policy::Cpu>(&refs, vocab, &Default::default());
    l.model
        .valid()
        .forward(t.inputs, t.positions, t.bias, None)
        .logits
        .into_data()
        .to_vec()
        .unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn micro_batches_take_the_step_of_one_pass() {
    let tok = crate::pick_tokenizer();
    let data = samples(&tok);
    let refs: Vec<&Sample> = data.iter().collect();
    let mut config = TrainConfig::default();
    config.optimiser.lr = 1e-3;
    config.objective.entropy_coef = 0.01;
    for agg in [
        sandgym_trainer::LossAgg::TokenMean,
        sandgym_trainer::LossAgg::SeqMeanTokenMean,
        sandgym_trainer::LossAgg::SeqMeanTokenSum,
    ] {
        config.objective.loss_agg = agg;
        let mut whole = learner(&tok, Passes::default());
        let mut parts = learner(
            &tok,
            Passes {
                micro_batch: 4,
                ..Passes::default()
            },
        );
        let a = whole.rl_step(&refs, &config);
        let b = parts.rl_step(&refs, &config);
        for (x, y, what) in [
            (a.loss, b.loss, "loss"),
            (a.pg_loss, b.pg_loss, "pg_loss"),
            (a.entropy, b.entropy, "entropy"),
            (a.clip_frac, b.clip_frac, "clip_frac"),
            (a.ppo_kl, b.ppo_kl, "ppo_kl"),
        ] {
            assert!((x - y).abs() < 1e-5, "{agg:?} {what}: {x} vs {y}");
        }
        assert_eq!(a.tokens, b.tokens);
        let d = max_diff(&outputs(&whole, &data), &outputs(&parts, &data));
        assert!(d < 1e-3, "{agg:?}: the models differ by {d} after one step");
        // And the step moved them (the comparison is not between untouched models).
        let fresh = learner(&tok, Passes::default());
        assert!(max_diff(&outputs(&fresh, &data), &outputs(&whole, &data)) > 1e-3);
    }
    let mut whole = learner(&tok, Passes::default());
    let mut parts = learner(
        &tok,
        Passes {
            micro_batch: 1,
            ..Passes::default()
        },
    );
    let (a, b) = (whole.sft_step(&refs, 1e-3), parts.sft_step(&refs, 1e-3));
    assert!((a - b).abs() < 1e-5, "sft loss {a} vs {b}");
    assert!(max_diff(&outputs(&whole, &data), &outputs(&parts, &data)) < 1e-3);
}

#[test]
fn a_prompt_encoded_without_gradient_gives_the_log_probs_of_a_full_pass() {
    let tok = crate::pick_tokenizer();
    let mut data = samples(&tok);
    let detached = Passes {
        detach_prompt: true,
        micro_batch: 0,
    };
    // Reference log-probs (no gradient), by the two routes.
    let reference = learner(&tok, Passes::default()).inference_model();
    let mut full = data.clone();
    learner(&tok, Passes::default()).score(&mut full, false, Some(&reference), 1.0, 64);
    learner(&tok, detached).score(&mut data, false, Some(&reference), 1.0, 64);
    for (a, b) in full.iter().zip(&data) {
        assert_eq!(a.ref_logp.len(), b.ref_logp.len());
        assert!(
            max_diff(&a.ref_logp, &b.ref_logp) < 1e-4,
            "{:?} vs {:?}",
            a.ref_logp,
            b.ref_logp
        );
        // Log-probs where the targets are trainable (0 where the grammar forces the token),
        // zeros elsewhere, and some real choices among them.
        for (lp, &m) in a.ref_logp.iter().zip(&a.mask) {
            assert!(m || *lp == 0.0, "{:?}", a.ref_logp);
        }
        assert!(a.ref_logp.iter().any(|&lp| lp < -0.01), "{:?}", a.ref_logp);
    }
    // The training pass: with the sampling log-probs set to the reference's, the ratio is 1
    // on every token when the pass computes the same log-probs.
    for s in &mut data {
        s.old_logp = s.ref_logp.clone();
    }
    let refs: Vec<&Sample> = data.iter().collect();
    let config = TrainConfig::default();
    let stats = learner(&tok, detached).rl_step(&refs, &config);
    assert!(stats.ppo_kl.abs() < 1e-5, "{stats:?}");
    assert_eq!(stats.clip_frac, 0.0);
    let (a, b) = (
        learner(&tok, Passes::default()).sft_step(&refs, 1e-3),
        learner(&tok, detached).sft_step(&refs, 1e-3),
    );
    assert!((a - b).abs() < 1e-5, "sft loss {a} vs {b}");
}

#[test]
fn detached_micro_batches_in_prompt_order_take_the_step_of_one_pass() {
    // With the prompt detached, a split minibatch runs its samples in the order of their
    // prompts, not as given: the step must still be the whole minibatch's.
    let tok = crate::pick_tokenizer();
    let data = samples(&tok);
    // Repeated prompts, interleaved (as a shuffled GRPO minibatch holds its groups).
    let refs: Vec<&Sample> = [0, 3, 1, 0, 3, 1, 2, 2].iter().map(|&i| &data[i]).collect();
    let detached = |micro_batch| Passes {
        detach_prompt: true,
        micro_batch,
    };
    let mut config = TrainConfig::default();
    config.optimiser.lr = 1e-3;
    let mut whole = learner(&tok, detached(0));
    let mut parts = learner(&tok, detached(3));
    let (a, b) = (whole.rl_step(&refs, &config), parts.rl_step(&refs, &config));
    assert!(
        (a.loss - b.loss).abs() < 1e-5,
        "loss {} vs {}",
        a.loss,
        b.loss
    );
    assert!((a.entropy - b.entropy).abs() < 1e-5, "{a:?} vs {b:?}");
    assert_eq!(a.tokens, b.tokens);
    let d = max_diff(&outputs(&whole, &data), &outputs(&parts, &data));
    assert!(d < 1e-3, "the models differ by {d} after one step");
    let fresh = learner(&tok, Passes::default());
    assert!(max_diff(&outputs(&fresh, &data), &outputs(&whole, &data)) > 1e-3);
    let (a, b) = (whole.sft_step(&refs, 1e-3), parts.sft_step(&refs, 1e-3));
    assert!((a - b).abs() < 1e-5, "sft loss {a} vs {b}");
    assert!(max_diff(&outputs(&whole, &data), &outputs(&parts, &data)) < 1e-3);
}

#[test]
fn detached_prompts_are_encoded_with_the_adapters_of_the_step_that_uses_them() {
    // A LoRA policy's detached prompts are encoded by a copy with its adapters folded in,
    // made for each step (once, for all of the step's passes): after a step has moved the
    // adapters, the next step's loss is that of a full pass at the new weights.
    let tok = crate::pick_tokenizer();
    let data = samples(&tok);
    let refs: Vec<&Sample> = [0, 3, 1, 0, 3, 1, 2, 2].iter().map(|&i| &data[i]).collect();
    let lora = sandgym_policy::LoraConfig {
        rank: 4,
        alpha: 8.0,
        targets: sandgym_policy::LoraTarget::ALL.to_vec(),
    };
    let model = crate::seeded::<CpuTrain>(&crate::tiny(tok.vocab_size()), 5)
        .with_lora(&lora, &Default::default());
    let passes = Passes {
        detach_prompt: true,
        micro_batch: 3,
    };
    let mut detached =
        Learner::new(model, tok.vocab_size(), 1.0, Default::default()).with_passes(passes);
    let before = outputs(&detached, &data);
    for step in 0..3 {
        let whole = Learner::new(
            detached.model.clone(),
            tok.vocab_size(),
            1.0,
            Default::default(),
        )
        .sft_step(&refs, 0.0);
        let loss = detached.sft_step(&refs, 5e-2);
        assert!(
            (loss - whole).abs() < 1e-5,
            "step {step}: detached loss {loss} vs a full pass's {whole}"
        );
    }
    assert!(
        max_diff(&before, &outputs(&detached, &data)) > 1e-3,
        "the steps moved the adapters"
    );
}
