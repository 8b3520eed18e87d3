//! Labels a person gives episodes in the dashboard (`sandgym view`): good or bad, why, and
//! optionally the action the agent should have taken at one step. They are appended to the
//! run's `labels.jsonl`, one [`Label`] per line, and `sandgym sft --data labels.jsonl` trains on
//! them: a good episode as it was played, a bad one up to the corrected step with the corrected
//! action in place of the agent's (a bad one without a correction teaches nothing and is
//! skipped).

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::env_api::{Action, StepRecord, Trajectory};

/// The file of a run directory that holds its labels.
pub const LABELS_FILE: &str = "labels.jsonl";

/// A person's verdict on an episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The agent did what it should: train on the episode as played.
    Good,
    /// The agent went wrong (at `step`, when a correction is given).
    Bad,
}

/// One label: which episode, the verdict and why, the correction if any, and the episode's
/// Agent Template steps as they were when labelled (so the label trains without the run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    /// The episode, as the dashboard names it (`episodes/train-000003.jsonl#5`).
    pub episode: String,
    /// The env it was played on, when known.
    #[serde(default)]
    pub env: Option<String>,
    /// Its reset seed, when known.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Its task, when the env names one.
    #[serde(default)]
    pub task: Option<String>,
    /// Good or bad.
    pub verdict: Verdict,
    /// Why, in the labeller's words.
    #[serde(default)]
    pub reason: String,
    /// The step (index into `records`, from 0) the correction replaces.
    #[serde(default)]
    pub step: Option<usize>,
    /// The action the agent should have taken at `step`, as Agent Template JSON
    /// (`{"thought", "action": {"tool_name", "parameters"}}` or `{"response"}`).
    #[serde(default)]
    pub corrected_action: Option<serde_json::Value>,
    /// The episode's steps when it was labelled.
    pub records: Vec<StepRecord>,
    /// When it was labelled (seconds since the Unix epoch).
    #[serde(default)]
    pub labelled_at: u64,
}

/// What is wrong with a label or a labels file.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// A label contradicts itself.
    #[error("label of {episode}: {reason}")]
    Invalid {
        /// The episode it labels.
        episode: String,
        /// What is wrong.
        reason: String,
    },
    /// A line of a labels file is not a label.
    #[error("{file} line {line}: not a label ({reason})")]
    Line {
        /// The file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// Why.
        reason: String,
    },
    /// The file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl Label {
    /// Checks the label is whole: a correction names a step of the episode and parses as an
    /// action; a step is given only with a correction.
    pub fn validate(&self) -> Result<Option<Action>, LabelError> {
        let invalid = |reason: String| LabelError::Invalid {
            episode: self.episode.clone(),
            reason,
        };
        match (&self.corrected_action, self.step) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(invalid("a step is given without a corrected action".into())),
            (Some(_), None) => Err(invalid(
                "a corrected action needs the step it replaces".into(),
            )),
            (Some(value), Some(step)) => {
                if step >= self.records.len().max(1) {
                    return Err(invalid(format!(
                        "step {step} is past the episode's {} steps",
                        self.records.len()
                    )));
                }
                let action = Action::from_value(value.clone())
                    .map_err(|e| invalid(format!("the corrected action: {e}")))?;
                Ok(Some(action))
            }
        }
    }

    /// What the label teaches, as an Agent Template trajectory: a good episode whole, a bad
    /// one's steps before `step` followed by the corrected action; `None` for a bad episode
    /// without a correction.
    pub fn sft_trajectory(&self) -> Result<Option<Trajectory>, LabelError> {
        let correction = self.validate()?;
        let mut t = Trajectory::new(self.episode.clone());
        let instruction = self
            .records
            .first()
            .map(|r| r.instruction.clone())
            .unwrap_or_default();
        match (self.verdict, correction) {
            (Verdict::Good, None) => {
                for r in &self.records {
                    t.push(r.clone());
                }
            }
            (_, Some(action)) => {
                let step = self.step.unwrap_or(0);
                for r in &self.records[..step.min(self.records.len())] {
                    t.push(r.clone());
                }
                t.push(StepRecord::new(instruction, &action, String::new(), 0.0));
            }
            (Verdict::Bad, None) => return Ok(None),
        }
        Ok((!t.records.is_empty()).then_some(t))
    }
}

