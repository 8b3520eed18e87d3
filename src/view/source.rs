//! What the dashboard reads: a run directory (its metrics, evaluations and episode logs), a
//! JSONL file of Agent Template records or episode logs, or the recording proxy's trace store.
//! Reading never fails as a whole: a missing file, a line cut short by a writer still at work,
//! or a line that is not what it should be becomes a *problem* the page shows, and the rest is
//! read.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{Value, json};

use crate::env_api::{Done, StepRecord};
use crate::trainer::{EpisodeLog, RunDir};

/// The longest line the viewer reads (a longer one is reported, not read).
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// The most token spans one episode's page shows (the rest are counted).
pub const MAX_SPANS: usize = 20_000;
/// The most characters of one observation the page shows.
pub const MAX_TEXT_CHARS: usize = 100_000;

/// What the dashboard was pointed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A training run's directory.
    Run,
    /// A JSONL file of Agent Template records (`run --out`, `eval --trajectories`) or of
    /// episode logs.
    File,
    /// The recording proxy's SQLite trace store.
    Traces,
}

/// Why a source cannot be opened at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Nothing is at the path.
    #[error("{0}: no such file or directory")]
    Missing(PathBuf),
    /// The path is not something the viewer reads.
    #[error(
        "{0}: not a run directory (no config.json, metrics.jsonl or episodes/), a .jsonl file or a trace store (.db)"
    )]
    Unknown(PathBuf),
}

/// A source of runs and episodes, with the episode files it has already read.
#[derive(Debug)]
pub struct Source {
    /// What it is.
    pub kind: SourceKind,
    /// Where it is.
    pub path: PathBuf,
    cache: Mutex<HashMap<PathBuf, Cached>>,
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: (u64, Option<SystemTime>),
    read: Partial<EpisodeLogLine>,
}

/// Lines of one file read as far as they could be, and what could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct Partial<T> {
    /// What was read.
    pub items: Vec<T>,
    /// What was not, one sentence each.
    pub problems: Vec<String>,
}

impl<T> Default for Partial<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            problems: Vec::new(),
        }
    }
}

/// One episode of an episode file, with where it is.
#[derive(Clone, Debug)]
pub struct EpisodeLogLine {
    /// Its id: the file relative to the source, `#`, its place in the file.
    pub id: String,
    /// The episode.
    pub log: EpisodeLog,
}

/// One line of the episode list.
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeSummary {
    /// Its id (`episodes/eval-000010.jsonl#3`).
    pub id: String,
    /// train, eval, closing, or file.
    pub kind: String,
    /// The iteration.
    pub iter: u32,
    /// The reset seed.
    pub seed: u64,
    /// The task, when the env names one.
    pub task: Option<String>,
    /// The start of the instruction.
    pub instruction: String,
    /// The total reward.
    pub reward: f64,
    /// Whether it succeeded.
    pub success: bool,
    /// Policy turns (steps for a file of records).
    pub turns: usize,
    /// How it ended.
    pub done: Done,
    /// The env failure that ended it.
    pub error: Option<String>,
    /// It ran out of context.
    pub out_of_context: bool,
    /// Tokens the policy generated.
    pub generated_tokens: usize,
}

impl EpisodeSummary {
    fn of(id: &str, log: &EpisodeLog) -> Self {
        Self {
            id: id.to_owned(),
            kind: log.kind.as_str().to_owned(),
            iter: log.iter,
            seed: log.seed,
            task: log.task.clone(),
            instruction: cut(&log.instruction, 160),
            reward: log.reward,
            success: log.success,
            turns: log.turns,
            done: log.done,
            error: log.error.clone(),
            out_of_context: log.out_of_context,
            generated_tokens: log.tokens.iter().filter(|t| t.generated).count(),
        }
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Reads the JSONL file `path` line by line into `T`s. A missing file is a problem only when
/// `required`; a bad line is a problem naming it (the last line, without its newline, as one
/// still being written).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path, required: bool) -> Partial<T> {
    let mut out = Partial::default();
    let name = path.display();
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if required {
                out.problems.push(format!("{name}: not there (yet)"));
            }
            return out;
        }
        Err(e) => {
            out.problems.push(format!("{name}: {e}"));
            return out;
        }
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        number += 1;
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                out.problems.push(format!("{name} line {number}: {e}"));
                break;
            }
        }
        if line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n") {
            out.problems.push(format!(
                "{name} line {number}: longer than {} MiB, not read",
                MAX_LINE_BYTES >> 20
            ));
            if skip_line(&mut reader).is_err() {
                break;
            }
            continue;
        }
        let complete = line.ends_with(b"\n");
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(text.trim_end()) {
            Ok(item) => out.items.push(item),
            Err(_) if !complete => out.problems.push(format!(
                "{name} line {number}: cut short (the file is still being written?)"
            )),
            Err(e) => out.problems.push(format!("{name} line {number}: {e}")),
        }
    }
    out
}

