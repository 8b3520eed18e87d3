//! Evaluation next to the baseline: a policy (a checkpoint or a pretrained model, greedy) and
//! the env's scripted baseline on the same episodes — every task of the split once for an env
//! with a fixed task list — with 95% intervals. `sandgym eval` and `train`'s closing
//! evaluation print it.

use std::path::Path;

use burn::tensor::backend::Backend as BurnBackend;
use serde::Serialize;

use crate::env_api::Split;
use crate::play::{baseline_episodes, eval_report};
use crate::policy::load;
use crate::trainer::{
    EpisodeKind, EvalReport, Paired, RolloutEngine, RolloutSettings, RunDir, eval_envs, eval_plan,
    evaluate,
};
use crate::training::env_batch;
use crate::{Backend, EnvTarget};

/// The policy's and the baseline's figures on the same seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The trained policy (greedy decoding).
    pub policy: EvalReport,
    /// The scripted baseline (`None` for an env without one).
    pub baseline: Option<EvalReport>,
    /// The policy's episodes, token by token.
    #[serde(skip)]
    pub played: Vec<crate::trainer::Episode>,
    /// The options they were reset with.
    #[serde(skip)]
    pub options: crate::env_api::ResetOptions,
    /// The policy's tokenizer (to read `played`'s tokens).
    #[serde(skip)]
    pub tokenizer: crate::policy::Tokenizer,
}

/// Evaluates the policy in `dir` (a checkpoint, or a pretrained model's name or path; greedy)
/// and the scripted baseline on the same episodes ([`eval_plan`]: every task of the split
/// once by default, for an env with a fixed task list). A pretrained model's context length
/// replaces the rollout's context budget.
pub fn compare<B: BurnBackend>(
    dir: &Path,
    env: &EnvTarget,
    split: Split,
    episodes: Option<usize>,
    settings: &RolloutSettings,
    wasm: bool,
    device: &B::Device,
) -> anyhow::Result<Comparison> {
    Rows::new(env, split, episodes, settings, wasm).compare::<B>(dir, device)
}

/// The rows of one table: the env, the episodes and the rollout shape every row is played
/// with, and the envs themselves once the first row has made them. Each later row plays on
/// the same envs ([`RolloutEngine::retarget`]) instead of making them again: for the SQL
/// agent's main job, 64 sandboxed envs that each generate the curriculum's 20 databases
/// took 8-13 s per row.
struct Rows<'a> {
    env: &'a EnvTarget,
    split: Split,
    episodes: Option<usize>,
    settings: &'a RolloutSettings,
    wasm: bool,
    engine: Option<RolloutEngine>,
}

impl<'a> Rows<'a> {
    fn new(
        env: &'a EnvTarget,
        split: Split,
        episodes: Option<usize>,
        settings: &'a RolloutSettings,
        wasm: bool,
    ) -> Self {
        Self {
            env,
            split,
            episodes,
            settings,
            wasm,
            engine: None,
        }
    }

    /// [`compare`]'s row: the policy in `dir` and the baseline on the same episodes.
    fn compare<B: BurnBackend>(
        &mut self,
        dir: &Path,
        device: &B::Device,
    ) -> anyhow::Result<Comparison> {
        let mut c = self.play::<B>(dir, device)?;
        c.baseline = match crate::registry::baseline(&self.env.id()?) {
            Some(_) => {
                let (seeds, options) = self.plan()?;
                Some(eval_report(&baseline_episodes(self.env, seeds, &options)?))
            }
            None => None,
        };
        Ok(c)
    }

    fn plan(&self) -> anyhow::Result<(Vec<u64>, crate::env_api::ResetOptions)> {
        Ok(eval_plan(
            self.env.spec()?.tasks,
            self.split,
            self.episodes,
            DEFAULT_EPISODES,
        ))
    }