/// Appends `label` (checked first) to the labels file `path` as one line.
pub fn append_label(path: &Path, label: &Label) -> Result<(), LabelError> {
    label.validate()?;
    let io = |source| LabelError::Io {
        file: path.display().to_string(),
        source,
    };
    let mut line = serde_json::to_string(label).expect("a label serialises");
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    // One write of the whole line: concurrent appenders never interleave within a line.
    f.write_all(line.as_bytes()).map_err(io)
}

/// Every label of the labels file `path`, checked; the first bad line is an error.
pub fn read_labels(path: &Path) -> Result<Vec<Label>, LabelError> {
    let file = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| LabelError::Io {
        file: file.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|source| LabelError::Io {
            file: file.clone(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let label: Label = serde_json::from_str(&line).map_err(|e| LabelError::Line {
            file: file.clone(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        label.validate()?;
        out.push(label);
    }
    Ok(out)
}

/// Whether the JSONL file `path` is a labels file (its first non-blank line has a `verdict`).
pub fn is_labels_file(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .is_some_and(|v| v.get("verdict").is_some())
}

/// The SFT trajectories of the labels in `path` and how many labels taught nothing (bad
/// without a correction).
pub fn training_data(path: &Path) -> Result<(Vec<Trajectory>, usize), LabelError> {
    let mut skipped = 0;
    let mut out = Vec::new();
    for label in read_labels(path)? {
        match label.sft_trajectory()? {
            Some(t) => out.push(t),
            None => skipped += 1,
        }
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn records() -> Vec<StepRecord> {
        let guess = |n: u64, obs: &str, r: f64| {
            StepRecord::new(
                "Guess a number between 1 and 100.",
                &Action::tool("guess", json!({"number": n})),
                obs,
                r,
            )
        };
        vec![guess(50, "higher", 0.0), guess(10, "higher", 0.0)]
    }

    fn label(verdict: Verdict, step: Option<usize>, fix: Option<serde_json::Value>) -> Label {
        Label {
            episode: "episodes/train-000001.jsonl#0".into(),
            env: Some("guess-number-v0".into()),
            seed: Some(3),
            task: None,
            verdict,
            reason: "went below a number it knew was too low".into(),
            step,
            corrected_action: fix,
            records: records(),
            labelled_at: 0,
        }
    }

    #[test]
    fn good_trains_whole_bad_trains_up_to_the_correction_and_bad_alone_teaches_nothing() {
        let actions = |rs: &[StepRecord]| rs.iter().map(|r| r.action.clone()).collect::<Vec<_>>();
        let good = label(Verdict::Good, None, None).sft_trajectory().unwrap();
        assert_eq!(actions(&good.unwrap().records), actions(&records()));
        let fix = json!({"thought": "above 50", "action": {"tool_name": "guess", "parameters": {"number": 75}}});
        let bad = label(Verdict::Bad, Some(1), Some(fix))
            .sft_trajectory()
            .unwrap()
            .unwrap();
        assert_eq!(bad.records.len(), 2);
        assert_eq!(bad.records[0].action, records()[0].action);
        assert_eq!(bad.records[0].observation, "higher");
        let call = bad.records[1].action.as_ref().unwrap();
        assert_eq!(call.parameters["number"], 75);
        assert_eq!(bad.records[1].thought, "above 50");
        assert!(
            label(Verdict::Bad, None, None)
                .sft_trajectory()
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn contradictory_labels_and_bad_lines_are_typed_errors() {
        let fix = json!({"response": "42"});
        let past = label(Verdict::Bad, Some(9), Some(fix.clone()));
        assert!(past.validate().unwrap_err().to_string().contains("past"));
        let no_step = label(Verdict::Bad, None, Some(fix));
        assert!(no_step.validate().is_err());
        let junk = label(Verdict::Bad, Some(0), Some(json!({"tool": "x"})));
        let err = junk.validate().unwrap_err().to_string();
        assert!(err.contains("corrected action"), "{err}");

        let dir = std::env::temp_dir().join(format!("sandgym-labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(LABELS_FILE);
        let _ = std::fs::remove_file(&path);
        append_label(&path, &label(Verdict::Good, None, None)).unwrap();
        assert!(
            append_label(&path, &junk).is_err(),
            "a bad label is refused"
        );
        assert!(is_labels_file(&path));
        assert_eq!(training_data(&path).unwrap().0.len(), 1);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"verdict\": \"meh\"}\n")
            .unwrap();
        let err = read_labels(&path).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
