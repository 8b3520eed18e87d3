//! A training run: the iteration loop, its run directory, checkpoints and resume.
//!
//! Its directory's layout is [`RunDir`]'s: `config.json`, `metrics.jsonl`, `eval.jsonl`,
//! `episodes/`, `plots/`, `checkpoint/` (replaced atomically: written beside, then renamed) and
//! `reference/`.
//!
//! Every random choice of iteration `i` (tasks, sampling, minibatch order) is derived from
//! the config's seed and `i`, and the weights and optimiser state are checkpointed in full
//! precision, so a run resumed from the checkpoint of iteration `i` plays iteration `i + 1` on
//! the same tasks with the same sampling seeds from the same state as an uninterrupted run.
//! (The CPU backend's reductions are not bit-reproducible from run to run, so losses agree to
//! float noise, ~1e-9, rather than bit for bit.)

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn::tensor::backend::AutodiffBackend;
use sandgym_env_api::{BoxEnv, ResetOptions, SplitMix64};
use sandgym_policy::{ActionLimits, PolicyConfig, PolicyModel, Tokenizer, checkpoint, load};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::batch::{Sample, assign_advantages, usable};
use crate::config::{Algo, TrainConfig};
use crate::curriculum::{PassRates, TaskSelect};
use crate::episode_log::{EpisodeKind, write_episode_log};
use crate::error::io;
use crate::learner::{Learner, StepStats};
use crate::metrics::{EvalPoint, IterMetrics, MetricsLog, episode_figures, read_metrics};
use crate::plot::{Series, line_chart};
use crate::rollout::{Episode, RolloutEngine, RolloutSettings};
use crate::run_dir::{Checkpoint, RunDir};
use crate::{Result, TrainError};

/// `config.json` of a run: the caller's description of it (`M`: the command line's typed
/// run metadata — env, its configuration, backend, model — or any JSON) and the training
/// settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig<M = Value> {
    /// The caller's description of the run.
    pub run: M,
    /// The training settings.
    pub train: TrainConfig,
}

/// What a new run starts from (see [`Trainer::new`]).
#[allow(missing_debug_implementations)] // the envs are trait objects without `Debug`
pub struct NewRun<B: AutodiffBackend> {
    /// The caller's description of the run, saved as `run` in `config.json` and read back
    /// with [`read_run_config`] in the caller's own type.
    pub meta: Value,
    /// The training settings.
    pub config: TrainConfig,
    /// The initial policy's architecture.
    pub policy_config: PolicyConfig,
    /// The initial policy.
    pub model: PolicyModel<B>,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// At least [`TrainConfig::episodes_per_iter`] envs.
    pub envs: Vec<BoxEnv>,
    /// The reset options of training episodes (e.g. the train split).
    pub options: ResetOptions,
}

/// `checkpoint/state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct RunState {
    iter: u32,
    elapsed_s: f64,
    /// The train tasks' records (`rollout.select: pass_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pass_rates: Option<PassRates>,
}

/// The rollout shape a config implies.
pub fn rollout_settings(config: &TrainConfig) -> RolloutSettings {
    RolloutSettings {
        max_turns: config.rollout.max_turns,
        max_new_tokens: config.rollout.max_new_tokens,
        max_context: config.rollout.max_context,
        max_observation_chars: config.rollout.max_observation_chars,
        batch_tokens: config.rollout.batch_tokens,
        eval_at_once: config.rollout.eval_at_once,
        limits: ActionLimits {
            thought_chars: config.rollout.thought_chars,
            response_chars: config.rollout.response_chars,
        },
    }
}