/// Skips the rest of a line without keeping it.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

impl Source {
    /// Opens `path`: a directory is a run, a `.db`/`.sqlite` file a trace store, any other
    /// file a JSONL file.
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let kind = if path.is_dir() {
            if !RunDir::new(path).is_run() {
                return Err(SourceError::Unknown(path.to_owned()));
            }
            SourceKind::Run
        } else if path.is_file() {
            match path.extension().and_then(|e| e.to_str()) {
                Some("db" | "sqlite" | "sqlite3") => SourceKind::Traces,
                _ => SourceKind::File,
            }
        } else {
            return Err(SourceError::Missing(path.to_owned()));
        };
        Ok(Self {
            kind,
            path: path.to_owned(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The run's `config.json`, if it is a run with one (a problem if it cannot be read).
    pub fn run_config(&self) -> (Option<Value>, Vec<String>) {
        if self.kind != SourceKind::Run {
            return (None, Vec::new());
        }
        let path = RunDir::new(&self.path).config();
        match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(v) => (Some(v), Vec::new()),
                Err(e) => (None, vec![format!("{}: {e}", path.display())]),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Vec::new()),
            Err(e) => (None, vec![format!("{}: {e}", path.display())]),
        }
    }

    /// The run's metrics and evaluations, as JSON objects (whatever fields they have).
    pub fn metrics(&self) -> Value {
        if self.kind != SourceKind::Run {
            return json!({"metrics": [], "evals": [], "closing": null, "problems": []});
        }
        let run = RunDir::new(&self.path);
        let m: Partial<Value> = read_jsonl(&run.metrics(), true);
        let e: Partial<Value> = read_jsonl(&run.evals(), false);
        let mut problems = m.problems;
        problems.extend(e.problems);
        // The closing table (`train` writes it when the run ends).
        let path = run.closing_eval();
        let closing = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str::<Value>(&text)
                .map_err(|e| problems.push(format!("{}: {e}", path.display())))
                .ok(),
            Err(_) => None,
        };
        json!({"metrics": m.items, "evals": e.items, "closing": closing, "problems": problems})
    }

    /// The episode files of a run, in order (train and eval by iteration, closing last).
    fn episode_files(&self) -> (Vec<PathBuf>, Vec<String>) {
        let dir = RunDir::new(&self.path).episodes();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
            Err(e) => return (Vec::new(), vec![format!("{}: {e}", dir.display())]),
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        (files, Vec::new())
    }

    /// The episodes of one episode file, read once per version of the file.
    fn episode_file(&self, path: &Path) -> Partial<EpisodeLogLine> {
        let stamp = std::fs::metadata(path)
            .map(|m| (m.len(), m.modified().ok()))
            .unwrap_or((0, None));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(path).filter(|c| c.stamp == stamp) {
            return c.read.clone();
        }
        let rel = match self.kind {
            SourceKind::Run => path.strip_prefix(&self.path).unwrap_or(path),
            _ => Path::new(path.file_name().unwrap_or_default()),
        }
        .display()
        .to_string();
        let read = if self.kind == SourceKind::File && !is_episode_log(path) {
            records_as_logs(path, &rel)
        } else {
            let lines: Partial<EpisodeLog> = read_jsonl(path, true);
            Partial {
                items: lines
                    .items
                    .into_iter()
                    .enumerate()
                    .map(|(i, log)| EpisodeLogLine {
                        id: format!("{rel}#{i}"),
                        log,
                    })
                    .collect(),
                problems: lines.problems,
            }
        };
        cache.insert(
            path.to_owned(),
            Cached {
                stamp,
                read: read.clone(),
            },
        );
        read
    }