    /// [`Rows::compare`] without the baseline: the policy alone on the same episodes, for a
    /// row beside one that has it.
    fn play<B: BurnBackend>(
        &mut self,
        dir: &Path,
        device: &B::Device,
    ) -> anyhow::Result<Comparison> {
        let loaded = load::model::<B>(&dir.display().to_string(), device)?;
        let (model, tokenizer) = (loaded.model.for_inference(), loaded.tokenizer);
        let mut settings = *self.settings;
        if loaded.info.format != "checkpoint" {
            settings.max_context = loaded.config.context_length;
        }
        let (seeds, options) = self.plan()?;
        let at_once = eval_envs(&settings, seeds.len());
        let clock = std::time::Instant::now();
        let engine = match &mut self.engine {
            Some(engine) if engine.capacity() == at_once => {
                engine.retarget(tokenizer, settings)?;
                engine
            }
            slot => {
                // Another size of batch: the old envs (sandbox instances the pool counts)
                // go before the new ones are made.
                *slot = None;
                let backend = if self.wasm {
                    Backend::Wasm
                } else {
                    Backend::Native
                };
                let envs = env_batch(self.env, backend, at_once)?;
                slot.insert(RolloutEngine::new(envs, 2, tokenizer, settings)?)
            }
        };
        let making = clock.elapsed().as_secs_f64();
        let (mut policy, played) = evaluate(engine, &model, device, &seeds, &options, 0.0)?;
        if let Some(t) = policy.timing.as_mut() {
            t.make_envs_seconds = making;
        }
        Ok(Comparison {
            policy,
            baseline: None,
            played,
            options,
            tokenizer: engine.tokenizer().clone(),
        })
    }
}

/// Two policies and the baseline on the same episodes, with the paired test of B against A.
#[derive(Clone, Debug, Serialize)]
pub struct PairedComparison {
    /// Where policy A came from.
    pub a_dir: std::path::PathBuf,
    /// Where policy B came from.
    pub b_dir: std::path::PathBuf,
    /// Policy A (greedy).
    pub a: EvalReport,
    /// Policy B (greedy).
    pub b: EvalReport,
    /// The scripted baseline (`None` for an env without one).
    pub baseline: Option<EvalReport>,
    /// B against A, episode by episode.
    pub paired: Paired,
}

/// Evaluates the policies in `dirs` (A, B) as [`compare`] does, on the same episodes, and
/// pairs their outcomes.
pub fn compare_pair<B: BurnBackend>(
    dirs: [&Path; 2],
    env: &EnvTarget,
    split: Split,
    episodes: Option<usize>,
    settings: &RolloutSettings,
    wasm: bool,
    device: &B::Device,
) -> anyhow::Result<PairedComparison> {
    let mut rows = Rows::new(env, split, episodes, settings, wasm);
    let a = rows.play::<B>(dirs[0], device)?;
    let b = rows.compare::<B>(dirs[1], device)?;
    let paired = Paired::of(&a.policy.outcomes, &b.policy.outcomes)?;
    Ok(PairedComparison {
        a_dir: dirs[0].to_path_buf(),
        b_dir: dirs[1].to_path_buf(),
        a: a.policy,
        b: b.policy,
        baseline: b.baseline,
        paired,
    })
}

/// Prints a paired comparison: both rows, the baseline's, and the paired line.
pub fn print_pair(c: &PairedComparison, env: &str, split: Split) {
    println!(
        "{env}, {split:?} split, {} episodes (the same for every row)",
        c.a.episodes
    );
    println!("A: {}\nB: {}", c.a_dir.display(), c.b_dir.display());
    let rows = [
        ("A", Some(&c.a)),
        ("B", Some(&c.b)),
        ("baseline", c.baseline.as_ref()),
    ];
    println!("{}", report_table(&rows));
    println!("{}", paired_line("B", "A", &c.paired));
}