fn run_error(path: &Path, reason: impl std::fmt::Display) -> TrainError {
    TrainError::Run {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn mix(parts: &[u64]) -> u64 {
    parts.iter().fold(0x5EED_u64, |acc, &p| {
        SplitMix64::new(acc ^ p.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
    })
}

/// The episodes of iteration `iter` (from 1), generation batch `batch`: `(group, seed)` for
/// each rollout, `group_size` rollouts per task. Any other way of playing an iteration (e.g.
/// harnesses behind the recording proxy) uses these to play the same tasks and seeds.
pub fn iteration_jobs(config: &TrainConfig, iter: u32, batch: u32) -> Vec<(usize, u64)> {
    (0..config.rollout.tasks_per_iter)
        .flat_map(|g| {
            let group = batch as usize * config.rollout.tasks_per_iter + g;
            let seed = mix(&[
                config.schedule.seed,
                u64::from(iter),
                u64::from(batch),
                g as u64,
            ]);
            std::iter::repeat_n((group, seed), config.rollout.group_size)
        })
        .collect()
}

/// The task records of a run that selects by pass rate (`None` otherwise): an error when the
/// env has no fixed train task list to keep records of.
fn pass_rates(config: &TrainConfig, envs: &[BoxEnv]) -> Result<Option<PassRates>> {
    if config.rollout.select != TaskSelect::PassRate {
        return Ok(None);
    }
    match envs.first().and_then(|e| e.spec().tasks).map(|t| t.train) {
        Some(n) if n > 0 => Ok(Some(PassRates::new(n as usize))),
        _ => Err(TrainError::Config(
            "rollout.select \"pass_rate\" needs an env with a fixed train task list (its spec's tasks)"
                .into(),
        )),
    }
}

/// The episodes of iteration `iter`, batch `batch`, of a run that selects by pass rate:
/// `tasks_per_iter` train tasks not yet `taken` this iteration, drawn by their records, each
/// played `group_size` times. Each seed names its task by position (`seed mod n`, with
/// [`ResetOptions::cycle`]) and varies the rest of the episode by iteration.
fn chosen_jobs(
    config: &TrainConfig,
    rates: &PassRates,
    iter: u32,
    batch: u32,
    taken: &mut Vec<usize>,
) -> Vec<(usize, u64)> {
    let mut rng = SplitMix64::new(mix(&[
        config.schedule.seed,
        u64::from(iter),
        u64::from(batch),
        0x7A5C,
    ]));
    let tasks = rates.choose(
        config.rollout.tasks_per_iter,
        config.rollout.group_size,
        taken,
        &mut rng,
    );
    taken.extend(&tasks);
    let n = rates.len() as u64;
    tasks
        .iter()
        .enumerate()
        .flat_map(|(g, &task)| {
            let group = batch as usize * config.rollout.tasks_per_iter + g;
            let seed = task as u64 + n * (rng.next_u64() >> 24);
            std::iter::repeat_n((group, seed), config.rollout.group_size)
        })
        .collect()
}

/// A training run in progress.
pub struct Trainer<B: AutodiffBackend> {
    config: TrainConfig,
    policy_config: PolicyConfig,
    tokenizer: Tokenizer,
    learner: Learner<B>,
    reference: Option<PolicyModel<B::InnerBackend>>,
    engine: RolloutEngine,
    options: ResetOptions,
    out: PathBuf,
    log: MetricsLog,
    evals: MetricsLog<EvalPoint>,
    iter: u32,
    elapsed_before: f64,
    started: Instant,
    pass_rates: Option<PassRates>,
}

impl<B: AutodiffBackend> std::fmt::Debug for Trainer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("out", &self.out)
            .field("iter", &self.iter)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<B: AutodiffBackend> Trainer<B> {
    /// Starts a new run in `out` from what `start` holds. Refuses a directory that already
    /// holds a checkpoint.
    pub fn new(out: &Path, start: NewRun<B>, device: B::Device) -> Result<Self> {
        let NewRun {
            meta: run,
            config,
            policy_config,
            model,
            tokenizer,
            envs,
            options,
        } = start;
        config.validate()?;
        let pass_rates = pass_rates(&config, &envs)?;
        if RunDir::new(out).checkpoint().exists() {
            return Err(run_error(
                out,
                "it already holds a run; resume it or choose another --out",
            ));
        }
        std::fs::create_dir_all(out).map_err(io(out))?;
        let run_config = RunConfig {
            run,
            train: config.clone(),
        };
        let path = RunDir::new(out).config();
        let text = serde_json::to_string_pretty(&run_config).expect("config serialises");
        std::fs::write(&path, text).map_err(io(&path))?;
        let _ = std::fs::remove_file(RunDir::new(out).metrics());
        let _ = std::fs::remove_file(RunDir::new(out).evals());
        let reference = if config.objective.kl.coef > 0.0 {
            checkpoint::save(
                &RunDir::new(out).reference(),
                &policy_config,
                &model,
                &tokenizer,
            )?;
            Some(model.valid().for_inference())
        } else {
            None
        };
        let engine = Self::engine(&config, envs, &tokenizer)?;
        let learner =
            Learner::for_config(model, policy_config.vocab_size, &config.optimiser, device);
        Ok(Self {
            log: MetricsLog::new(RunDir::new(out).metrics()),
            evals: MetricsLog::new(RunDir::new(out).evals()),
            config,
            policy_config,
            tokenizer,
            learner,
            reference,
            engine,
            options,
            out: out.to_owned(),
            iter: 0,
            elapsed_before: 0.0,
            started: Instant::now(),
            pass_rates,
        })
    }

    /// Resumes the run in `out` from its last checkpoint; iterations logged after that
    /// checkpoint are dropped and will be played again.
    pub fn resume(
        out: &Path,
        envs: Vec<BoxEnv>,
        options: ResetOptions,
        device: B::Device,
    ) -> Result<Self> {
        let run = read_run_config::<Value>(out)?;
        let config = run.train;
        recover_checkpoint(out)?;
        let ckpt = RunDir::new(out).checkpoint();
        let state_path = Checkpoint::state(&ckpt);
        let state: RunState =
            serde_json::from_str(&std::fs::read_to_string(&state_path).map_err(io(&state_path))?)
                .map_err(|e| run_error(&state_path, e))?;
        let (policy_config, model, tokenizer) =
            load::checkpoint::<B>(&Checkpoint::policy(&ckpt), &device)?;
        let reference = if config.objective.kl.coef > 0.0 {
            let (_, r, _) =
                load::checkpoint::<B::InnerBackend>(&RunDir::new(out).reference(), &device)?;
            Some(r.for_inference())
        } else {
            None
        };
        let fresh = pass_rates(&config, &envs)?;
        let pass_rates = match (state.pass_rates, fresh) {
            (Some(saved), Some(fresh)) if saved.len() == fresh.len() => Some(saved),
            (Some(_), Some(_)) => {
                return Err(run_error(
                    &state_path,
                    "the saved task records are of another task list",
                ));
            }
            (_, fresh) => fresh,
        };
        let engine = Self::engine(&config, envs, &tokenizer)?;
        let mut learner =
            Learner::for_config(model, policy_config.vocab_size, &config.optimiser, device);
        let opt_path = Checkpoint::optimizer(&ckpt);
        // burn panics on some malformed records (a record of another model's shapes); keep
        // that inside this call, as the policy's own load does.
        let optim = learner.optim.clone();
        let device = learner.device.clone();
        learner.optim = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            NamedMpkFileRecorder::<FullPrecisionSettings>::new()
                .load(opt_path.clone(), &device)
                .map(|record| optim.load_record(record))
        }))
        .map_err(|_| run_error(&opt_path, "the optimizer state does not match the model"))?
        .map_err(|e| run_error(&opt_path, e))?;
        let log = MetricsLog::new(RunDir::new(out).metrics());
        log.truncate_after(state.iter)?;
        let evals = MetricsLog::new(RunDir::new(out).evals());
        evals.truncate_after(state.iter)?;
        Ok(Self {
            log,
            evals,
            config,
            policy_config,
            tokenizer,
            learner,
            reference,
            engine,
            options,
            out: out.to_owned(),
            iter: state.iter,
            elapsed_before: state.elapsed_s,
            started: Instant::now(),
            pass_rates,
        })
    }

    fn engine(config: &TrainConfig, envs: Vec<BoxEnv>, tok: &Tokenizer) -> Result<RolloutEngine> {
        if envs.len() < config.episodes_per_iter() {
            return Err(TrainError::Config(format!(
                "{} envs for {} episodes per iteration",
                envs.len(),
                config.episodes_per_iter()
            )));
        }
        RolloutEngine::new(
            envs,
            config.rollout.env_threads,
            tok.clone(),
            rollout_settings(config),
        )
    }

    /// The settings of the run.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Iterations completed.
    pub fn iteration(&self) -> u32 {
        self.iter
    }

    /// The policy being trained.
    pub fn model(&self) -> &PolicyModel<B> {
        &self.learner.model
    }

    /// The policy's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The run directory.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Whether every configured iteration has run.
    pub fn finished(&self) -> bool {
        self.iter >= self.config.schedule.iters
    }

    /// Plays and learns from one iteration; appends its metrics and checkpoints on schedule.
    pub fn step(&mut self) -> Result<IterMetrics> {
        let iter = self.iter + 1;
        let c = self.config.clone();
        let rollout_clock = Instant::now();
        let model = self.learner.inference_model();
        let device = self.learner.device.clone();
        let batches = if c.algo == Algo::Dapo {
            c.rollout.max_gen_batches.max(1)
        } else {
            1
        };
        let mut played: Vec<Episode> = Vec::new();
        let mut kept: Vec<Episode> = Vec::new();
        let mut filtered = 0;
        let mut stats = crate::rollout::RolloutStats::default();
        let mut taken = Vec::new();
        for batch in 0..batches {
            let (jobs, options) = match &self.pass_rates {
                Some(rates) => (
                    chosen_jobs(&c, rates, iter, batch, &mut taken),
                    self.options.clone().cycling(),
                ),
                None => (iteration_jobs(&c, iter, batch), self.options.clone()),
            };
            let sample_seed = mix(&[c.schedule.seed, u64::from(iter), u64::from(batch), u64::MAX]);
            let (eps, s) = self.engine.run(
                &model,
                &device,
                &jobs,
                &options,
                c.rollout.temperature,
                sample_seed,
            )?;
            if let Some(rates) = &mut self.pass_rates {
                let n = rates.len() as u64;
                for e in eps.iter().filter(|e| e.error.is_none()) {
                    rates.record((e.seed % n) as usize, e.success);
                }
            }
            stats.generated_tokens += s.generated_tokens;
            stats.generate_time += s.generate_time;
            stats.env_steps += s.env_steps;
            stats.env_time += s.env_time;
            stats.journal.extend(&s.journal);
            played.extend(eps.iter().cloned());
            let (good, _) = usable(eps, c.rollout.on_env_error);
            if c.algo == Algo::Dapo {
                let (varied, dropped) = varied_groups(good);
                filtered += dropped;
                kept.extend(varied);
                let groups: std::collections::BTreeSet<usize> =
                    kept.iter().map(|e| e.group).collect();
                if groups.len() >= c.rollout.tasks_per_iter {
                    break;
                }
            } else {
                kept = good;
            }
        }
        if c.algo == Algo::Dapo {
            let groups: Vec<usize> = {
                let set: std::collections::BTreeSet<usize> = kept.iter().map(|e| e.group).collect();
                set.into_iter().take(c.rollout.tasks_per_iter).collect()
            };
            kept.retain(|e| groups.contains(&e.group));
        }
        let rollout_s = rollout_clock.elapsed().as_secs_f64();
        self.learn(played, kept, filtered, &stats, rollout_s)
    }

    /// Learns from episodes played elsewhere (e.g. traces of a harness behind the recording
    /// proxy) as one iteration: unusable episodes are dropped as configured, DAPO keeps only
    /// groups with varied rewards, then the update, metrics and checkpoint are as in
    /// [`step`](Self::step). The iteration's reward and success figures come from `played`
    /// (one episode per run, e.g. the last segment of each harness run); `rollout_s` is the
    /// time it took to play them.
    pub fn learn_from(
        &mut self,
        episodes: Vec<Episode>,
        played: Vec<Episode>,
        stats: &crate::rollout::RolloutStats,
        rollout_s: f64,
    ) -> Result<IterMetrics> {
        let (mut kept, _) = usable(episodes, self.config.rollout.on_env_error);
        let mut filtered = 0;
        if self.config.algo == Algo::Dapo {
            let (varied, dropped) = varied_groups(kept);
            kept = varied;
            filtered = dropped;
        }
        self.learn(played, kept, filtered, stats, rollout_s)
    }

    /// Changes the run's settings for what follows (e.g. a learner that never evaluates on
    /// envs); settings that fail [`TrainConfig::validate`] are refused and nothing changes.
    pub fn configure(&mut self, change: impl FnOnce(&mut TrainConfig)) -> Result<()> {
        let mut c = self.config.clone();
        change(&mut c);
        c.validate()?;
        self.config = c;
        Ok(())
    }

    /// Replaces the policy being trained with `model` (same architecture), with a fresh
    /// optimiser state: e.g. a learner whose version was rolled back starts again from the
    /// version that serves. The next iteration's checkpoint holds it.
    pub fn reset_policy(&mut self, model: PolicyModel<B>) {
        let device = self.learner.device.clone();
        self.learner = Learner::for_config(
            model,
            self.policy_config.vocab_size,
            &self.config.optimiser,
            device,
        );
    }

    /// The policy's model configuration (architecture, LoRA, base model).
    pub fn policy_config(&self) -> &PolicyConfig {
        &self.policy_config
    }

    /// The policy being trained, for inference (no autodiff).
    pub fn inference_model(&self) -> PolicyModel<B::InnerBackend> {
        self.learner.inference_model()
    }

    fn learn(
        &mut self,
        played: Vec<Episode>,
        kept: Vec<Episode>,
        filtered: usize,
        stats: &crate::rollout::RolloutStats,
        rollout_s: f64,
    ) -> Result<IterMetrics> {
        let iter = self.iter + 1;
        let c = self.config.clone();
        if self.iter == 0 && c.eval.every > 0 {
            // The starting point of the evaluation curve (the policy has not changed yet).
            self.evaluate()?;
        }
        let update_clock = Instant::now();
        let mut samples: Vec<Sample> = kept.iter().map(Sample::from_episode).collect();
        self.learner.score(
            &mut samples,
            c.algo == Algo::Ppo,
            self.reference.as_ref(),
            c.rollout.temperature,
            c.optimiser.minibatch,
        );
        assign_advantages(&kept, &mut samples, &c);
        let mut totals = StepStats::default();
        let mut steps = 0;
        let before = crate::norms::Trainable::of(&self.learner.model);
        let mut rng = SplitMix64::new(mix(&[c.schedule.seed, u64::from(iter), 0x0DE7]));
        for _ in 0..c.optimiser.epochs {
            let mut order: Vec<usize> = (0..samples.len()).collect();
            rng.shuffle(&mut order);
            for chunk in order.chunks(c.optimiser.minibatch) {
                let batch: Vec<&Sample> = chunk.iter().map(|&i| &samples[i]).collect();
                let s = self.learner.rl_step(&batch, &c);
                let w = s.tokens as f64;
                totals.loss += s.loss * w;
                totals.pg_loss += s.pg_loss * w;
                totals.vf_loss += s.vf_loss * w;
                totals.kl_ref += s.kl_ref * w;
                totals.entropy += s.entropy * w;
                totals.clip_frac += s.clip_frac * w;
                totals.ppo_kl += s.ppo_kl * w;
                totals.tokens += s.tokens;
                totals.grad_norm += s.grad_norm;
                steps += 1;
            }
        }
        let w = (totals.tokens as f64).max(1.0);
        let mut m = IterMetrics {
            iter,
            trained_episodes: kept.len(),
            filtered_groups: filtered,
            entropy: totals.entropy / w,
            kl_ref: totals.kl_ref / w,
            ppo_kl: totals.ppo_kl / w,
            clip_frac: totals.clip_frac / w,
            loss: totals.loss / w,
            pg_loss: totals.pg_loss / w,
            vf_loss: totals.vf_loss / w,
            grad_steps: steps,
            grad_norm: totals.grad_norm / steps.max(1) as f64,
            update_norm: before.distance(&crate::norms::Trainable::of(&self.learner.model)),
            weight_norm: before.norm(),
            tokens_per_s: stats.generated_tokens as f64
                / stats.generate_time.as_secs_f64().max(1e-9),
            env_steps_per_s: stats.env_steps as f64 / stats.env_time.as_secs_f64().max(1e-9),
            rollout_s,
            update_s: update_clock.elapsed().as_secs_f64(),
            ..IterMetrics::default()
        };
        episode_figures(&mut m, &played);
        group_figures(&mut m, &kept);
        let captured = stats.journal.captured(&kept);
        m.calls_sampled = stats.journal.len();
        m.calls_trained_exactly = captured.calls;
        m.tokens_trained_exactly = captured.tokens;
        m.elapsed_s = self.elapsed_before + self.started.elapsed().as_secs_f64();
        self.iter = iter;
        self.log.append(&m)?;
        let every = c.schedule.episodes_every;
        if every > 0 && iter.is_multiple_of(every) {
            write_episode_log(
                &self.out,
                (EpisodeKind::Train, iter),
                &played,
                &self.options,
                &self.tokenizer,
            )?;
        }
        if c.eval.every > 0 && (iter.is_multiple_of(c.eval.every) || iter >= c.schedule.iters) {
            self.evaluate()?;
        }
        if iter.is_multiple_of(c.schedule.save_every.max(1)) || iter >= c.schedule.iters {
            self.save()?;
        }
        Ok(m)
    }

    /// Evaluates the current policy as configured (`eval_every`, `eval_episodes`,
    /// `eval_split`): greedy, on seeds `0..eval_episodes`; appends the result to `eval.jsonl`.
    pub fn evaluate(&mut self) -> Result<EvalPoint> {
        let c = &self.config;
        let (seeds, options) = crate::eval::eval_plan(
            self.engine.spec().tasks,
            c.eval.split,
            Some(c.eval.episodes),
            c.eval.episodes,
        );
        let model = self.learner.inference_model();
        let (report, episodes) = crate::eval::evaluate(
            &mut self.engine,
            &model,
            &self.learner.device,
            &seeds,
            &options,
            0.0,
        )?;
        let point = EvalPoint {
            iter: self.iter,
            split: c.eval.split,
            episodes: report.episodes,
            success_rate: report.success_rate,
            success_ci95: report.success_ci95,
            mean_reward: report.mean_reward,
        };
        self.evals.append(&point)?;
        if c.schedule.episodes_every > 0 {
            write_episode_log(
                &self.out,
                (EpisodeKind::Eval, self.iter),
                &episodes,
                &options,
                &self.tokenizer,
            )?;
        }
        Ok(point)
    }

    /// Writes the checkpoint of the current iteration (atomically) and refreshes the plots.
    pub fn save(&self) -> Result<()> {
        let ckpt = RunDir::new(&self.out).checkpoint();
        let tmp = RunDir::new(&self.out).checkpoint_tmp();
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        checkpoint::save(
            &Checkpoint::policy(&tmp),
            &self.policy_config,
            &self.learner.model,
            &self.tokenizer,
        )?;
        let opt = Checkpoint::optimizer(&tmp);
        NamedMpkFileRecorder::<FullPrecisionSettings>::new()
            .record(self.learner.optim.to_record(), opt.clone())
            .map_err(|e| run_error(&opt, e))?;
        let state = RunState {
            iter: self.iter,
            elapsed_s: self.elapsed_before + self.started.elapsed().as_secs_f64(),
            pass_rates: self.pass_rates.clone(),
        };
        let state_path = Checkpoint::state(&tmp);
        std::fs::write(
            &state_path,
            serde_json::to_string(&state).expect("state serialises"),
        )
        .map_err(io(&state_path))?;
        let old = RunDir::new(&self.out).checkpoint_old();
        let _ = std::fs::remove_dir_all(&old);
        if ckpt.exists() {
            std::fs::rename(&ckpt, &old).map_err(io(&ckpt))?;
        }
        std::fs::rename(&tmp, &ckpt).map_err(io(&ckpt))?;
        let _ = std::fs::remove_dir_all(&old);
        write_plots(&self.out)
    }

    /// Runs the remaining iterations, calling `progress` after each.
    pub fn run(&mut self, mut progress: impl FnMut(&IterMetrics)) -> Result<()> {
        while !self.finished() {
            let m = self.step()?;
            progress(&m);
        }
        self.save_if_unsaved()
    }

    /// Checkpoints the policy when the run holds no checkpoint yet: a run of no iterations
    /// (`--iters 0`, SFT alone) leaves its policy where evaluations, `--init` and `--resume`
    /// look for it, instead of a directory whose `config.json` is the run's.
    pub fn save_if_unsaved(&self) -> Result<()> {
        if Checkpoint::policy(&RunDir::new(&self.out).checkpoint()).exists() {
            return Ok(());
        }
        self.save()
    }
}

