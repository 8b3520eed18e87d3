//! The bundled envs meet the trainer: per-env presets, scripted-baseline data for SFT and
//! comparison, env batches and the default tokenizer.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;

use crate::policy::{PolicyConfig, PolicyModel, Tokenizer, checkpoint, load};
use crate::progress::Progress;
use sandgym_trainer::{Learner, sft};

use crate::env_api::{self, BoxEnv, Demonstration, PresetModels, ResetOptions};
use crate::play::{baseline_episodes, play_env_with};
use crate::{Backend, EnvTarget, ModelSource, registry};
use sandgym_trainer::sft::{SftData, SftExample};
use sandgym_trainer::{Algo, RunDir, SftConfig, TrainConfig};

/// The training defaults for a bundled env: the algorithm's defaults, shaped to the env's
/// episodes (turns, tokens) and sized so the SQL agent trains on a 2-core CPU in about 20
/// minutes, warm-started with SFT. A pretrained model (`pretrained`) gets the env's
/// pretrained preset (LoRA-sized steps, the prompt encoded without gradient, micro-batches)
/// instead of the tiny model's.
///
/// ```
/// use sandgym::training::preset;
/// use sandgym_trainer::Algo;
/// let c = preset("sql-agent-v0", Algo::Grpo, false);
/// assert_eq!(c.algo, Algo::Grpo);
/// assert!(c.sft.episodes > 0);
/// assert!(preset("sql-agent-v0", Algo::Grpo, true).optimiser.passes.detach_prompt);
/// ```
pub fn preset(env: &str, algo: Algo, pretrained: bool) -> TrainConfig {
    let mut c = TrainConfig::for_algo(algo);
    let presets = registry::bundled(env).map_or(&[][..], |b| b.presets);
    let apply = |c: &mut TrainConfig, models: PresetModels| {
        for p in presets
            .iter()
            .filter(|p| p.models == models && p.applies(pretrained, algo.is_group()))
        {
            let patch: serde_json::Value =
                serde_json::from_str(p.patch).expect("a bundled preset is JSON");
            *c = c.merge_json(&patch).expect("a bundled preset applies");
        }
    };
    apply(&mut c, PresetModels::Any);
    if pretrained {
        pretrained_defaults(&mut c);
        apply(&mut c, PresetModels::Pretrained);
    }
    c
}

/// What a pretrained model changes in any env's settings: its prompt representation already
/// reads, so the prompt is encoded once without gradient (shared prefixes once); passes of 8
/// episodes bound the memory of a 49k-token vocabulary; LoRA-sized learning rates (5e-4 for
/// SFT, 2e-5 for RL: see the SQL agent's presets).
pub fn pretrained_defaults(c: &mut TrainConfig) {
    c.optimiser.passes = sandgym_trainer::Passes {
        micro_batch: 8,
        detach_prompt: true,
    };
    c.optimiser.lr = 2e-5;
    c.sft.lr = 5e-4;
    c.sft.minibatch = 16;
    c.rollout.max_context = c.rollout.max_context.max(1024);
}

/// The settings of a new run: the env's preset for the model, then `--config`, then the
/// flags.
pub fn settings(
    env: &str,
    algo: Algo,
    model: &ModelChoice,
    file: Option<&Path>,
    iters: Option<u32>,
    seed: Option<u64>,
) -> anyhow::Result<TrainConfig> {
    let mut c = preset(env, algo, model.is_pretrained());
    if let Some(path) = file {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        c = c.merge_json(&value)?;
    }
    if let Some(n) = iters {
        c.schedule.iters = n;
    }
    if let Some(s) = seed {
        c.schedule.seed = s;
    }
    c.validate()?;
    Ok(c)
}

/// A fresh policy for `env` (the model `choice` names), warm-started with SFT on the
/// scripted baseline's and the demonstrator's train-split episodes when `config.sft` asks
/// for some.
pub fn fresh_policy<B: AutodiffBackend>(
    env: &EnvTarget,
    config: &TrainConfig,
    device: &B::Device,
    sft_dir: Option<&Path>,
    choice: &ModelChoice,
) -> anyhow::Result<(PolicyConfig, PolicyModel<B>, Tokenizer)> {
    let (policy_config, model, tokenizer) =
        initial_policy::<B>(choice, config.schedule.seed, device)?;
    if config.sft.episodes == 0 && config.sft.demonstrations == 0 && config.sft.recoveries == 0 {
        return Ok((policy_config, model, tokenizer));
    }
    let examples = baseline_sft_data(env, &config.sft)?;
    let (model, _) = sft_policy::<B>(
        env,
        (&policy_config, model, &tokenizer),
        &examples,
        config,
        device,
    )?;
    if let Some(dir) = sft_dir {
        checkpoint::save(dir, &policy_config, &model, &tokenizer)?;
    }
    Ok((policy_config, model, tokenizer))
}