/// A run's closing table: the trained policy and, for a run that started from a pretrained
/// model, that model zero-shot and after its SFT warm-start, each on the same episodes as the
/// scripted baseline.
#[derive(Clone, Debug, Serialize)]
pub struct Stages {
    /// The split evaluated.
    pub split: Split,
    /// The pretrained model before any training (greedy), when the run started from one.
    pub zero_shot: Option<EvalReport>,
    /// The policy after the SFT warm-start, when the run had one.
    pub sft: Option<EvalReport>,
    /// The trained policy.
    pub policy: EvalReport,
    /// The scripted baseline (`None` for an env without one).
    pub baseline: Option<EvalReport>,
    /// The trained policy (B) against its SFT warm-start (A), episode by episode: what the
    /// RL iterations added, with McNemar's exact test (when the SFT row was played).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rl_over_sft: Option<Paired>,
}

impl Stages {
    /// The trained policy's success rate over the baseline's (`None` without a baseline or
    /// when the baseline never succeeds).
    pub fn ratio_to_baseline(&self) -> Option<f64> {
        let b = self.baseline.as_ref()?.success_rate;
        (b > 0.0).then(|| self.policy.success_rate / b)
    }
}

/// Which rows a run's closing table has besides the trained policy and the baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClosingRows {
    /// The pretrained model the run started from, zero-shot (runs from a pretrained model).
    pub zero_shot: bool,
    /// The SFT warm-start (`out/sft`, when the run had one).
    pub sft: bool,
}

/// The closing evaluation of the run in `out` on `split`: its last checkpoint, and the rows
/// `rows` asks for (see [`compare`] for the episodes).
pub fn closing<B: BurnBackend>(
    out: &Path,
    split: Split,
    episodes: Option<usize>,
    rows: ClosingRows,
    device: &B::Device,
) -> anyhow::Result<Stages> {
    let run = crate::RunMeta::read(out)?;
    let target = run.run.target();
    let settings = crate::trainer::rollout_settings(&run.train);
    let wasm = run.run.backend == crate::Backend::Wasm;
    let mut table = Rows::new(&target, split, episodes, &settings, wasm);
    let trained = table.compare::<B>(&RunDir::new(out).policy(), device)?;
    // The episodes the table counts, for the dashboard.
    crate::trainer::write_episode_log(
        out,
        (EpisodeKind::Closing, run.train.schedule.iters),
        &trained.played,
        &trained.options,
        &trained.tokenizer,
    )?;
    let zero_shot = if rows.zero_shot && run.run.pretrained() {
        Some(
            table
                .play::<B>(Path::new(&run.run.model.to_string()), device)?
                .policy,
        )
    } else {
        None
    };
    let sft_dir = RunDir::new(out).sft();
    let sft = if rows.sft && sft_dir.config().is_file() {
        Some(table.play::<B>(sft_dir.path(), device)?.policy)
    } else {
        None
    };
    let rl_over_sft = match &sft {
        Some(sft) => Some(Paired::of(&sft.outcomes, &trained.policy.outcomes)?),
        None => None,
    };
    Ok(Stages {
        split,
        zero_shot,
        sft,
        policy: trained.policy,
        baseline: trained.baseline,
        rl_over_sft,
    })
}

/// Prints a run's closing table.
pub fn print_stages(s: &Stages, env: &str) {
    println!(
        "{env}, {:?} split, {} episodes (the same for every row)",
        s.split, s.policy.episodes
    );
    let rows = [
        ("zero-shot", s.zero_shot.as_ref()),
        ("sft", s.sft.as_ref()),
        ("trained", Some(&s.policy)),
        ("baseline", s.baseline.as_ref()),
    ];
    println!("{}", report_table(&rows));
    if let Some(ratio) = s.ratio_to_baseline() {
        println!("trained / baseline success: {ratio:.2}x");
    }
    if let Some(p) = &s.rl_over_sft {
        println!("{}", paired_line("trained", "sft", p));
    }
}

