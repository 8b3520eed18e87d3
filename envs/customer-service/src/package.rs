//! [`PACKAGE`]: customer-service as the `sandgym` tool knows it.

use sandgym_env_api::{Demonstration, EnvError, EnvPackage, Preset};

use crate::{SupportBaseline, SupportEnv, SupportGold};

/// customer-service as a package: its scripted baseline, the gold demonstrator (solutions
/// only), the presets and the `support` harness it was refactored from.
pub const PACKAGE: EnvPackage = EnvPackage {
    name: "customer-service",
    guest: "customer-service",
    register: SupportEnv::register,
    baseline: Some(|| Box::new(SupportBaseline::default())),
    // The demonstrator acts on the configuration's tasks (their train wordings differ; their
    // worlds and expected states do not).
    demonstrator: Some(|config, kind| match kind {
        Demonstration::Solution => Ok(Box::new(SupportGold::new(
            SupportEnv::from_config(config)?.tasks(),
        ))),
        Demonstration::Recovery => Err(EnvError::InvalidConfig {
            reason:
                "customer-service-v0's demonstrator models no recovery: set sft.recoveries to 0"
                    .into(),
        }),
    }),
    presets: PRESETS,
    train_config: None,
    harness: Some("support"),
    source: &[include_str!("env.rs"), include_str!("narrowing.rs")],
};

const PRESETS: &[Preset] = &[
    // Long multi-turn episodes.
    Preset::any(
        r#"{
        "rollout": {"max_turns": 10, "max_new_tokens": 64, "max_context": 1400,
                    "max_observation_chars": 300, "response_chars": 200},
        "schedule": {"iters": 20},
        "sft": {"episodes": 240, "epochs": 3, "minibatch": 8, "lr": 2e-3,
                "final_turn_only": false, "successful_only": true, "constrained": true}
        }"#,
    ),
    // A pretrained model, sized for 2 CPU cores: the long multi-turn episodes (about 5 turns)
    // make a training pass the cost, so SFT on every turn of the gold demonstrator's episodes
    // of the train split's first 180 tasks (20 of each intent, the refusals included), whose
    // thoughts (up to 96 characters) name the request and the fact each decision turns on, two
    // epochs in minibatches of 8; then one GRPO iteration of 4 tasks × 4 rollouts, one
    // optimiser step (a thought and a reply in one action: room for both). Measured on the 90
    // test tasks (README, Training): 0.833 success against the baseline's 0.778 (23 min at
    // this version); SFT on the successful ones among 256 baseline episodes, without
    // thoughts, had given 0.222. Passes of one episode: the episodes are long (~800 tokens
    // with every turn), so a pass of 8 held ~9.5 GB of attention activations and was slower
    // (measured on 16 demonstrations and one iteration: 134 s and 9.5 GB with passes of 8,
    // 97 s and 2.7 GB with passes of 1, the same loss and update); the SQL agent's short
    // episodes share their schema prompt within a pass and keep passes of 8. The closing
    // evaluation plays 18 episodes at once (five chunks of the 90 test tasks): each live
    // episode keeps its KV cache (up to 1,400 tokens, 64 MB) from turn to turn, and 64 at
    // once peaked at 8.2 GB where 23 at once took 3.9 GB in the same time.
    Preset::any(
        r#"{
        "rollout": {"tasks_per_iter": 4, "thought_chars": 96, "max_new_tokens": 112,
                    "eval_at_once": 18},
        "schedule": {"iters": 1},
        "optimiser": {"minibatch": 16, "passes": {"micro_batch": 1}},
        "sft": {"episodes": 0, "demonstrations": 180, "epochs": 2, "minibatch": 8}
        }"#,
    )
    .pretrained(),
    Preset::any(r#"{"rollout": {"group_size": 4}}"#)
        .pretrained()
        .group(),
    Preset::any(r#"{"rollout": {"group_size": 1}}"#)
        .pretrained()
        .single(),
];
