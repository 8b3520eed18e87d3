//! The comparison behind `sandgym compare`: the env approach and the proxy approach on the
//! same agent, each prepared the way a team would do it from the same pretrained model — the
//! env approach SFT on the env's demonstrations, the proxy approach SFT on the unmodified
//! harness's traces answered by a teacher (the demonstrator behind an OpenAI-compatible
//! endpoint, [`crate::teacher`]) — then the same RL budget on the same tasks and seeds, and
//! each final policy evaluated in both places: inside the env, and inside the harness through
//! the policy server ([`crate::harness_eval`]), every test task once. [`markdown`] renders the
//! report as the README's tables.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::approach::{ProxyApproach, ProxyIteration, ProxySettings, percentile};
use crate::compare_stages::Stages;
use crate::env_api::{ResetOptions, Split};
use crate::evaluation::DEFAULT_EPISODES;
use crate::harness_eval::{HarnessEval, harness_eval};
use crate::harness_runner::HarnessTotals;
use crate::policy::{Cpu, CpuTrain, PolicyModel, Tokenizer, load};
use crate::proxy::{Drift, Samples, TraceStats, TraceStore};
use crate::proxy_sft::{TeacherData, teacher_samples};
use crate::trainer::plot::{Series, line_chart};
use crate::trainer::{
    Algo, EvalReport, IterMetrics, NewRun, RolloutEngine, RunDir, TrainConfig, Trainer, eval_envs,
    eval_plan, evaluate, rollout_settings,
};
use crate::training::{
    ModelChoice, baseline_sft_data, env_batch, initial_policy, settings, sft_policy, sft_train,
};
use crate::{Backend, EnvTarget, EpisodeSource};

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The env (one with a harness: sql-agent-v0 or customer-service-v0).
    pub env: String,
    /// The model both approaches start from.
    pub model: ModelChoice,
    /// The algorithm both approaches train with.
    pub algo: Algo,
    /// Training iterations of each approach (`None`: the preset's).
    pub iters: Option<u32>,
    /// Output directory: `env/` and `proxy/` runs (each with its warm start in `sft/`), a
    /// `proxy-<kind>/` run per further kind of sample, `compare.json`, `compare-reward.png`.
    pub out: PathBuf,
    /// Start both approaches from this policy (a run or policy directory) instead of
    /// preparing each with its own SFT.
    pub init: Option<PathBuf>,
    /// A JSON file of settings overriding the env's preset.
    pub config: Option<PathBuf>,
    /// Seed of tasks, sampling and initial weights.
    pub seed: Option<u64>,
    /// Harness runs at a time in the proxy approach.
    pub concurrency: usize,
    /// Test episodes each final policy is evaluated on in each place (`None`: every test
    /// task once); 0 skips the evaluation.
    pub eval_episodes: Option<usize>,
    /// How the proxy approach trains a run whose context broke into segments: the first kind
    /// is the report's `proxy_approach`; each further kind trains the proxy approach again from
    /// the same warm start, with the same RL budget and seeds (`proxy_alternatives`), so the
    /// kinds are compared on one starting point. Not empty, no kind twice.
    pub proxy_samples: Vec<Samples>,
    /// The harness's history budget in characters, beyond which it elides its oldest tool
    /// outputs (`None`: [`ProxySettings::for_config`]'s, twice the model's context in tokens,
    /// which the bundled envs' conversations stay under). It applies wherever the harness
    /// runs: the teacher's traces, RL and the evaluations in the harness.
    pub history_chars: Option<usize>,
    /// Resume the comparison in `out` where it stopped (its finished stages are recorded in
    /// `out/stages/`): the same options, each finished stage taken from what it left.
    pub resume: bool,
}

/// How an approach's policy was prepared before RL.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WarmStart {
    /// What it learned from.
    pub data: String,
    /// Samples (token sequences) trained on.
    pub samples: usize,
    /// Wall time, s (recording the data and training on it).
    pub wall_s: f64,
    /// The teacher's traces (the proxy approach).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher: Option<TeacherData>,
}

/// A final policy's figures in one place.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cell {
    /// Episodes played.
    pub episodes: usize,
    /// Fraction solved.
    pub success_rate: f64,
    /// Its 95% interval (Wilson).
    pub success_ci95: (f64, f64),
    /// Mean total reward.
    pub mean_reward: f64,
    /// Episodes that ended on an env or harness failure.
    pub errors: usize,
    /// Model calls made.
    pub model_calls: usize,
    /// Wall time, s.
    pub wall_s: f64,
    /// Inside the harness: what it did and its traces' drift (`None` inside the env).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessCell>,
}

/// What the harness did while a policy was evaluated in it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HarnessCell {
    /// Calls by its sub-agent.
    pub sub_agent_calls: usize,
    /// History compressions.
    pub compressions: usize,
    /// Breaks of the token sequence, by kind.
    pub drift: Drift,
}

