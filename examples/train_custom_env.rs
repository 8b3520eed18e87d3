//! Train a policy on an env of your own, in your own program: register the env, give a config,
//! and `sandgym::training::new_run` makes the trainer (its initial policy, its envs, its run
//! directory) in one call.
//!
//! Run it with: `cargo run --release --example train_custom_env -- [ITERATIONS]`
//! (a shipped `.wasm` works the same way: `EnvTarget::parse("my_env.wasm", None)`).

use sandgym::env_api::{
    Action, ActionBody, Done, Env, EnvId, EnvSpec, Observation, RESPONSE_SCHEMA, ResetOptions,
    Result, Schema, SplitMix64, begin_step,
};
use sandgym::policy::CpuTrain;
use sandgym::trainer::{Algo, TrainConfig};
use sandgym::training::{RunPlan, new_run};
use sandgym::{Backend, EnvTarget};

/// Answer with the larger of two numbers. One turn, no tools; the episode narrows the answer to
/// the two numbers of its question (`RESPONSE_SCHEMA`), so the policy chooses between them.
struct Larger {
    spec: EnvSpec,
    state: State,
}

#[derive(Default)]
struct State {
    reset: bool,
    pair: (u64, u64),
    last: Observation,
    reward: f64,
    done: Done,
}

impl Env for Larger {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, _options: &ResetOptions) -> Result<Observation> {
        let mut rng = SplitMix64::new(seed);
        let a = rng.below(90) + 10;
        let b = (a + 1 + rng.below(88)) % 90 + 10; // a different two-digit number
        let answers = Schema::string().with_enum([a.to_string(), b.to_string()]);
        let last = Observation::new(format!("Which is larger, {a} or {b}? Answer with it."))
            .with_info(RESPONSE_SCHEMA, answers.to_value());
        self.state = State {
            reset: true,
            pair: (a, b),
            last: last.clone(),
            ..State::default()
        };
        Ok(last)
    }

    fn observe(&self) -> Observation {
        self.state.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        begin_step(self.state.reset, self.state.done, &self.spec.tools, action)?;
        let s = &mut self.state;
        let right = matches!(&action.body, ActionBody::Response(answer)
            if answer.trim() == s.pair.0.max(s.pair.1).to_string());
        s.reward = f64::from(u8::from(right));
        s.done = Done::Terminated;
        s.last = Observation::new(if right { "Correct." } else { "Wrong." });
        Ok(s.last.clone())
    }

    fn reward(&self) -> f64 {
        self.state.reward
    }

    fn done(&self) -> Done {
        self.state.done
    }
}

/// Trains GRPO on `larger-v0` for `iters` iterations in `out`; returns the success rate of
/// each iteration's episodes.
fn train(iters: u32, out: &std::path::Path) -> anyhow::Result<Vec<f64>> {
    // Registering makes the env an id every sandgym API takes (here, natively).
    let _ = sandgym::env_api::register("larger-v0", "The larger of two numbers.", |_| {
        let spec = EnvSpec::new(EnvId::new("larger", 0)?)
            .with_description("Answer with the larger of two numbers.")
            .with_max_episode_steps(1);
        Ok(Box::new(Larger {
            spec,
            state: State::default(),
        }))
    });
    let mut config = TrainConfig::for_algo(Algo::Grpo);
    config.schedule.iters = iters;
    config.rollout.tasks_per_iter = 16;
    config.rollout.group_size = 4;
    config.rollout.max_turns = 1;
    config.rollout.max_new_tokens = 16;
    config.optimiser.lr = 3e-3;
    let mut plan = RunPlan::new(EnvTarget::new("larger-v0"), config);
    plan.backend = Backend::Native;
    let mut trainer = new_run::<CpuTrain>(out, plan, Default::default())?;
    let mut success = Vec::new();
    trainer.run(|m| {
        println!(
            "iteration {}: reward {:.3}, success {:.2}",
            m.iter, m.reward_mean, m.success_rate
        );
        success.push(m.success_rate);
    })?;
    Ok(success)
}

fn main() -> anyhow::Result<()> {
    let iters = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(10);
    let out = std::env::temp_dir().join("sandgym-train-custom-env");
    let _ = std::fs::remove_dir_all(&out);
    let success = train(iters, &out)?;
    println!(
        "success {:.2} -> {:.2}; run directory {}",
        success.first().copied().unwrap_or_default(),
        success.last().copied().unwrap_or_default(),
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The example runs: two iterations write their metrics and a checkpoint.
    #[test]
    fn trains_a_registered_env_in_one_call() {
        let out = std::env::temp_dir().join(format!("sandgym-example-{}", std::process::id()));
        let success = super::train(2, &out).unwrap();
        assert_eq!(success.len(), 2);
        assert!(success.iter().all(|s| (0.0..=1.0).contains(s)));
        let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
        assert_eq!(metrics.lines().count(), 2);
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(run["run"]["env"], "larger-v0");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