/// One line saying what B adds over A on the same episodes, with the paired test.
pub fn paired_line(b: &str, a: &str, p: &Paired) -> String {
    let (lo, hi) = p.difference_ci95;
    format!(
        "{b} - {a}: {:+.3} [{lo:+.3}, {hi:+.3}] paired; {} episodes only {b} solved, {} only {a}, of {}; McNemar exact p = {:.3}{}",
        p.difference,
        p.only_b,
        p.only_a,
        p.episodes,
        p.p_value,
        if p.b_better() {
            format!(" ({b} better at the 5% level)")
        } else if p.p_value < 0.05 {
            format!(" ({a} better at the 5% level)")
        } else {
            " (no significant difference)".to_string()
        }
    )
}

/// The rows that are there, one evaluation each.
fn report_table(rows: &[(&str, Option<&EvalReport>)]) -> comfy_table::Table {
    let mut table = crate::table::new(&[
        "",
        "success",
        "95% interval",
        "mean reward",
        "turns",
        "env errors",
        "out of context",
    ]);
    for (name, r) in rows.iter().filter_map(|(n, r)| Some((n, (*r)?))) {
        let (lo, hi) = r.success_ci95;
        table.add_row(vec![
            name.to_string(),
            format!("{:.3}", r.success_rate),
            format!("[{lo:.3}, {hi:.3}]"),
            format!("{:.3}", r.mean_reward),
            format!("{:.2}", r.mean_turns),
            r.env_errors.to_string(),
            r.out_of_context.to_string(),
        ]);
    }
    table
}

/// The policy's time per episode, making its envs included, and where it went, e.g.
/// `policy time: 0.62 s/episode (39.1 s for 63; making envs 11.0 s; generation 20.1 s, 1946
/// tokens; constraints 5.9 s; env steps 0.4 s)`.
pub fn timing_line(t: &crate::trainer::EvalTiming, episodes: usize) -> String {
    format!(
        "policy time: {:.2} s/episode ({:.1} s for {episodes}; making envs {:.1} s; generation \
         {:.1} s, {} tokens; constraints {:.1} s; env steps {:.1} s)",
        t.per_episode(episodes),
        t.make_envs_seconds + t.seconds,
        t.make_envs_seconds,
        t.generate_seconds,
        t.generated_tokens,
        t.grammar_seconds,
        t.env_seconds,
    )
}

/// Episodes of an evaluation of an env without a fixed task list, unless asked otherwise.
pub const DEFAULT_EPISODES: usize = 200;

/// Prints a comparison as a small table.
pub fn print(c: &Comparison, env: &str, split: Split) {
    println!(
        "{env}, {split:?} split, {} episodes (the same for both)",
        c.policy.episodes
    );
    let rows = [
        ("policy", Some(&c.policy)),
        ("baseline", c.baseline.as_ref()),
    ];
    println!("{}", report_table(&rows));
    if let Some(t) = &c.policy.timing {
        println!("{}", timing_line(t, c.policy.episodes));
    }
    if c.policy.prompt_too_long > 0 {
        let names = &c.policy.prompt_too_long_tasks;
        let shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
        let more = names.len().saturating_sub(shown.len());
        println!(
            "{} episodes played no turn: their first prompt (the task and its database's \
             schema) does not fit the model's context: {}{}",
            c.policy.prompt_too_long,
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timing_line_counts_making_the_envs_in_the_time_per_episode() {
        let t = crate::trainer::EvalTiming {
            make_envs_seconds: 6.0,
            seconds: 30.0,
            env_seconds: 0.5,
            grammar_seconds: 4.0,
            generate_seconds: 25.0,
            generated_tokens: 1946,
        };
        assert_eq!(
            timing_line(&t, 60),
            "policy time: 0.60 s/episode (36.0 s for 60; making envs 6.0 s; generation 25.0 s, \
             1946 tokens; constraints 4.0 s; env steps 0.5 s)"
        );
    }
}