impl Cell {
    fn of(report: &EvalReport, model_calls: usize, wall_s: f64) -> Self {
        Self {
            episodes: report.episodes,
            success_rate: report.success_rate,
            success_ci95: report.success_ci95,
            mean_reward: report.mean_reward,
            errors: report.env_errors,
            model_calls,
            wall_s,
            harness: None,
        }
    }

    fn of_harness(e: &HarnessEval) -> Self {
        Self {
            harness: Some(HarnessCell {
                sub_agent_calls: e.runs.sub_agent_calls,
                compressions: e.runs.compressions,
                drift: e.traces.drift,
            }),
            ..Self::of(&e.report, e.runs.model_calls, e.wall_s)
        }
    }
}

/// One approach's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Side {
    /// Lines of code written or changed to bring the agent to training.
    pub integration_lines: usize,
    /// What those lines are.
    pub integration: String,
    /// The warm start (`None` when both started from `--init`).
    #[serde(default)]
    pub warm_start: Option<WarmStart>,
    /// Model calls made by the agent during RL.
    pub model_calls: usize,
    /// Model calls whose tokens reached the update exactly as sampled: each trained turn
    /// checked against the sampler's own journal (the rollout engine's in the env approach,
    /// the policy server's in the proxy approach), each journal entry matched once.
    pub calls_captured_exactly: usize,
    /// Tokens the policy generated.
    pub generated_tokens: u64,
    /// Generated tokens that reached the update exactly as sampled (as above).
    pub tokens_captured_exactly: u64,
    /// Breaks between a call and the context the next call was given (sub-agent switches,
    /// compression, re-tokenisation), found in the proxy's traces. In the env approach an
    /// episode is one token sequence that each turn extends, so there is none to find; the
    /// same holds for sub-agent calls and compressions, which the rewritten harness dropped.
    pub drift: usize,
    /// Of which by a new context (the sub-agent's, or the main agent's after it).
    #[serde(default)]
    pub drift_new_context: usize,
    /// Of which by history compression.
    pub drift_compressed: usize,
    /// Of which by re-tokenisation of earlier answers.
    pub drift_retokenised: usize,
    /// Calls made by sub-agents (a harness behaviour an env refactor drops).
    pub sub_agent_calls: usize,
    /// History compressions (likewise).
    pub compressions: usize,
    /// Harness runs that failed (HTTP or tool-service errors) during RL; their episodes are
    /// treated as env failures are (left out by default).
    #[serde(default)]
    pub failed_runs: usize,
    /// Harness runs whose reward never reached the proxy (a run that died before posting it):
    /// nothing of them is trained.
    #[serde(default)]
    pub unrewarded_runs: usize,
    /// How runs whose context broke were trained (`null` in the env approach, whose episodes
    /// never break).
    #[serde(default)]
    pub samples: Option<Samples>,
    /// Turns trained behind a context they were not sampled in (stitched samples).
    #[serde(default)]
    pub moved_turns: usize,
    /// Tokens of the longest sample the proxy approach's RL trained (`null` in the env
    /// approach, whose samples are its episodes, at most `rollout.max_context` long).
    #[serde(default)]
    pub longest_sample: Option<usize>,
    /// Latency the approach adds to a model call, median, ms (`null`: in-process).
    pub added_latency_p50_ms: Option<f64>,
    /// 99th percentile of it.
    pub added_latency_p99_ms: Option<f64>,
    /// Episodes (harness runs) per second of playing wall time.
    pub episodes_per_s: f64,
    /// Env steps per second of time spent inside env steps (env approach only: in the proxy
    /// approach env calls happen inside the harness, between model calls).
    pub env_steps_per_s: Option<f64>,
    /// Model calls per second while playing.
    pub calls_per_s: f64,
    /// Wall time of RL, s.
    pub wall_s: f64,
    /// Mean reward per iteration.
    pub reward_curve: Vec<f64>,
    /// Success rate per iteration.
    pub success_curve: Vec<f64>,
    /// The final policy evaluated inside the env.
    #[serde(default)]
    pub in_env: Option<Cell>,
    /// The final policy evaluated inside the harness, through the policy server.
    #[serde(default)]
    pub in_harness: Option<Cell>,
}

/// The comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The env.
    pub env: String,
    /// The model both started from.
    #[serde(default)]
    pub model: String,
    /// The RL algorithm.
    #[serde(default)]
    pub algo: String,
    /// Iterations of each approach.
    pub iters: u32,
    /// Episodes (harness runs) per iteration.
    pub episodes_per_iter: usize,
    /// The harness's history budget, characters (`null` in reports kept from before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_chars: Option<usize>,
    /// The env approach.
    pub env_approach: Side,
    /// The proxy approach.
    pub proxy_approach: Side,
    /// The proxy approach again from the same warm start, each training runs whose context
    /// broke as another kind of sample (`compare --proxy-samples segments,stitched`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_alternatives: Vec<Side>,
}

