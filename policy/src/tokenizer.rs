//! A byte-level BPE tokenizer trained on the envs' own text, with role tokens.

use std::path::Path;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer, TokenizerBuilder};

use crate::{PolicyError, Result};

/// The special tokens, in id order (they get ids 0..N).
pub const SPECIAL_TOKENS: [&str; 6] = [
    "<|endoftext|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|end|>",
];

/// The roles of a rendered conversation, each opened by its special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Tool specs.
    System,
    /// The task instruction.
    User,
    /// The policy's own turns (the only trainable tokens).
    Assistant,
    /// Tool output, errors, the customer's replies.
    Tool,
}

/// A byte-level BPE tokenizer in HF `tokenizer.json` form, so the wider ecosystem can read it.
///
/// ```
/// use sandgym_policy::Tokenizer;
/// let corpus = ["SELECT name FROM products", "{\"tool_name\": \"run_sql\"}"];
/// let tok = Tokenizer::train(corpus.iter().map(|s| s.to_string()), 300)?;
/// let ids = tok.encode("SELECT name FROM products")?;
/// assert_eq!(tok.decode(&ids)?, "SELECT name FROM products");
/// # Ok::<(), sandgym_policy::PolicyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: HfTokenizer,
    json: String,
}

fn err(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Trains a byte-level BPE of `vocab_size` tokens (special tokens and the 256 byte symbols
    /// included) on `corpus`. Deterministic for the same corpus.
    pub fn train(corpus: impl Iterator<Item = String> + Send, vocab_size: usize) -> Result<Self> {
        let specials: Vec<AddedToken> = SPECIAL_TOKENS
            .iter()
            .map(|t| AddedToken::from(*t, true))
            .collect();
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(2)
            .show_progress(false)
            .special_tokens(specials)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build();
        let mut tokenizer = TokenizerBuilder::new()
            .with_model(BPE::default())
            .with_normalizer(None::<tokenizers::NormalizerWrapper>)
            .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
            .with_post_processor(None::<tokenizers::PostProcessorWrapper>)
            .with_decoder(Some(ByteLevelDecoder::default()))
            .build()
            .map_err(err)?;
        tokenizer.train(&mut trainer, corpus).map_err(err)?;
        let json = tokenizer.to_string(false).map_err(err)?;
        Self::from_json(&json)
    }

    /// Loads from `tokenizer.json` text.
    pub fn from_json(json: &str) -> Result<Self> {
        let inner: HfTokenizer = json.parse().map_err(err)?;
        for (i, t) in SPECIAL_TOKENS.iter().enumerate() {
            if inner.token_to_id(t) != Some(i as u32) {
                return Err(PolicyError::Tokenizer(format!(
                    "special token {t} must have id {i}; this tokenizer.json was not made by sandgym"
                )));
            }
        }
        Ok(Self {
            inner,
            json: json.to_owned(),
        })
    }

    /// Loads a `tokenizer.json` file.
    pub fn load(path: &Path) -> Result<Self> {
        let json = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&json)
    }

    /// Writes `tokenizer.json` (atomically: a temporary file, then a rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |source| PolicyError::Io {
            path: path.to_owned(),
            source,
        };
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, &self.json).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The `tokenizer.json` text.
    pub fn to_json(&self) -> &str {
        &self.json
    }

    /// Vocabulary size, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text`. Special-token strings inside `text` would be matched as special
    /// tokens; [`Template`](crate::Template) neutralises them in untrusted text first.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .inner
            .encode(text, false)
            .map_err(err)?
            .get_ids()
            .to_vec())
    }

    /// The text of `ids` (special tokens included as their strings).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(err)
    }

    /// The id of a special token.
    pub fn special(&self, token: &str) -> u32 {
        SPECIAL_TOKENS
            .iter()
            .position(|t| *t == token)
            .expect("one of SPECIAL_TOKENS") as u32
    }

    /// The id that opens a turn of `role`.
    pub fn role(&self, role: Role) -> u32 {
        match role {
            Role::System => 1,
            Role::User => 2,
            Role::Assistant => 3,
            Role::Tool => 4,
        }
    }

    /// The end-of-turn id.
    pub fn end(&self) -> u32 {
        5
    }

    /// The end-of-text id.
    pub fn eos(&self) -> u32 {
        0
    }
}