/// What an SFT pass learned from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SftReport {
    /// Episodes trained on.
    pub episodes: usize,
    /// Episodes left out: longer than the context.
    pub too_long: usize,
    /// Episodes with actions outside the env's grammar (learned unconstrained).
    pub unconstrained: usize,
    /// The mean loss of each epoch.
    pub epoch_losses: Vec<f64>,
}

/// Supervised training of `policy` (its architecture, weights and tokenizer) on `examples`
/// in the env's prompts and tools, as `config.sft` says, with a progress bar: the SFT
/// warm-start of [`fresh_policy`] and `sandgym sft`. Examples that are all unusable (each
/// longer than the context) are an error, not a silent no-op.
pub fn sft_policy<B: AutodiffBackend>(
    env: &EnvTarget,
    policy: (&PolicyConfig, PolicyModel<B>, &Tokenizer),
    examples: &[SftExample],
    config: &TrainConfig,
    device: &B::Device,
) -> anyhow::Result<(PolicyModel<B>, SftReport)> {
    let (policy_config, model, tokenizer) = policy;
    let clock = Instant::now();
    let data = sft_samples(env, tokenizer, examples, config)?;
    anyhow::ensure!(
        examples.is_empty() || !data.samples.is_empty(),
        "sft: none of the {} episodes is usable ({} longer than the model's context of {} tokens)",
        examples.len(),
        data.too_long,
        config.rollout.max_context
    );
    eprintln!(
        "sft: {} episodes ({} longer than the context left out{}{}), {} epochs",
        data.samples.len(),
        data.too_long,
        if config.sft.successful_only {
            ", failed ones not used"
        } else {
            ""
        },
        if config.sft.constrained {
            format!(
                "; constrained, {} outside the grammar learned unconstrained",
                data.unconstrained
            )
        } else {
            String::new()
        },
        config.sft.epochs
    );
    let samples = data.samples;
    let (model, means) = sft_train(policy_config, model, &samples, config, device);
    eprintln!(
        "sft: loss per epoch {:?} in {:.0} s",
        means
            .iter()
            .map(|l| (l * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>(),
        clock.elapsed().as_secs_f64()
    );
    let report = SftReport {
        episodes: samples.len(),
        too_long: data.too_long,
        unconstrained: data.unconstrained,
        epoch_losses: means,
    };
    Ok((model, report))
}

/// Supervised training of `model` on ready `samples` as `config.sft` says (epochs, minibatch,
/// rate; the optimiser's passes), with a progress bar; returns the model and each epoch's mean
/// loss. [`sft_policy`] trains on an env's recorded episodes with it; the proxy approach on a
/// teacher's traces ([`crate::proxy_sft`]).
pub fn sft_train<B: AutodiffBackend>(
    policy_config: &PolicyConfig,
    model: PolicyModel<B>,
    samples: &[sandgym_trainer::Sample],
    config: &TrainConfig,
    device: &B::Device,
) -> (PolicyModel<B>, Vec<f64>) {
    let mut learner = Learner::for_config(
        model,
        policy_config.vocab_size,
        &config.optimiser,
        device.clone(),
    );
    let steps = samples.len().div_ceil(config.sft.minibatch.max(1));
    if config.sft.prompt_runs > 1 {
        let groups = sandgym_trainer::prompt_runs::groups(samples);
        let kept = groups.iter().filter(|g| g.len() > 1).count();
        let alone = groups.len() - kept;
        eprintln!(
            "sft: samples drawn in runs of {} sharing a prompt prefix: {kept} groups, {alone} samples on their own",
            config.sft.prompt_runs
        );
    }
    let progress = Progress::new("sft", (steps * config.sft.epochs as usize) as u64);
    let means = sft::train(
        &mut learner,
        samples,
        &config.sft,
        config.schedule.seed,
        |epoch, step, loss| {
            let done = epoch as usize * steps + step + 1;
            progress.set(done as u64, &format!("loss {loss:.3}"));
        },
    );
    progress.finish();
    (learner.model, means)
}

/// What a new training run starts from and where its episodes run (see [`new_run`]).
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The env to train on.
    pub target: EnvTarget,
    /// Natively or in the sandbox.
    pub backend: Backend,
    /// The trainer's settings.
    pub config: TrainConfig,
    /// The model to start from (tiny by default), warm-started with SFT on the env's scripted
    /// baseline when it has one and `config.sft.episodes > 0`.
    pub model: ModelChoice,
    /// Start from this policy checkpoint instead (a run or policy directory; no SFT).
    pub init: Option<std::path::PathBuf>,
    /// The device the policy trains on (recorded in the run's metadata).
    pub device: crate::policy::DeviceKind,
    /// Where the episodes come from (recorded, so that a resumed run keeps it).
    pub source: crate::EpisodeSource,
    /// How the proxy source trains runs whose context broke (recorded likewise; `None`: as
    /// segments).
    pub proxy_samples: Option<crate::proxy::Samples>,
}

impl RunPlan {
    /// Training on `target` in the sandbox with `config`, from the tiny model.
    pub fn new(target: EnvTarget, config: TrainConfig) -> Self {
        Self {
            target,
            backend: Backend::Wasm,
            config,
            model: ModelChoice::default(),
            init: None,
            device: Default::default(),
            source: Default::default(),
            proxy_samples: None,
        }
    }
}

/// A new training run in `out`: the one call that turns an env and a config into a
/// [`Trainer`](sandgym_trainer::Trainer) — the initial policy (a checkpoint, or a fresh or
/// pretrained model warm-started with SFT, its policy saved under `out/sft`), the context
/// budget fitted to the model, `config.episodes_per_iter()` envs on the train split and the
/// run's [`RunMeta`](crate::RunMeta).
pub fn new_run<B: AutodiffBackend>(
    out: &Path,
    plan: RunPlan,
    device: B::Device,
) -> anyhow::Result<sandgym_trainer::Trainer<B>> {
    let RunPlan {
        target,
        backend,
        mut config,
        model: choice,
        init,
        device: device_kind,
        source,
        proxy_samples,
    } = plan;
    anyhow::ensure!(
        !(backend == Backend::Native && target.is_file()),
        "{} is a guest component: it runs only in the sandbox",
        target.env
    );
    let (policy_config, model, tokenizer) = match &init {
        Some(dir) => load::checkpoint::<B>(&RunDir::new(dir).policy(), &device)?,
        None => fresh_policy::<B>(
            &target,
            &config,
            &device,
            Some(RunDir::new(out).sft().path()),
            &choice,
        )?,
    };
    config.rollout.max_context = config.rollout.max_context.min(policy_config.context_length);
    let envs = env_batch(&target, backend, config.episodes_per_iter())?;
    let meta = crate::RunMeta {
        backend,
        init: init.clone(),
        device: device_kind,
        source,
        proxy_samples,
        ..crate::RunMeta::new(&target, choice.model.clone())
    };
    let start = sandgym_trainer::NewRun {
        meta: meta.to_value(),
        config,
        policy_config,
        model,
        tokenizer,
        envs,
        options: ResetOptions::split(env_api::Split::Train),
    };
    Ok(sandgym_trainer::Trainer::<B>::new(out, start, device)?)
}

/// `n` fresh envs of `target`.
pub fn env_batch(target: &EnvTarget, backend: Backend, n: usize) -> env_api::Result<Vec<BoxEnv>> {
    target.batch(backend, n)
}

/// Resumes the run in `dir` from its last checkpoint, with the train-split envs its
/// configuration names (as many as an iteration plays).
pub fn resume_run<B: AutodiffBackend>(
    dir: &Path,
    device: B::Device,
) -> anyhow::Result<sandgym_trainer::Trainer<B>> {
    let run = crate::RunMeta::read(dir)?;
    let envs = env_batch(
        &run.run.target(),
        run.run.backend,
        run.train.episodes_per_iter(),
    )?;
    Ok(sandgym_trainer::Trainer::<B>::resume(
        dir,
        envs,
        ResetOptions::split(env_api::Split::Train),
        device,
    )?)
}

/// The SFT data of `config` for `target`: the scripted baseline's first `config.episodes`
/// train-split episodes (seeds `0..episodes`), the demonstrator's first
/// `config.demonstrations` train tasks in order (each task once up to the split's size) and
/// its recoveries from a mistake on the first `config.recoveries` (those in which it made
/// one), only the successful ones when `config.successful_only`. Asking for demonstrations of
/// an env that has no demonstrator is an error.
pub fn baseline_sft_data(
    target: &EnvTarget,
    config: &SftConfig,
) -> anyhow::Result<Vec<SftExample>> {
    let mut episodes = if config.episodes > 0 {
        baseline_episodes(
            target,
            0..config.episodes as u64,
            &ResetOptions::split(env_api::Split::Train),
        )?
    } else {
        Vec::new()
    };
    for (count, kind) in [
        (config.demonstrations, Demonstration::Solution),
        (config.recoveries, Demonstration::Recovery),
    ] {
        if count == 0 {
            continue;
        }
        let id = target.id()?;
        anyhow::ensure!(
            registry::demonstrator(&id, &target.config, kind)?.is_some(),
            "{id} has no demonstrator: set sft.demonstrations and sft.recoveries to 0"
        );
        let n = target
            .spec()?
            .tasks
            .map_or(count, |t| (t.train as usize).min(count));
        // One demonstrator for every task: it starts afresh at each task's first observation,
        // and making one builds the env's whole task set.
        let mut agent = registry::demonstrator(&id, &target.config, kind)?
            .ok_or_else(|| anyhow::anyhow!("no demonstrator"))?;
        let played = play_env_with(
            target.make_fastest()?,
            0..n as u64,
            &ResetOptions::split(env_api::Split::Train).cycling(),
            &mut *agent,
        )?;
        // A recovery without a mistake would only repeat the solution.
        episodes.extend(
            played
                .into_iter()
                .filter(|e| kind == Demonstration::Solution || e.imitate.contains(&false)),
        );
    }
    Ok(episodes
        .into_iter()
        .filter(|e| e.success || !config.successful_only)
        .map(|e| SftExample {
            trajectory: e.trajectory,
            reset_info: e.reset_info,
            imitate: e.imitate,
        })
        .collect())
}

/// SFT samples of `examples` for `env`, rendered with its tools the way `config`'s rollouts
/// render episodes (and masked by its grammar when `config.sft.constrained`).
pub fn sft_samples(
    env: &EnvTarget,
    tokenizer: &crate::policy::Tokenizer,
    examples: &[SftExample],
    config: &TrainConfig,
) -> anyhow::Result<SftData> {
    Ok(sandgym_trainer::sft::samples(
        tokenizer,
        env.spec()?,
        examples,
        &sandgym_trainer::rollout_settings(config),
        &config.sft,
    )?)
}

/// The default tokenizer: a 1,000-token byte-level BPE trained on the bundled envs' text.
pub fn default_tokenizer() -> anyhow::Result<crate::policy::Tokenizer> {
    Ok(crate::policy::Tokenizer::train(
        crate::env_corpus(200)?.into_iter(),
        1000,
    )?)
}

/// The model a new run starts from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelChoice {
    /// The model.
    pub model: ModelSource,
    /// LoRA rank over a pretrained model; 0 trains every weight.
    pub lora_rank: usize,
}

