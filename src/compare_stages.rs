//! A comparison's finished stages, kept in its output directory (`stages/`) so that a run
//! stopped part-way (a comparison takes hours on a small machine) resumes where it stopped
//! with `compare --resume`: each warm start, each approach's RL and each evaluation is done
//! once; the models come back from the checkpoints the stages left.
//!
//! A stage is recorded (one JSON file, written whole and then renamed into place) only after
//! everything it produced is on disk, so a stage that was interrupted is simply done again.
//! The options the run was started with are recorded first; a resume with other options is
//! refused, so one report never mixes two settings.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::comparison::CompareOptions;

/// What decides a comparison's results: the options, with the settings file's contents.
#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
struct Fingerprint {
    env: String,
    model: String,
    lora_rank: usize,
    algo: String,
    iters: Option<u32>,
    init: Option<PathBuf>,
    config: Option<serde_json::Value>,
    seed: Option<u64>,
    concurrency: usize,
    eval_episodes: Option<usize>,
    proxy_samples: Vec<String>,
    history_chars: Option<usize>,
}

impl Fingerprint {
    fn of(args: &CompareOptions) -> anyhow::Result<Self> {
        let config = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Some(
                    serde_json::from_str(&text)
                        .with_context(|| format!("{} is not JSON", path.display()))?,
                )
            }
            None => None,
        };
        Ok(Self {
            env: args.env.clone(),
            model: args.model.model.to_string(),
            lora_rank: args.model.lora_rank,
            algo: args.algo.name().to_owned(),
            iters: args.iters,
            init: args.init.clone(),
            config,
            seed: args.seed,
            concurrency: args.concurrency,
            eval_episodes: args.eval_episodes,
            proxy_samples: args.proxy_samples.iter().map(|s| s.to_string()).collect(),
            history_chars: args.history_chars,
        })
    }
}

/// The stages of the comparison in one output directory.
#[derive(Debug)]
pub(crate) struct Stages {
    dir: PathBuf,
}

impl Stages {
    /// The stages of `args.out`. A fresh run (`resume` false) forgets any stages there and
    /// records its options; a resumed one checks that they are the options recorded.
    pub fn open(args: &CompareOptions, resume: bool) -> anyhow::Result<Self> {
        let dir = args.out.join("stages");
        let path = dir.join("options.json");
        let options = Fingerprint::of(args)?;
        if resume {
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "--resume: {} holds no comparison to resume (no {})",
                    args.out.display(),
                    path.display()
                )
            })?;
            let recorded: Fingerprint = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a comparison's options", path.display()))?;
            anyhow::ensure!(
                recorded == options,
                "--resume: the comparison in {} was started with other options; give the same \
                 ones, or start afresh without --resume\n started with: {}\n now:          {}",
                args.out.display(),
                serde_json::to_string(&recorded)?,
                serde_json::to_string(&options)?
            );
            return Ok(Self { dir });
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("removing the stages in {}", dir.display()))?;
        }
        let stages = Self { dir };
        stages.write(&path, &options)?;
        Ok(stages)
    }

    /// The recorded result of stage `name`, if it finished.
    pub fn done<T: DeserializeOwned>(&self, name: &str) -> anyhow::Result<Option<T>> {
        let path = self.path(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is not what stage {name} records", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Records stage `name` as finished with `value`.
    pub fn finish<T: Serialize>(&self, name: &str, value: &T) -> anyhow::Result<()> {
        self.write(&self.path(name), value)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// `value` into `path`, whole or not at all (a temporary file renamed into place).
    fn write<T: Serialize>(&self, path: &Path, value: &T) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }
}