    /// Every episode the source has, as it was read, and what could not be read.
    pub fn episodes(&self) -> Partial<EpisodeLogLine> {
        let (files, mut problems) = match self.kind {
            SourceKind::Run => self.episode_files(),
            SourceKind::File => (vec![self.path.clone()], Vec::new()),
            SourceKind::Traces => return Partial::default(),
        };
        let mut items = Vec::new();
        for f in files {
            let read = self.episode_file(&f);
            items.extend(read.items);
            problems.extend(read.problems);
        }
        Partial { items, problems }
    }

    /// The episode list.
    pub fn summaries(&self) -> Partial<EpisodeSummary> {
        let all = self.episodes();
        Partial {
            items: all
                .items
                .iter()
                .map(|e| EpisodeSummary::of(&e.id, &e.log))
                .collect(),
            problems: all.problems,
        }
    }

    /// One episode by its id.
    pub fn episode(&self, id: &str) -> Option<EpisodeLog> {
        let (file, _) = id.rsplit_once('#')?;
        let path = match self.kind {
            SourceKind::Run => {
                // Only a file the listing has: an id never reaches outside the run.
                let (files, _) = self.episode_files();
                files.into_iter().find(|f| {
                    f.strip_prefix(&self.path)
                        .is_ok_and(|r| r == Path::new(file))
                })?
            }
            SourceKind::File => self.path.clone(),
            SourceKind::Traces => return None,
        };
        self.episode_file(&path)
            .items
            .into_iter()
            .find(|e| e.id == id)
            .map(|e| e.log)
    }
}

/// Whether the first line of `path` is an episode log (it has `kind` and `records`).
fn is_episode_log(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut first = String::new();
    let _ = std::io::BufReader::new(f)
        .take(MAX_LINE_BYTES as u64)
        .read_line(&mut first);
    serde_json::from_str::<Value>(&first)
        .is_ok_and(|v| v.get("kind").is_some() && v.get("records").is_some())
}

/// A file of Agent Template records as episode logs: consecutive records of one episode form
/// it, ending at a record whose `done` is set; the seed and task come from its id
/// (`env-id/seed=N/task=T`).
fn records_as_logs(path: &Path, rel: &str) -> Partial<EpisodeLogLine> {
    let records: Partial<StepRecord> = read_jsonl(path, true);
    let mut groups: Vec<(String, Vec<StepRecord>)> = Vec::new();
    for r in records.items {
        let episode = r.episode.clone().unwrap_or_default();
        match groups.last_mut() {
            Some((id, rs)) if *id == episode && !rs.last().is_some_and(|l| l.done.is_done()) => {
                rs.push(r)
            }
            _ => groups.push((episode, vec![r])),
        }
    }
    let items = groups
        .into_iter()
        .enumerate()
        .map(|(i, (episode, records))| {
            let (seed, task) = seed_and_task(&episode);
            let reward = records.iter().map(|r| r.reward).sum();
            let done = records.last().map(|r| r.done).unwrap_or_default();
            let log = EpisodeLog {
                kind: crate::trainer::EpisodeKind::Eval,
                iter: 0,
                index: i,
                group: i,
                seed,
                options: Default::default(),
                task,
                instruction: records
                    .first()
                    .map(|r| r.instruction.clone())
                    .unwrap_or_default(),
                reward,
                success: crate::env_api::episode_success(&Default::default(), done, reward),
                turns: records.len(),
                done,
                error: None,
                out_of_context: false,
                turn_rewards: records.iter().map(|r| r.reward).collect(),
                reward_terms: Default::default(),
                reward_parts: Default::default(),
                records,
                tokens: Vec::new(),
            };
            EpisodeLogLine {
                id: format!("{rel}#{i}"),
                log,
            }
        })
        .collect();
    Partial {
        items,
        problems: records.problems,
    }
}

/// The seed and task of an episode id `env-id/seed=N[/task=T]` (0 and none when absent).
pub fn seed_and_task(episode: &str) -> (u64, Option<String>) {
    let mut seed = 0;
    let mut task = None;
    for part in episode.split('/') {
        if let Some(s) = part.strip_prefix("seed=") {
            seed = s.parse().unwrap_or(0);
        } else if let Some(t) = part.strip_prefix("task=") {
            task = Some(t.to_owned());
        }
    }
    (seed, task)
}

