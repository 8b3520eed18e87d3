//! The model files sandgym loads, damaged: the input's first byte picks a file, the rest are
//! its bytes, put in place of the good one next to an otherwise whole model —
//! a GGUF file; a Hugging Face directory's `model.safetensors`, `config.json` or
//! `tokenizer.json`; a sandgym checkpoint's `model.mpk`, `config.json` or `tokenizer.json`.
//! Each load is a model or a typed error, never a panic, and a model that loads reads tokens:
//! its logits have the shape its vocabulary says.
//!
//! The good model is the tiny Llama of the policy crate's parity fixtures; its checkpoint is
//! saved from it once per process. burn's record loader panics on some damaged records and the
//! checkpoint load catches that inside the call; the fuzzer's default hook would abort on a
//! caught panic, so this target installs the standard hook: a panic that escapes a load still
//! fails the input (libFuzzer's wrapper aborts when the call unwinds).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sandgym_policy::{Cpu, PolicyModel, checkpoint, load, pretrained};

#[path = "tiny_llama.rs"]
mod tiny_llama;

/// The files an input can replace: (directory kind, file name).
const FILES: [(Kind, &str); 7] = [
    (Kind::Gguf, "model.gguf"),
    (Kind::Hf, "model.safetensors"),
    (Kind::Hf, "config.json"),
    (Kind::Hf, "tokenizer.json"),
    (Kind::Checkpoint, "model.mpk"),
    (Kind::Checkpoint, "config.json"),
    (Kind::Checkpoint, "tokenizer.json"),
];

#[derive(Clone, Copy)]
enum Kind {
    Gguf,
    Hf,
    Checkpoint,
}

/// Where the whole model lies, in both layouts.
struct Dirs {
    root: PathBuf,
    hf: PathBuf,
    checkpoint: PathBuf,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let _ = std::panic::take_hook();
        let root = std::env::temp_dir().join(format!("sandgym-fuzz-model-{}", std::process::id()));
        let hf = root.join("hf");
        tiny_llama::write_hf(&hf);
        let device = Default::default();
        let good = pretrained::load_hf::<Cpu>(&hf, &device).expect("the fixture loads");
        let checkpoint = root.join("checkpoint");
        checkpoint::save(&checkpoint, &good.config, &good.model, &good.tokenizer)
            .expect("the checkpoint saved");
        Dirs {
            root,
            hf,
            checkpoint,
        }
    })
}

/// A loaded model reads three tokens into logits over its whole vocabulary.
fn reads(model: &PolicyModel<Cpu>) {
    let vocab = model.vocab_size();
    let ids: Vec<u32> = (0..3)
        .map(|i| i.min(vocab.saturating_sub(1)) as u32)
        .collect();
    assert_eq!(model.logits_of(&ids).dims(), [3, vocab]);
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let dirs = dirs();
    let device = Default::default();
    let (kind, name) = FILES[pick as usize % FILES.len()];
    let replace = |dir: &Path| {
        let path = dir.join(name);
        let good = std::fs::read(&path).ok();
        std::fs::write(&path, bytes).expect("the input written");
        good.map(|good| (path, good))
    };
    match kind {
        Kind::Gguf => {
            let path = dirs.root.join(name);
            std::fs::write(&path, bytes).expect("the input written");
            if let Ok(loaded) = pretrained::load_gguf::<Cpu>(&path, &device) {
                reads(&loaded.model);
            }
        }
        Kind::Hf => {
            let restore = replace(&dirs.hf);
            if let Ok(loaded) = pretrained::load_hf::<Cpu>(&dirs.hf, &device) {
                reads(&loaded.model);
            }
            if let Some((path, good)) = restore {
                std::fs::write(path, good).expect("the good file restored");
            }
        }
        Kind::Checkpoint => {
            let restore = replace(&dirs.checkpoint);
            if let Ok((_, model, _)) = load::checkpoint::<Cpu>(&dirs.checkpoint, &device) {
                reads(&model);
            }
            if let Some((path, good)) = restore {
                std::fs::write(path, good).expect("the good file restored");
            }
        }
    }
});