/// One iteration of one approach, as it finishes: `"env"` or `"proxy"`, its metrics and, for
/// the proxy approach, what its traces held.
pub type OnIteration<'a> = &'a mut dyn FnMut(&str, &IterMetrics, Option<&TraceStats>);

/// The starting point both approaches share.
struct Start {
    policy_config: crate::policy::PolicyConfig,
    model: PolicyModel<CpuTrain>,
    tokenizer: Tokenizer,
}

/// What every approach's run shares.
struct Shared<'a> {
    args: &'a CompareOptions,
    target: &'a EnvTarget,
    config: &'a TrainConfig,
    start: &'a Start,
}

/// Runs both approaches and writes `compare.json` and `compare-reward.png` into `args.out`.
pub fn compare(args: &CompareOptions, on_iteration: OnIteration<'_>) -> anyhow::Result<Report> {
    anyhow::ensure!(
        args.history_chars != Some(0),
        "--history-chars must be at least 1 (the harness's history budget in characters)"
    );
    let Some((&first_samples, _)) = args.proxy_samples.split_first() else {
        anyhow::bail!("--proxy-samples names no kind of sample (segments, stitched)");
    };
    let kinds = &args.proxy_samples;
    anyhow::ensure!(
        kinds
            .iter()
            .enumerate()
            .all(|(i, s)| !kinds[..i].contains(s)),
        "--proxy-samples names a kind twice: {kinds:?}"
    );
    let target = EnvTarget::new(args.env.clone());
    let preset_model = match &args.init {
        Some(dir) => {
            let c = crate::policy::checkpoint::read_config(&RunDir::new(dir).policy())?;
            if c.base.is_some() {
                args.model.clone()
            } else {
                ModelChoice::tiny()
            }
        }
        None => args.model.clone(),
    };
    let mut config = settings(
        &args.env,
        args.algo,
        &preset_model,
        args.config.as_deref(),
        args.iters,
        args.seed,
    )?;
    crate::harness_runner::HarnessKind::for_env(&args.env)
        .with_context(|| format!("{} has no harness to compare with", args.env))?;
    let out = args.out.clone();
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let device = Default::default();
    let (policy_config, model, tokenizer) = match &args.init {
        Some(dir) => load::checkpoint::<CpuTrain>(&RunDir::new(dir).policy(), &device)?,
        None => initial_policy::<CpuTrain>(&args.model, config.schedule.seed, &device)?,
    };
    config.rollout.max_context = config.rollout.max_context.min(policy_config.context_length);
    let start = Start {
        policy_config,
        model,
        tokenizer,
    };
    let mut proxy_settings = ProxySettings {
        samples: first_samples,
        ..ProxySettings::for_config(&config, args.concurrency)
    };
    if let Some(chars) = args.history_chars {
        proxy_settings.harness.history_chars = chars;
    }

    let stages = Stages::open(args, args.resume)?;

    // The env approach: SFT on the env's demonstrations, then RL in the env's rollout engine,
    // envs in the WASM sandbox.
    let env_dir = out.join("env");
    let mut env_warm: Option<WarmStart> = stages.done("env-warm-start")?;
    let (env_rl, env_final) = match stages.done::<Side>("env-rl")? {
        Some(side) => (side, None),
        None => {
            let env_model = match (&args.init, &env_warm) {
                (Some(_), _) => start.model.clone(),
                (None, Some(_)) => warm_model(&env_dir)?,
                (None, None) => {
                    let clock = Instant::now();
                    let examples = baseline_sft_data(&target, &config.sft)?;
                    let (model, report) = sft_policy::<CpuTrain>(
                        &target,
                        (&start.policy_config, start.model.clone(), &start.tokenizer),
                        &examples,
                        &config,
                        &device,
                    )?;
                    let warm = WarmStart {
                        data: "the env's demonstrations in the env's rendering".into(),
                        samples: report.episodes,
                        wall_s: clock.elapsed().as_secs_f64(),
                        teacher: None,
                    };
                    keep_warm_start(&env_dir, &start, &model)?;
                    stages.finish("env-warm-start", &warm)?;
                    env_warm = Some(warm);
                    model
                }
            };
            if args.resume {
                clear_interrupted(&env_dir)?;
            }
            let clock = Instant::now();
            let envs = env_batch(&target, Backend::Wasm, config.episodes_per_iter())?;
            let mut trainer = Trainer::<CpuTrain>::new(
                &env_dir,
                new_run(
                    args,
                    &target,
                    &config,
                    &start,
                    env_model,
                    envs,
                    EpisodeSource::Env,
                ),
                device,
            )?;
            let mut env_history: Vec<IterMetrics> = Vec::new();
            trainer.run(|m| {
                on_iteration("env", m, None);
                env_history.push(m.clone());
            })?;
            let side = env_side(&args.env, &env_history, clock.elapsed().as_secs_f64());
            let last = trainer.inference_model();
            // Its envs (sandbox instances, which the pool caps) are not needed any more.
            drop(trainer);
            stages.finish("env-rl", &side)?;
            (side, Some(last))
        }
    };

    // The proxy approach: SFT on the harness's traces with the teacher answering, then RL
    // through the harness, the policy server and the recording proxy, once per kind of sample.
    let mut proxy_warm: Option<WarmStart> = stages.done("proxy-warm-start")?;
    let mut proxy_model: Option<PolicyModel<CpuTrain>> = None;
    let shared = Shared {
        args,
        target: &target,
        config: &config,
        start: &start,
    };
    let mut proxies: Vec<(String, Side, Option<PolicyModel<Cpu>>)> = Vec::new();
    for (i, &samples) in args.proxy_samples.iter().enumerate() {
        let name = if i == 0 {
            "proxy".to_owned()
        } else {
            format!("proxy-{samples}")
        };
        if let Some(side) = stages.done::<Side>(&format!("{name}-rl"))? {
            proxies.push((name, side, None));
            continue;
        }
        let model = match (&args.init, &proxy_model, &proxy_warm) {
            (Some(_), _, _) => start.model.clone(),
            (None, Some(model), _) => model.clone(),
            (None, None, Some(_)) => warm_model(&out.join("proxy"))?,
            (None, None, None) => {
                let (model, warm) =
                    proxy_warm_start(&shared, &proxy_settings, &out.join("teacher-traces.db"))?;
                stages.finish("proxy-warm-start", &warm)?;
                proxy_warm = Some(warm);
                model
            }
        };
        proxy_model = Some(model.clone());
        if args.resume {
            clear_interrupted(&out.join(&name))?;
        }
        let settings = ProxySettings {
            samples,
            ..proxy_settings.clone()
        };
        let (side, last) = proxy_rl(&shared, model, &settings, &name, &mut *on_iteration)?;
        stages.finish(&format!("{name}-rl"), &side)?;
        proxies.push((name, side, Some(last)));
    }
    drop(proxy_model);

    let mut report = Report {
        env: args.env.clone(),
        model: preset_model.model.to_string(),
        algo: args.algo.name().to_owned(),
        iters: config.schedule.iters,
        episodes_per_iter: config.episodes_per_iter(),
        history_chars: Some(proxy_settings.harness.history_chars),
        env_approach: Side {
            warm_start: env_warm,
            ..env_rl
        },
        proxy_approach: Side::default(),
        proxy_alternatives: Vec::new(),
    };
    let mut finals = vec![("env".to_owned(), env_final)];
    for (i, (name, side, model)) in proxies.into_iter().enumerate() {
        let side = Side {
            warm_start: proxy_warm.clone(),
            ..side
        };
        if i == 0 {
            report.proxy_approach = side;
        } else {
            report.proxy_alternatives.push(side);
        }
        finals.push((name, model));
    }

    // Each final policy in both places, on the same test episodes.
    if args.eval_episodes != Some(0) {
        let sides = std::iter::once(&mut report.env_approach)
            .chain(std::iter::once(&mut report.proxy_approach))
            .chain(report.proxy_alternatives.iter_mut());
        for ((name, model), side) in finals.into_iter().zip(sides) {
            let (in_env, in_harness) = (format!("{name}-in-env"), format!("{name}-in-harness"));
            let (done_env, done_harness) = (stages.done(&in_env)?, stages.done(&in_harness)?);
            let model = match (model, &done_env, &done_harness) {
                (_, Some(_), Some(_)) => None,
                (Some(model), _, _) => Some(model),
                (None, _, _) => Some(final_policy(&out.join(&name))?),
            };
            side.in_env = match done_env {
                Some(cell) => Some(cell),
                None => {
                    eprintln!("evaluating the {name} approach's policy in the env …");
                    let model = model.as_ref().context("a policy to evaluate")?;
                    let cell = env_eval(
                        &target,
                        model,
                        &start.tokenizer,
                        &config,
                        args.eval_episodes,
                    )?;
                    stages.finish(&in_env, &cell)?;
                    Some(cell)
                }
            };
            side.in_harness = match done_harness {
                Some(cell) => Some(cell),
                None => {
                    eprintln!("evaluating the {name} approach's policy in the harness …");
                    let model = model.context("a policy to evaluate")?;
                    let e = harness_eval(
                        &target,
                        model,
                        &start.tokenizer,
                        &proxy_settings,
                        Split::Test,
                        args.eval_episodes,
                        &out.join(format!("{name}-harness-eval.db")),
                    )?;
                    let cell = Cell::of_harness(&e);
                    stages.finish(&in_harness, &cell)?;
                    Some(cell)
                }
            };
        }
    }
    let curve = |name: &str, ys: &[f64]| {
        Series::new(
            name,
            ys.iter()
                .enumerate()
                .map(|(i, &y)| ((i + 1) as f64, y))
                .collect(),
        )
    };
    line_chart(
        &out.join("compare-reward.png"),
        "mean reward per iteration",
        "iteration",
        &report
            .sides()
            .iter()
            .map(|(name, side)| curve(name, &side.reward_curve))
            .collect::<Vec<_>>(),
    )?;
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

impl Report {
    /// Each trained policy's name and figures: the env approach, then the proxy approach once
    /// per kind of sample it was trained with (named by the kind when there are several).
    pub fn sides(&self) -> Vec<(String, &Side)> {
        let mut sides = vec![("env approach".to_owned(), &self.env_approach)];
        let proxies = std::iter::once(&self.proxy_approach).chain(&self.proxy_alternatives);
        for side in proxies {
            let name = if self.proxy_alternatives.is_empty() {
                "proxy approach".to_owned()
            } else {
                // Reports kept from before the choice existed trained segments.
                format!("proxy approach, {}", side.samples.unwrap_or_default())
            };
            sides.push((name, side));
        }
        sides
    }
}

/// The proxy approach's warm start: the unmodified harness on the train tasks with the teacher
/// answering, recorded into `db` (anything there before is dropped), and SFT on its calls;
/// kept as the `proxy` run's `sft/`.
fn proxy_warm_start(
    shared: &Shared<'_>,
    settings: &ProxySettings,
    db: &std::path::Path,
) -> anyhow::Result<(PolicyModel<CpuTrain>, WarmStart)> {
    let Shared {
        args,
        target,
        config,
        start,
    } = shared;
    let clock = Instant::now();
    remove_database(db)?;
    let (samples, data) = teacher_samples(target, &start.tokenizer, config, settings, db)?;
    anyhow::ensure!(
        !samples.is_empty(),
        "the teacher's traces gave no sample to learn from: {data:?}"
    );
    eprintln!(
        "proxy sft: {} samples from {} harness runs ({} solved, {} failed, {} notes, {} calls \
         unusable)",
        samples.len(),
        data.runs.runs,
        data.solved,
        data.runs.failed,
        data.notes,
        data.traces.calls_unusable
    );
    let (model, _) = sft_train(
        &start.policy_config,
        start.model.clone(),
        &samples,
        config,
        &Default::default(),
    );
    let warm = WarmStart {
        data: "the harness's traces with the demonstrator answering as a teacher".into(),
        samples: samples.len(),
        wall_s: clock.elapsed().as_secs_f64(),
        teacher: Some(data),
    };
    keep_warm_start(&args.out.join("proxy"), start, &model)?;
    Ok((model, warm))
}

/// RL of the proxy approach from `model` through the harness, the policy server and the
/// recording proxy, training runs whose context broke as `settings.samples`, in the run
/// directory `name` under the comparison's: its side of the report (without the warm start)
/// and its final policy.
fn proxy_rl(
    shared: &Shared<'_>,
    model: PolicyModel<CpuTrain>,
    settings: &ProxySettings,
    name: &str,
    on_iteration: OnIteration<'_>,
) -> anyhow::Result<(Side, PolicyModel<Cpu>)> {
    let Shared {
        args,
        target,
        config,
        start,
    } = shared;
    let clock = Instant::now();
    let dir = args.out.join(name);
    let envs = env_batch(target, Backend::Native, config.episodes_per_iter())?;
    let mut trainer = Trainer::<CpuTrain>::new(
        &dir,
        new_run(
            args,
            target,
            config,
            start,
            model,
            envs,
            EpisodeSource::Proxy,
        ),
        Default::default(),
    )?;
    let db = dir.join("traces.db");
    let mut approach = ProxyApproach::start(
        &args.env,
        trainer.inference_model(),
        start.tokenizer.clone(),
        &db,
        settings.clone(),
    )?;
    let mut history: Vec<ProxyIteration> = Vec::new();
    while !trainer.finished() {
        let it = approach.iteration(&mut trainer)?;
        on_iteration(name, &it.metrics, Some(&it.traces));
        history.push(it);
    }
    crate::trainer::write_plots(trainer.out())?;
    let wall_s = clock.elapsed().as_secs_f64();
    let last = trainer.inference_model();
    drop(approach);
    drop(trainer);
    let side = proxy_side(&history, &TraceStore::open(&db)?, settings.samples, wall_s)?;
    Ok((side, last))
}

/// Saves an approach's warm start as its run's `sft/` (as `sandgym train` keeps its own), so
/// that RL can be paired with its starting point (`sandgym eval --compare RUN/sft RUN`).
fn keep_warm_start(
    run: &std::path::Path,
    start: &Start,
    model: &PolicyModel<CpuTrain>,
) -> anyhow::Result<()> {
    let dir = RunDir::new(run).sft();
    crate::policy::checkpoint::save(dir.path(), &start.policy_config, model, &start.tokenizer)
        .with_context(|| format!("saving the warm start into {}", dir.path().display()))
}

/// The warm start kept in run `run`'s `sft/` ([`keep_warm_start`]), to train from.
fn warm_model(run: &std::path::Path) -> anyhow::Result<PolicyModel<CpuTrain>> {
    let dir = RunDir::new(run).sft().policy();
    Ok(load::checkpoint::<CpuTrain>(&dir, &Default::default())
        .with_context(|| format!("loading the warm start kept in {}", dir.display()))?
        .1)
}

/// The final policy of the finished run `run`, for inference.
fn final_policy(run: &std::path::Path) -> anyhow::Result<PolicyModel<Cpu>> {
    let dir = RunDir::new(run).policy();
    Ok(load::checkpoint::<Cpu>(&dir, &Default::default())
        .with_context(|| format!("loading the final policy of {}", dir.display()))?
        .1
        .for_inference())
}

/// Removes what an interrupted RL stage left in run `run` (its checkpoint and traces), so
/// that the stage starts again from its warm start; the warm start (`sft/`) stays.
fn clear_interrupted(run: &std::path::Path) -> anyhow::Result<()> {
    let dir = RunDir::new(run);
    let checkpoint = dir.checkpoint();
    if checkpoint.exists() {
        std::fs::remove_dir_all(&checkpoint)
            .with_context(|| format!("removing {}", checkpoint.display()))?;
    }
    remove_database(&dir.traces())
}

/// Removes the SQLite database `db` with its write-ahead log and shared-memory files.
fn remove_database(db: &std::path::Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{suffix}", db.display()));
        if path.exists() {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// A new run of one approach from `model`, with the shared starting point's tokenizer.
fn new_run(
    args: &CompareOptions,
    target: &EnvTarget,
    config: &TrainConfig,
    start: &Start,
    model: PolicyModel<CpuTrain>,
    envs: Vec<crate::env_api::BoxEnv>,
    source: EpisodeSource,
) -> NewRun<CpuTrain> {
    let backend = match source {
        EpisodeSource::Env => Backend::Wasm,
        EpisodeSource::Proxy => Backend::Native,
    };
    let meta = crate::RunMeta {
        backend,
        init: args.init.clone(),
        source,
        ..crate::RunMeta::new(target, args.model.model.clone())
    };
    NewRun {
        meta: meta.to_value(),
        config: config.clone(),
        policy_config: start.policy_config.clone(),
        model,
        tokenizer: start.tokenizer.clone(),
        envs,
        options: ResetOptions::split(Split::Train),
    }
}

/// `model` evaluated inside the env (greedy, in the sandbox) on the test episodes.
fn env_eval(
    target: &EnvTarget,
    model: &PolicyModel<Cpu>,
    tokenizer: &Tokenizer,
    config: &TrainConfig,
    episodes: Option<usize>,
) -> anyhow::Result<Cell> {
    let clock = Instant::now();
    let (seeds, options) = eval_plan(
        target.spec()?.tasks,
        Split::Test,
        episodes,
        DEFAULT_EPISODES,
    );
    let settings = rollout_settings(config);
    let envs = env_batch(target, Backend::Wasm, eval_envs(&settings, seeds.len()))?;
    let mut engine = RolloutEngine::new(envs, 2, tokenizer.clone(), settings)?;
    let (report, played) = evaluate(
        &mut engine,
        model,
        &Default::default(),
        &seeds,
        &options,
        0.0,
    )?;
    let calls = played.iter().map(|e| e.turns.len()).sum();
    Ok(Cell::of(&report, calls, clock.elapsed().as_secs_f64()))
}

fn env_side(env: &str, history: &[IterMetrics], wall_s: f64) -> Side {
    let turns: f64 = history
        .iter()
        .map(|m| m.turns_mean * m.episodes as f64)
        .sum();
    let tokens: f64 = history
        .iter()
        .map(|m| m.response_tokens_mean * m.episodes as f64)
        .sum();
    let rollout_s: f64 = history.iter().map(|m| m.rollout_s).sum();
    let calls = turns.round() as usize;
    Side {
        integration_lines: crate::approach::integration_lines(env).unwrap_or(0),
        integration: "the harness rewritten as an Env (its env.rs)".into(),
        model_calls: calls,
        calls_captured_exactly: history.iter().map(|m| m.calls_trained_exactly).sum(),
        generated_tokens: tokens.round() as u64,
        tokens_captured_exactly: history
            .iter()
            .map(|m| m.tokens_trained_exactly as u64)
            .sum(),
        episodes_per_s: history.iter().map(|m| m.episodes as f64).sum::<f64>()
            / rollout_s.max(1e-9),
        env_steps_per_s: Some(
            history.iter().map(|m| m.env_steps_per_s).sum::<f64>() / history.len().max(1) as f64,
        ),
        calls_per_s: calls as f64 / rollout_s.max(1e-9),
        wall_s,
        reward_curve: history.iter().map(|m| m.reward_mean).collect(),
        success_curve: history.iter().map(|m| m.success_rate).collect(),
        ..Side::default()
    }
}

fn proxy_side(
    history: &[ProxyIteration],
    store: &TraceStore,
    samples: Samples,
    wall_s: f64,
) -> anyhow::Result<Side> {
    let mut traces = TraceStats::default();
    let mut harness = HarnessTotals::default();
    for it in history {
        traces.merge(&it.traces);
        harness.merge(&it.harness);
    }
    let added = store.added_latencies_us()?;
    let ms = |us: u64| us as f64 / 1000.0;
    let rollout_s: f64 = history.iter().map(|it| it.rollout_s).sum();
    Ok(Side {
        integration_lines: 0,
        integration: "none in the harness: its base URL (configuration) points at the proxy".into(),
        model_calls: harness.model_calls,
        calls_captured_exactly: history
            .iter()
            .map(|it| it.metrics.calls_trained_exactly)
            .sum(),
        generated_tokens: harness.completion_tokens,
        tokens_captured_exactly: history
            .iter()
            .map(|it| it.metrics.tokens_trained_exactly as u64)
            .sum(),
        drift: traces.drift.total(),
        drift_new_context: traces.drift.new_context,
        drift_compressed: traces.drift.compressed,
        drift_retokenised: traces.drift.retokenised,
        sub_agent_calls: harness.sub_agent_calls,
        compressions: harness.compressions,
        failed_runs: harness.failed,
        unrewarded_runs: traces.unrewarded,
        samples: Some(samples),
        moved_turns: history.iter().map(|it| it.moved_turns).sum(),
        longest_sample: history.iter().map(|it| it.longest_sample).max(),
        added_latency_p50_ms: Some(ms(percentile(&added, 0.5))),
        added_latency_p99_ms: Some(ms(percentile(&added, 0.99))),
        episodes_per_s: harness.runs as f64 / rollout_s.max(1e-9),
        env_steps_per_s: None,
        calls_per_s: harness.model_calls as f64 / rollout_s.max(1e-9),
        wall_s,
        reward_curve: history.iter().map(|it| it.metrics.reward_mean).collect(),
        success_curve: history.iter().map(|it| it.metrics.success_rate).collect(),
        ..Side::default()
    })
}

/// The report as the README shows it: the 2×2 table (trained by each approach × evaluated in
/// each place, success with its 95% interval) and the costs, fidelity and drift beside it —
/// Markdown, so `sandgym compare` prints exactly what the README holds (a test checks the
/// README's tables against the `compare.json` they came from).
pub fn markdown(r: &Report) -> String {
    let sides = r.sides();
    let cell = |c: &Option<Cell>| {
        c.as_ref().map_or("-".to_owned(), |c| {
            format!(
                "{:.3} [{:.3}, {:.3}] of {}",
                c.success_rate, c.success_ci95.0, c.success_ci95.1, c.episodes
            )
        })
    };
    let mut grid = crate::table::new(&[
        &format!("{} ({}), trained by", r.env, r.model),
        "evaluated in the env",
        "evaluated in the harness",
    ]);
    for (name, side) in &sides {
        grid.add_row(vec![
            name.clone(),
            cell(&side.in_env),
            cell(&side.in_harness),
        ]);
    }
    let warm = |s: &Side, f: &dyn Fn(&WarmStart) -> String| {
        s.warm_start.as_ref().map_or("-".to_owned(), f)
    };
    let harness = |c: &Option<Cell>, f: &dyn Fn(&Cell, &HarnessCell) -> String| {
        c.as_ref()
            .and_then(|c| c.harness.as_ref().map(|h| f(c, h)))
            .unwrap_or_else(|| "-".to_owned())
    };
    let opt = |v: Option<f64>| v.map_or("in-process".to_owned(), |v| format!("{v:.3}"));
    let ends = |v: &[f64]| match (v.first(), v.last()) {
        (Some(a), Some(b)) => format!("{a:.3} → {b:.3}"),
        _ => "-".to_owned(),
    };
    let drift = |s: &Side| {
        format!(
            "{} ({} / {} / {})",
            s.drift, s.drift_new_context, s.drift_compressed, s.drift_retokenised
        )
    };
    let each = |f: &dyn Fn(&Side) -> String| sides.iter().map(|(_, s)| f(s)).collect::<Vec<_>>();
    // The env approach's episodes are one token sequence each; every other column is the
    // proxy approach's.
    let trained_as: Vec<String> = sides
        .iter()
        .enumerate()
        .map(|(i, (_, s))| {
            if i == 0 {
                "one sequence per episode".to_owned()
            } else {
                format!("{} ({})", s.samples.unwrap_or_default(), s.moved_turns)
            }
        })
        .collect();
    let in_harness_calls = |s: &Side| {
        harness(&s.in_harness, &|c, h| {
            format!(
                "{} / {} / {}",
                c.model_calls, h.sub_agent_calls, h.compressions
            )
        })
    };
    let mut rows: Vec<(String, Vec<String>)> = vec![
        (
            "lines written or changed to integrate".into(),
            each(&|s| s.integration_lines.to_string()),
        ),
        (
            "warm start: samples".into(),
            each(&|s| warm(s, &|w| w.samples.to_string())),
        ),
        (
            "warm start: wall time (s)".into(),
            each(&|s| warm(s, &|w| format!("{:.0}", w.wall_s))),
        ),
        (
            "warm start: teacher's harness runs solved / notes / unusable calls".into(),
            each(&|s| {
                warm(s, &|w| {
                    w.teacher.as_ref().map_or("-".into(), |t| {
                        format!(
                            "{} of {} / {} / {}",
                            t.solved, t.runs.runs, t.notes, t.traces.calls_unusable
                        )
                    })
                })
            }),
        ),
        (
            format!(
                "RL: {} iterations × {} episodes, model calls",
                r.iters, r.episodes_per_iter
            ),
            each(&|s| s.model_calls.to_string()),
        ),
        (
            "RL: calls captured exactly (token ids as sampled)".into(),
            each(&|s| s.calls_captured_exactly.to_string()),
        ),
        (
            "RL: generated tokens / captured exactly".into(),
            each(&|s| format!("{} / {}", s.generated_tokens, s.tokens_captured_exactly)),
        ),
        (
            "RL: drift (new context / compression / re-tokenisation)".into(),
            each(&drift),
        ),
        (
            "RL: runs across drift trained as (turns moved behind another context)".into(),
            trained_as,
        ),
        (
            "RL: sub-agent calls / history compressions kept".into(),
            each(&|s| format!("{} / {}", s.sub_agent_calls, s.compressions)),
        ),
        (
            "RL: failed harness runs (not trained on) / rewards never posted".into(),
            each(&|s| format!("{} / {}", s.failed_runs, s.unrewarded_runs)),
        ),
        (
            "RL: added latency per call, p50 / p99 (ms)".into(),
            each(&|s| match s.added_latency_p50_ms {
                None => opt(None),
                p50 => format!("{} / {}", opt(p50), opt(s.added_latency_p99_ms)),
            }),
        ),
        (
            "RL: wall time (s)".into(),
            each(&|s| format!("{:.0}", s.wall_s)),
        ),
        (
            "RL: mean reward, iteration 1 → last".into(),
            each(&|s| ends(&s.reward_curve)),
        ),
        (
            "RL: success, iteration 1 → last".into(),
            each(&|s| ends(&s.success_curve)),
        ),
        (
            "in the harness: model calls / sub-agent calls / compressions".into(),
            each(&in_harness_calls),
        ),
        (
            "in the harness: drift (new context / compression / re-tokenisation)".into(),
            each(&|s| harness(&s.in_harness, &|_, h| drift_of(&h.drift))),
        ),
        (
            "in the harness: failed runs".into(),
            each(&|s| harness(&s.in_harness, &|c, _| c.errors.to_string())),
        ),
    ];
    if let Some(chars) = r.history_chars {
        rows.insert(
            0,
            (
                "harness history budget (characters)".into(),
                each(&|_| chars.to_string()),
            ),
        );
    }
    let mut header = vec![""];
    header.extend(sides.iter().map(|(name, _)| name.as_str()));
    let mut costs = crate::table::new(&header);
    for (k, values) in rows {
        let mut row = vec![k];
        row.extend(values);
        costs.add_row(row);
    }
    format!("{grid}\n\n{costs}\n")
}

fn drift_of(d: &Drift) -> String {
    format!(
        "{} ({} / {} / {})",
        d.total(),
        d.new_context,
        d.compressed,
        d.retokenised
    )
}