impl ModelChoice {
    /// The tiny from-scratch model.
    pub fn tiny() -> Self {
        Self::default()
    }

    /// Whether the choice is a pretrained model (anything but the tiny one).
    pub fn is_pretrained(&self) -> bool {
        self.model.is_pretrained()
    }
}

/// The starting policy of `choice`: the tiny model with fresh weights (seeded), or a
/// pretrained model with fresh LoRA adapters (rank `lora_rank`, alpha twice the rank, every
/// projection) whose config records the base model's identity.
pub fn initial_policy<B: burn::tensor::backend::Backend>(
    choice: &ModelChoice,
    seed: u64,
    device: &B::Device,
) -> anyhow::Result<(
    crate::policy::PolicyConfig,
    crate::policy::PolicyModel<B>,
    crate::policy::Tokenizer,
)> {
    B::seed(device, seed);
    match &choice.model {
        ModelSource::Tiny => {
            let tokenizer = default_tokenizer()?;
            let config = crate::policy::PolicyConfig::new(tokenizer.vocab_size());
            let model = config.init::<B>(device);
            Ok((config, model, tokenizer))
        }
        ModelSource::Pretrained(spec) => {
            let loaded = crate::policy::load::model::<B>(spec, device)?;
            let mut config = loaded.config;
            if config.lora.is_some() {
                // Already adapted (a LoRA checkpoint).
                return Ok((config, loaded.model, loaded.tokenizer));
            }
            if choice.lora_rank == 0 {
                // Full fine-tuning: the checkpoints hold every weight; the base is recorded
                // as where they came from.
                config.base.get_or_insert(loaded.info);
                return Ok((config, loaded.model, loaded.tokenizer));
            }
            let lora = crate::policy::LoraConfig {
                rank: choice.lora_rank,
                alpha: 2.0 * choice.lora_rank as f64,
                ..Default::default()
            };
            lora.validate().map_err(anyhow::Error::msg)?;
            let model = loaded.model.with_lora(&lora, device);
            config.lora = Some(lora);
            config.base = Some(loaded.info);
            Ok((config, model, loaded.tokenizer))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multi-turn SQL agent's settings (`configs/sql-agent-multi-turn.json`) apply to the
    /// pretrained preset: several turns, SFT on each, recoveries.
    #[test]
    fn the_multi_turn_sql_config_applies() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../configs/sql-agent-multi-turn.json")).unwrap();
        let c = preset("sql-agent-v0", Algo::Grpo, true)
            .merge_json(&file)
            .unwrap();
        assert!(c.rollout.max_turns >= 3, "run, repair, answer");
        assert!(!c.sft.final_turn_only);
        assert!(c.sft.recoveries > 0 && c.sft.demonstrations > 0);
    }

    /// The SFT-in-runs settings the README measures apply to the main job's preset and change
    /// only the order of SFT's samples.
    #[test]
    fn the_sft_prompt_runs_config_applies() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../configs/sql-agent-sft-prompt-runs.json"))
                .unwrap();
        let base = preset("sql-agent-v0", Algo::Grpo, true);
        assert_eq!(base.sft.prompt_runs, 0, "the main job shuffles plainly");
        let c = base.clone().merge_json(&file).unwrap();
        c.validate().unwrap();
        assert_eq!(c.sft.prompt_runs, 8);
        let mut back = c.clone();
        back.sft.prompt_runs = 0;
        assert_eq!(back, base);
    }

    /// The RL-after-SFT settings the README measures apply to the pretrained preset: no SFT
    /// (they start from `--init RUN/sft`), tasks by pass rate or DAPO's dynamic sampling.
    #[test]
    fn the_rl_after_sft_configs_apply() {
        let pretrained_for = |env: &str, text: &str, algo| {
            let file: serde_json::Value = serde_json::from_str(text).unwrap();
            let c = preset(env, algo, true).merge_json(&file).unwrap();
            c.validate().unwrap();
            c
        };
        let pretrained = |text: &str, algo| pretrained_for("sql-agent-v0", text, algo);
        let c = pretrained(
            include_str!("../configs/sql-agent-rl-pass-rate.json"),
            Algo::Grpo,
        );
        assert_eq!(c.rollout.select, crate::trainer::TaskSelect::PassRate);
        assert_eq!((c.sft.demonstrations, c.schedule.iters), (0, 8));
        let c = pretrained(
            include_str!("../configs/sql-agent-rl-dapo.json"),
            Algo::Dapo,
        );
        assert_eq!((c.sft.demonstrations, c.rollout.max_gen_batches), (0, 6));
        // The written-tasks run keeps the preset's SFT and trains 10 iterations by pass rate.
        let c = pretrained(
            include_str!("../configs/sql-agent-rl-written-tasks.json"),
            Algo::Grpo,
        );
        assert_eq!(c.rollout.select, crate::trainer::TaskSelect::PassRate);
        assert!(c.sft.demonstrations > 0 && c.schedule.iters == 10);
        // RL on new schemas from a checkpoint (`--init`): 20 iterations by pass rate at 4e-5.
        let c = pretrained(
            include_str!("../configs/sql-agent-rl-new-schemas.json"),
            Algo::Grpo,
        );
        assert_eq!(c.rollout.select, crate::trainer::TaskSelect::PassRate);
        assert_eq!((c.optimiser.lr, c.schedule.iters), (4e-5, 20));
        // RL on customer-service wordings SFT never saw, from a checkpoint: no SFT, groups of
        // six by pass rate, three Adam steps an iteration.
        let c = pretrained_for(
            "customer-service-v0",
            include_str!("../configs/customer-service-rl-new-wordings.json"),
            Algo::Grpo,
        );
        assert_eq!(c.rollout.select, crate::trainer::TaskSelect::PassRate);
        assert_eq!((c.sft.demonstrations, c.rollout.group_size), (0, 6));
        assert_eq!(
            c.rollout.tasks_per_iter * c.rollout.group_size / c.optimiser.minibatch,
            3
        );
    }

    /// Recovery demonstrations: one for each train task that joins tables, each a mistake
    /// the engine rejects (shown, not imitated), the solution, and the answer; all succeed.
    #[test]
    fn recovery_demonstrations_show_the_error_and_learn_the_repair() {
        let target = EnvTarget::new("sql-agent-v0");
        let config = SftConfig {
            recoveries: 1000,
            successful_only: true,
            ..SftConfig::default()
        };
        let examples = baseline_sft_data(&target, &config).unwrap();
        let joins = sandgym_env_sql::bundled_tasks()
            .split(env_api::Split::Train)
            .iter()
            .filter(|t| t.gold_sql.contains(" JOIN "))
            .count();
        assert!(joins > 0);
        assert_eq!(examples.len(), joins);
        for e in &examples {
            let records = &e.trajectory.records;
            assert_eq!(e.imitate, [false, true, true]);
            assert!(records[0].observation.starts_with("error:"), "{records:?}");
            let (wrong, right) = (&records[0].action, &records[1].action);
            assert_ne!(wrong, right);
            assert_eq!(
                records[2].response.as_deref(),
                right.as_ref().and_then(|a| a.parameters["query"].as_str())
            );
        }
        // Solutions are all imitated.
        let plain = SftConfig {
            demonstrations: 10,
            ..SftConfig::default()
        };
        for e in baseline_sft_data(&target, &plain).unwrap() {
            assert!(e.imitate.iter().all(|&i| i));
        }
    }

    /// The customer-service preset for a pretrained model learns from the gold demonstrator:
    /// 20 successful episodes of each of the nine intents (the refusals included), every
    /// action with a thought that fits the preset's thought budget; recoveries are refused.
    #[test]
    fn the_customer_service_preset_learns_every_intent_from_the_gold_demonstrator() {
        let c = preset("customer-service-v0", Algo::Grpo, true);
        let target = EnvTarget::new("customer-service-v0");
        let examples = baseline_sft_data(&target, &c.sft).unwrap();
        assert_eq!(examples.len(), c.sft.demonstrations);
        let mut intents = std::collections::BTreeMap::<String, usize>::new();
        for e in &examples {
            *intents
                .entry(e.reset_info["intent"].as_str().unwrap().to_owned())
                .or_default() += 1;
            let records = &e.trajectory.records;
            assert_eq!(records.last().unwrap().reward, 1.0, "{records:?}");
            for r in records {
                assert!(!r.thought.is_empty(), "{r:?}");
                assert!(r.thought.chars().count() <= c.rollout.thought_chars as usize);
            }
        }
        assert_eq!(intents.len(), 9, "{intents:?}");
        assert!(intents.values().all(|&n| n == 20), "{intents:?}");
        let recoveries = SftConfig {
            recoveries: 10,
            ..SftConfig::default()
        };
        let error = baseline_sft_data(&target, &recoveries).unwrap_err();
        assert!(error.to_string().contains("no recovery"), "{error}");
    }

    /// Every preset is a valid configuration, for every bundled env, algorithm and kind of
    /// model (a preset that fails validation would only show when someone trains with it).
    #[test]
    fn every_preset_validates() {
        for bundled in crate::registry::BUNDLED {
            let id = format!("{}-v0", bundled.name);
            for algo in [
                Algo::Grpo,
                Algo::Ppo,
                Algo::Rloo,
                Algo::Dapo,
                Algo::ReinforcePp,
            ] {
                for pretrained in [false, true] {
                    let c = preset(&id, algo, pretrained);
                    c.validate()
                        .unwrap_or_else(|e| panic!("{id} {algo:?} pretrained={pretrained}: {e}"));
                }
            }
        }
    }
}