/// How many groups `kept` has, how many of them teach nothing under a group baseline (every
/// reward equal) and how many the policy already solves (every episode a success).
fn group_figures(m: &mut IterMetrics, kept: &[Episode]) {
    let mut groups: std::collections::BTreeMap<usize, Vec<&Episode>> = Default::default();
    for e in kept {
        groups.entry(e.group).or_default().push(e);
    }
    m.groups = groups.len();
    m.zero_variance_groups = groups
        .values()
        .filter(|g| g.iter().all(|e| e.total_reward() == g[0].total_reward()))
        .count();
    m.solved_groups = groups
        .values()
        .filter(|g| g.iter().all(|e| e.success))
        .count();
}

/// Keeps the groups whose total rewards are not all equal (DAPO's dynamic sampling); returns
/// them and the number of groups dropped.
fn varied_groups(episodes: Vec<Episode>) -> (Vec<Episode>, usize) {
    let mut by: std::collections::BTreeMap<usize, Vec<f64>> = Default::default();
    for e in &episodes {
        by.entry(e.group).or_default().push(e.total_reward());
    }
    let keep: std::collections::BTreeSet<usize> = by
        .iter()
        .filter(|(_, r)| r.iter().any(|x| (x - r[0]).abs() > 1e-12))
        .map(|(g, _)| *g)
        .collect();
    let dropped = by.len() - keep.len();
    (
        episodes
            .into_iter()
            .filter(|e| keep.contains(&e.group))
            .collect(),
        dropped,
    )
}

