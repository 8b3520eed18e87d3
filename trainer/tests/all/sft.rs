//! Supervised warm-start: constraint masks on the action tokens, and a policy that learns
//! from demonstrations under them.

use sandgym_env_api::{Action, Env, RecordTrajectory, ResetOptions, Trajectory};
use sandgym_policy::{ActionLimits, CpuTrain};
use sandgym_trainer::sft::{self, SftConfig, SftExample};
use sandgym_trainer::{Learner, RolloutEngine, RolloutSettings, evaluate};
use serde_json::json;

use crate::{COLOURS, PickTool};

fn settings() -> RolloutSettings {
    RolloutSettings {
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
    }
}

/// The demonstration of `seed`: call the tool the instruction names (or, in the record only,
/// `tool` instead).
fn demo(seed: u64, tool: Option<&str>) -> Trajectory {
    let mut env = RecordTrajectory::new(PickTool::new());
    let obs = env.reset(seed, &ResetOptions::default()).unwrap();
    let named = COLOURS
        .iter()
        .find(|c| obs.content.ends_with(&format!("{c}.")))
        .unwrap();
    env.step(&Action::tool(*named, json!({}))).unwrap();
    let mut t = env.take_trajectory();
    if let Some(tool) = tool {
        t.records[0].action.as_mut().unwrap().tool_name = tool.into();
    }
    t
}

#[test]
fn constrained_samples_carry_the_grammars_masks_on_action_tokens_only() {
    let tok = crate::pick_tokenizer();
    let spec = PickTool::new().spec().clone();
    let examples: Vec<SftExample> = vec![
        demo(0, None).into(),
        demo(1, None).into(),
        // Not a tool of the env: outside the grammar, so learned without masks.
        demo(2, Some("purple")).into(),
    ];
    let config = SftConfig {
        constrained: true,
        ..SftConfig::default()
    };
    let data = sft::samples(&tok, &spec, &examples, &settings(), &config).unwrap();
    assert_eq!(data.samples.len(), 3);
    assert_eq!(data.unconstrained, 1);
    for s in &data.samples[..2] {
        for ((&trainable, allowed), &target) in s.mask.iter().zip(&s.allowed).zip(&s.targets) {
            match allowed {
                Some(mask) => {
                    assert!(trainable, "only action tokens are masked");
                    assert!(
                        mask.allows(target as usize),
                        "the demonstrated token is allowed"
                    );
                }
                None => assert!(!trainable, "every action token is masked"),
            }
        }
        // The tool name is a real choice: some action token has several options.
        assert!(
            s.allowed
                .iter()
                .flatten()
                .any(|m| m.count() == COLOURS.len())
        );
    }
    assert!(data.samples[2].allowed.iter().all(Option::is_none));
    let plain = SftConfig {
        constrained: false,
        ..config
    };
    let data = sft::samples(&tok, &spec, &examples, &settings(), &plain).unwrap();
    assert_eq!(data.unconstrained, 0);
    assert!(
        data.samples
            .iter()
            .all(|s| s.allowed.iter().all(Option::is_none))
    );
}

#[test]
fn constrained_sft_teaches_a_fresh_policy_to_read_the_instruction() {
    let tok = crate::pick_tokenizer();
    let spec = PickTool::new().spec().clone();
    let examples: Vec<SftExample> = (0..32).map(|s| demo(s, None).into()).collect();
    let config = SftConfig {
        episodes: examples.len(),
        epochs: 12,
        minibatch: 8,
        lr: 1e-2,
        constrained: true,
        ..SftConfig::default()
    };
    let data = sft::samples(&tok, &spec, &examples, &settings(), &config).unwrap();
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<CpuTrain>(&crate::tiny(tok.vocab_size()), 3);
    let mut learner = Learner::new(model, tok.vocab_size(), 1.0, device);
    let envs = (0..16)
        .map(|_| Box::new(PickTool::new()) as sandgym_env_api::BoxEnv)
        .collect();
    let mut engine = RolloutEngine::new(envs, 2, tok.clone(), settings()).unwrap();
    let seeds: Vec<u64> = (100..116).collect();
    let mut greedy = |learner: &Learner<CpuTrain>| {
        let model = learner.inference_model();
        let options = ResetOptions::default();
        evaluate(&mut engine, &model, &device, &seeds, &options, 0.0)
            .unwrap()
            .0
    };
    let before = greedy(&learner);
    let losses = sft::train(&mut learner, &data.samples, &config, 0, |_, _, _| {});
    assert!(losses.last() < losses.first(), "{losses:?}");
    let after = greedy(&learner);
    // Greedy before training names one tool for every instruction (1/4 at best); after, the
    // one each instruction names.
    assert!(before.mean_reward <= 0.5, "{before:?}");
    assert!(after.mean_reward >= 0.9, "{before:?} → {after:?}");
}

#[test]
fn a_record_not_to_imitate_is_context_without_loss_or_constraint() {
    let tok = crate::pick_tokenizer();
    let spec = PickTool::new().spec().clone();
    // Two turns: a call outside the grammar (the mistake), then the right call.
    let right = demo(0, None);
    let mut two = demo(0, Some("purple"));
    two.records[0].done = sandgym_env_api::Done::Running;
    two.records.push(right.records[0].clone());
    let example = |imitate: Vec<bool>| SftExample {
        trajectory: two.clone(),
        imitate,
        ..SftExample::default()
    };
    let config = SftConfig {
        constrained: true,
        ..SftConfig::default()
    };
    let trainable = |data: &sft::SftData| -> Vec<usize> {
        data.samples[0]
            .mask
            .iter()
            .enumerate()
            .filter(|(_, m)| **m)
            .map(|(i, _)| i)
            .collect()
    };
    let samples = |examples: &[SftExample]| {
        sft::samples(&tok, &spec, examples, &settings_long(), &config).unwrap()
    };
    let one = samples(&[right.clone().into()]);
    let wrong = samples(&[demo(0, Some("purple")).into()]);
    let all = samples(&[example(Vec::new())]);
    let masked = samples(&[example(vec![false, true])]);
    assert_eq!(all.unconstrained, 1, "the mistake does not fit the grammar");
    assert_eq!(
        masked.unconstrained, 0,
        "an action not learned is not replayed"
    );
    let (one, wrong) = (trainable(&one), trainable(&wrong));
    let (all, masked) = (trainable(&all), trainable(&masked));
    assert_eq!(all.len(), wrong.len() + one.len());
    assert_eq!(
        masked.len(),
        one.len(),
        "only the second action carries loss"
    );
    assert_eq!(masked, all[wrong.len()..], "and it is the last one");
    // Only the final turn kept, and that one not to imitate: nothing to learn.
    let none = sft::samples(
        &tok,
        &spec,
        &[example(vec![true, false])],
        &settings_long(),
        &SftConfig {
            final_turn_only: true,
            ..config
        },
    )
    .unwrap();
    assert!(none.samples.is_empty());
    assert_eq!(none.too_long, 1);
}

/// [`settings`] with room for two turns.
fn settings_long() -> RolloutSettings {
    RolloutSettings {
        max_turns: 2,
        max_context: 400,
        ..settings()
    }
}
