//! The proxy approach's warm start, prepared the way a team without an env would: the
//! unmodified harness runs the train tasks through the recording proxy while a teacher (the
//! env's demonstrator, [`Teacher`]) answers, and the recorded calls become SFT samples — each
//! of the harness's contexts (the sub-agent's, the main agent's, each stretch between history
//! compressions) one sample, as the traces split them ([`TraceReader`]).

use std::path::Path;

use sandgym_proxy::{TraceReader, TraceStats, TraceStore};
use sandgym_trainer::{Sample, TrainConfig};
use serde::{Deserialize, Serialize};

use crate::EnvTarget;
use crate::approach::ProxySettings;
use crate::env_api::{ResetOptions, Split};
use crate::harness_runner::{HarnessRunner, HarnessTotals, rollout_id, trace_ids};
use crate::policy::Tokenizer;
use crate::teacher::Teacher;

/// What the teacher's traces gave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TeacherData {
    /// The harness runs (one per train task).
    pub runs: HarnessTotals,
    /// Runs whose task was solved.
    pub solved: usize,
    /// Runs left out as unsolved (`sft.successful_only`).
    pub unsolved_left_out: usize,
    /// What reading the traces found (segments, drift by kind, unusable calls).
    pub traces: TraceStats,
    /// Calls the teacher answered with a note (a context that could not take its next
    /// action: the sub-agent's).
    pub notes: usize,
    /// Segments left out as longer than the model's context.
    pub too_long: usize,
    /// Samples made (segments).
    pub samples: usize,
}

/// Plays `config.sft.demonstrations` train tasks of `target` (each once, in order, as the env
/// approach's demonstrations) in its harness with the teacher answering, recording into
/// `db`, and returns the SFT samples of the recorded calls and what they held.
pub fn teacher_samples(
    target: &EnvTarget,
    tokenizer: &Tokenizer,
    config: &TrainConfig,
    settings: &ProxySettings,
    db: &Path,
) -> anyhow::Result<(Vec<Sample>, TeacherData)> {
    let id = target.id()?;
    let count = config.sft.demonstrations;
    let n = target
        .spec()?
        .tasks
        .map_or(count, |t| (t.train as usize).min(count));
    anyhow::ensure!(
        n > 0,
        "the proxy approach's warm start plays sft.demonstrations train tasks: set it above 0"
    );
    let options = ResetOptions::split(Split::Train).cycling();
    let teacher = Teacher::start(tokenizer.clone(), settings.limits)?;
    let runner = HarnessRunner::start(
        &id,
        &teacher.url(),
        db,
        settings.harness.clone(),
        settings.concurrency,
        options.clone(),
    )?;
    let jobs: Vec<(usize, u64)> = (0..n).map(|i| (i, i as u64)).collect();
    let rollouts: Vec<(String, u64)> = jobs
        .iter()
        .enumerate()
        .map(|(i, &(_, seed))| (rollout_id("sft", i), seed))
        .collect();
    teacher.assign(target, &options, &rollouts)?;
    let runs = runner.play("sft", &jobs);
    let ids = trace_ids(&runs);
    let mut reader = TraceReader::new(tokenizer.clone(), settings.limits);
    let (per_run, traces) = reader.read(&TraceStore::open(db)?, &ids)?;
    let mut data = TeacherData {
        runs: HarnessTotals::of(&runs),
        solved: runs.iter().filter(|r| r.success).count(),
        traces,
        notes: teacher.notes(),
        ..TeacherData::default()
    };
    let mut samples = Vec::new();
    for (run, episodes) in runs.iter().zip(per_run) {
        if config.sft.successful_only && !run.success {
            data.unsolved_left_out += 1;
            continue;
        }
        for episode in episodes {
            if episode.tokens.len() > settings.max_context {
                data.too_long += 1;
                continue;
            }
            samples.push(Sample::from_episode(&episode));
        }
    }
    data.samples = samples.len();
    Ok((samples, data))
}