/// Finishes a checkpoint swap that a killed process left half done. [`Trainer::save`] writes
/// the new checkpoint beside (`.checkpoint.tmp`, its `state.json` last), moves the old one
/// aside (`.checkpoint.old`), moves the new one in and removes the old one; a kill between the
/// two moves leaves no `checkpoint/`. Then a whole new checkpoint (its `state.json` readable)
/// is moved in, else the old one is moved back. A `checkpoint/` that exists is left as it is.
fn recover_checkpoint(out: &Path) -> Result<()> {
    let ckpt = RunDir::new(out).checkpoint();
    if ckpt.exists() {
        return Ok(());
    }
    let whole = |dir: &Path| {
        std::fs::read_to_string(Checkpoint::state(dir))
            .ok()
            .and_then(|t| serde_json::from_str::<RunState>(&t).ok())
            .is_some()
    };
    for candidate in [
        RunDir::new(out).checkpoint_tmp(),
        RunDir::new(out).checkpoint_old(),
    ] {
        if whole(&candidate) {
            return std::fs::rename(&candidate, &ckpt).map_err(io(&ckpt));
        }
    }
    Ok(())
}

/// Reads a run directory's `config.json`, its run description as an `M` (`Value` reads any).
pub fn read_run_config<M: serde::de::DeserializeOwned>(out: &Path) -> Result<RunConfig<M>> {
    let path = RunDir::new(out).config();
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let run: RunConfig<M> =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text))
            .map_err(|e| run_error(&path, format!("`{}`: {}", e.path(), e.inner())))?;
    run.train.validate()?;
    Ok(run)
}

