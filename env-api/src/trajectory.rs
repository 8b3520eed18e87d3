//! Episodes as lists of records: JSONL files and OpenAI chat messages.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

use crate::{Done, EnvError, Result, StepRecord};

/// One episode: its records in order.
///
/// On disk a trajectory is JSONL, one [`StepRecord`] per line, each carrying the episode id so
/// that many trajectories can share a file.
///
/// ```
/// use sandgym_env_api::{Action, Done, StepRecord, Trajectory};
/// use serde_json::json;
/// let mut t = Trajectory::new("demo-v0/seed=1");
/// t.push(StepRecord::new("Say hi.", &Action::respond("hi"), "", 1.0));
/// t.records[0].done = Done::Terminated;
/// let mut file = Vec::new();
/// t.write_jsonl(&mut file)?;
/// let back = Trajectory::read_jsonl(file.as_slice())?;
/// assert_eq!(back, vec![t]);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trajectory {
    /// The episode id (by convention `env-id/seed=N`, plus the task when one was chosen).
    pub episode: String,
    /// The steps, in order.
    pub records: Vec<StepRecord>,
}

impl Trajectory {
    /// An empty trajectory.
    pub fn new(episode: impl Into<String>) -> Self {
        Self {
            episode: episode.into(),
            records: Vec::new(),
        }
    }

    /// Appends a record, tagging it with this episode's id.
    pub fn push(&mut self, mut record: StepRecord) {
        record.episode = Some(self.episode.clone());
        self.records.push(record);
    }

    /// The sum of the step rewards.
    pub fn total_reward(&self) -> f64 {
        self.records.iter().map(|r| r.reward).sum()
    }

    /// How the episode ended (from its last record).
    pub fn done(&self) -> Done {
        self.records.last().map_or(Done::Running, |r| r.done)
    }

    /// Writes the records as JSONL.
    pub fn write_jsonl(&self, mut out: impl Write) -> Result<()> {
        for record in &self.records {
            let mut record = record.clone();
            record.episode = Some(self.episode.clone());
            serde_json::to_writer(&mut out, &record)
                .map_err(|source| EnvError::Json { line: None, source })?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Reads JSONL records back into trajectories. Consecutive records with the same `episode`
    /// form one trajectory, which ends at its first record whose `done` is set. Blank lines
    /// are skipped; a malformed line is an error naming its line number.
    pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Trajectory>> {
        let mut out: Vec<Trajectory> = Vec::new();
        for (i, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let record: StepRecord =
                serde_json::from_str(&line).map_err(|source| EnvError::Json {
                    line: Some(i + 1),
                    source,
                })?;
            let episode = record.episode.clone().unwrap_or_default();
            let continues = out
                .last()
                .is_some_and(|t| t.episode == episode && !t.done().is_done());
            if !continues {
                out.push(Trajectory::new(episode));
            }
            out.last_mut().expect("pushed above").records.push(record);
        }
        Ok(out)
    }

    /// The episode as OpenAI chat messages (for SFT with other tools): the instruction as the
    /// user turn, each tool call as an assistant message with `tool_calls` (the thought as its
    /// content) followed by a `tool` message with the observation, and a final response as an
    /// assistant message.
    pub fn to_chat_messages(&self) -> Vec<Value> {
        let mut messages = Vec::new();
        if let Some(first) = self.records.first() {
            messages.push(json!({"role": "user", "content": first.instruction}));
        }
        for (i, record) in self.records.iter().enumerate() {
            let thought = (!record.thought.is_empty()).then(|| record.thought.clone());
            if let Some(call) = &record.action {
                let id = format!("call_{i}");
                messages.push(json!({
                    "role": "assistant",
                    "content": thought,
                    "tool_calls": [{
                        "id": id,
                        "type": "function",
                        "function": {
                            "name": call.tool_name,
                            "arguments": Value::Object(call.parameters.clone()).to_string(),
                        }
                    }]
                }));
                messages.push(
                    json!({"role": "tool", "tool_call_id": id, "content": record.observation}),
                );
            } else if let Some(response) = &record.response {
                messages.push(json!({"role": "assistant", "content": response}));
            }
        }
        messages
    }
}