/// `log` as the page shows it: at most [`MAX_SPANS`] token spans and [`MAX_TEXT_CHARS`] of
/// any observation, with what was left out said in `notes`.
pub fn for_page(log: &EpisodeLog) -> Value {
    let mut log = log.clone();
    let mut notes = Vec::new();
    if log.tokens.len() > MAX_SPANS {
        notes.push(format!(
            "showing the first {MAX_SPANS} of {} token spans",
            log.tokens.len()
        ));
        log.tokens.truncate(MAX_SPANS);
    }
    for (i, r) in log.records.iter_mut().enumerate() {
        if r.observation.chars().count() > MAX_TEXT_CHARS {
            notes.push(format!(
                "step {i}: the observation is cut to {MAX_TEXT_CHARS} characters"
            ));
            r.observation = cut(&r.observation, MAX_TEXT_CHARS);
        }
    }
    let mut v = serde_json::to_value(&log).expect("an episode log serialises");
    v["notes"] = json!(notes);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sandgym-view-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(RunDir::new(&d).episodes()).unwrap();
        d
    }

    #[test]
    fn a_file_being_written_a_bad_line_and_a_missing_file_are_problems_not_failures() {
        let d = dir("partial");
        let path = d.join("metrics.jsonl");
        std::fs::write(
            &path,
            "{\"iter\": 1}\nnot json\n{\"iter\": 3}\n{\"iter\": 4, \"rew",
        )
        .unwrap();
        let read: Partial<Value> = read_jsonl(&path, true);
        assert_eq!(read.items.len(), 2);
        assert_eq!(read.problems.len(), 2, "{:?}", read.problems);
        assert!(read.problems[0].contains("line 2"), "{:?}", read.problems);
        assert!(
            read.problems[1].contains("line 4") && read.problems[1].contains("still being written")
        );
        let missing: Partial<Value> = read_jsonl(&d.join("eval.jsonl"), false);
        assert!(missing.items.is_empty() && missing.problems.is_empty());
        let missing: Partial<Value> = read_jsonl(&d.join("eval.jsonl"), true);
        assert_eq!(missing.problems.len(), 1);

        // A run whose episode file has a broken line: the rest is listed.
        std::fs::write(
            d.join("episodes/train-000001.jsonl"),
            "{\"kind\": \"train\"}\n",
        )
        .unwrap();
        let source = Source::open(&d).unwrap();
        assert_eq!(source.kind, SourceKind::Run);
        let listed = source.summaries();
        assert!(listed.items.is_empty());
        assert!(
            listed.problems[0].contains("train-000001.jsonl line 1"),
            "{:?}",
            listed.problems
        );
        // An id never reaches outside the run's episode files.
        assert!(source.episode("../metrics.jsonl#0").is_none());
        assert!(source.episode("no-hash").is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_overlong_line_is_skipped_and_the_next_is_read() {
        let d = dir("long");
        let path = d.join("x.jsonl");
        let mut text = format!("\"{}\"\n", "a".repeat(MAX_LINE_BYTES + 10));
        text.push_str("\"short\"\n");
        std::fs::write(&path, text).unwrap();
        let read: Partial<String> = read_jsonl(&path, true);
        assert_eq!(read.items, vec!["short".to_owned()]);
        assert!(
            read.problems[0].contains("longer than"),
            "{:?}",
            read.problems
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn records_files_become_episodes_and_unknown_paths_are_refused() {
        let d = dir("records");
        let path = d.join("episodes.jsonl");
        let rec = |ep: &str, done: &str| {
            format!(
                "{{\"instruction\": \"i\", \"action\": {{\"tool_name\": \"guess\", \"parameters\": {{\"number\": 1}}}}, \"observation\": \"o\", \"reward\": 1.0, \"episode\": \"{ep}\", \"done\": \"{done}\"}}\n"
            )
        };
        let text = rec("guess-number-v0/seed=7", "running")
            + &rec("guess-number-v0/seed=7", "terminated")
            + &rec("guess-number-v0/seed=8/task=t", "terminated");
        std::fs::write(&path, text).unwrap();
        let source = Source::open(&path).unwrap();
        assert_eq!(source.kind, SourceKind::File);
        let eps = source.episodes().items;
        assert_eq!(eps.len(), 2);
        assert_eq!(eps[0].id, "episodes.jsonl#0");
        assert_eq!((eps[0].log.seed, eps[0].log.records.len()), (7, 2));
        assert_eq!(eps[1].log.task.as_deref(), Some("t"));
        assert!(eps[0].log.success);
        assert!(matches!(
            Source::open(&d.join("nope")),
            Err(SourceError::Missing(_))
        ));
        let empty = d.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(matches!(Source::open(&empty), Err(SourceError::Unknown(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