/// Redraws `plots/*.png` of a run from its `metrics.jsonl` (nothing before its first iteration).
pub fn write_plots(out: &Path) -> Result<()> {
    if !RunDir::new(out).metrics().exists() {
        // No iteration has run (`--iters 0`): nothing to plot.
        return Ok(());
    }
    let metrics: Vec<IterMetrics> = read_metrics(&RunDir::new(out).metrics())?;
    let evals: Vec<EvalPoint> = if RunDir::new(out).evals().exists() {
        read_metrics(&RunDir::new(out).evals())?
    } else {
        Vec::new()
    };
    let dir = RunDir::new(out).plots();
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let curve = |name: &str, f: &dyn Fn(&IterMetrics) -> f64| {
        Series::new(
            name,
            metrics.iter().map(|m| (f64::from(m.iter), f(m))).collect(),
        )
    };
    // Per-iteration figures are noisy (each iteration draws its own tasks): the main curves
    // come with their trailing mean over five iterations.
    let with_mean = |name: &str, f: &dyn Fn(&IterMetrics) -> f64| {
        let points = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let window = &metrics[i.saturating_sub(4)..=i];
                let mean = window.iter().map(f).sum::<f64>() / window.len() as f64;
                (f64::from(m.iter), mean)
            })
            .collect();
        vec![curve(name, f), Series::new("mean of 5", points)]
    };
    let charts: [(&str, &str, Vec<Series>); 6] = [
        (
            "reward",
            "mean reward",
            with_mean("reward", &|m| m.reward_mean),
        ),
        ("success", "success rate", {
            let mut s = with_mean("success", &|m| m.success_rate);
            if !evals.is_empty() {
                s.push(Series::new(
                    "eval (greedy, fixed seeds)",
                    evals
                        .iter()
                        .map(|e| (f64::from(e.iter), e.success_rate))
                        .collect(),
                ));
            }
            s
        }),
        ("entropy", "entropy", vec![curve("entropy", &|m| m.entropy)]),
        (
            "kl",
            "kl",
            vec![
                curve("kl to reference", &|m| m.kl_ref),
                curve("kl old-new", &|m| m.ppo_kl),
            ],
        ),
        (
            "diversity",
            "trajectory diversity",
            vec![curve("diversity", &|m| m.diversity)],
        ),
        (
            "loss",
            "loss",
            vec![
                curve("loss", &|m| m.loss),
                curve("clip fraction", &|m| m.clip_frac),
            ],
        ),
    ];
    for (file, title, series) in charts {
        line_chart(
            &dir.join(format!("{file}.png")),
            title,
            "iteration",
            &series,
        )?;
    }
    Ok(())
}
