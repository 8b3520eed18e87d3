//! Tokenizers: a byte-level BPE trained on the envs' own text, or a pretrained model's own
//! `tokenizer.json`, each with the chat format its model was trained on.

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

/// How a model's conversations are laid out in tokens: what opens a turn of each role, the
/// token that closes a turn (generation stops at it), what separates two turns, and the
/// end-of-text token.
///
/// Detected from the tokenizer's special tokens, so a `tokenizer.json` is all a model needs:
/// - **sandgym** (`<|system|>` … `<|end|>` at ids 0..6, the tokenizer [`Tokenizer::train`]
///   makes): a turn is `<|role|>text<|end|>`, nothing between turns;
/// - **ChatML** (`<|im_start|>`, `<|im_end|>`: SmolLM2, Qwen2 and many others): a turn is
///   `<|im_start|>role\ntext<|im_end|>`, turns separated by `\n`;
/// - **Llama 3** (`<|start_header_id|>`, `<|eot_id|>`): a turn is
///   `<|start_header_id|>role<|end_header_id|>\n\ntext<|eot_id|>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatFormat {
    /// The format's name (`sandgym`, `chatml`, `llama3`).
    pub name: &'static str,
    /// The ids that open a turn, per role (system, user, assistant, tool).
    open: [Vec<u32>; 4],
    /// The id that closes a turn.
    end: u32,
    /// The ids between two turns.
    separator: Vec<u32>,
    /// End of text.
    eos: u32,
}

impl ChatFormat {
    fn index(role: Role) -> usize {
        match role {
            Role::System => 0,
            Role::User => 1,
            Role::Assistant => 2,
            Role::Tool => 3,
        }
    }

    fn detect(inner: &HfTokenizer) -> Result<Self> {
        let id = |t: &str| inner.token_to_id(t);
        let encode = |text: &str| -> Result<Vec<u32>> {
            Ok(inner.encode(text, false).map_err(err)?.get_ids().to_vec())
        };
        if SPECIAL_TOKENS
            .iter()
            .enumerate()
            .all(|(i, t)| id(t) == Some(i as u32))
        {
            return Ok(Self {
                name: "sandgym",
                open: [vec![1], vec![2], vec![3], vec![4]],
                end: 5,
                separator: Vec::new(),
                eos: 0,
            });
        }
        if let (Some(start), Some(end)) = (id("<|im_start|>"), id("<|im_end|>")) {
            let open = |role: &str| -> Result<Vec<u32>> {
                let mut ids = vec![start];
                ids.extend(encode(&format!("{role}\n"))?);
                Ok(ids)
            };
            return Ok(Self {
                name: "chatml",
                open: [
                    open("system")?,
                    open("user")?,
                    open("assistant")?,
                    open("tool")?,
                ],
                end,
                separator: encode("\n")?,
                eos: id("<|endoftext|>").unwrap_or(end),
            });
        }
        if let (Some(start), Some(head_end), Some(end)) = (
            id("<|start_header_id|>"),
            id("<|end_header_id|>"),
            id("<|eot_id|>"),
        ) {
            let open = |role: &str| -> Result<Vec<u32>> {
                let mut ids = vec![start];
                ids.extend(encode(role)?);
                ids.push(head_end);
                ids.extend(encode("\n\n")?);
                Ok(ids)
            };
            return Ok(Self {
                name: "llama3",
                open: [
                    open("system")?,
                    open("user")?,
                    open("assistant")?,
                    open("ipython")?,
                ],
                end,
                separator: Vec::new(),
                eos: id("<|end_of_text|>").unwrap_or(end),
            });
        }
        Err(PolicyError::Tokenizer(
            "unknown chat format: the tokenizer has neither sandgym's role tokens (<|system|> … \
             <|end|> at ids 0..6), ChatML's <|im_start|>/<|im_end|> nor Llama 3's \
             <|start_header_id|>/<|eot_id|>"
                .into(),
        ))
    }

    /// The ids that open a turn of `role`.
    pub fn open(&self, role: Role) -> &[u32] {
        &self.open[Self::index(role)]
    }

    /// The ids placed between two turns.
    pub fn separator(&self) -> &[u32] {
        &self.separator
    }

    /// The roles whose opening starts at `ids[at..]`, if one does.
    pub fn role_at(&self, ids: &[u32], at: usize) -> Option<Role> {
        [Role::System, Role::User, Role::Assistant, Role::Tool]
            .into_iter()
            .find(|&r| ids[at.min(ids.len())..].starts_with(self.open(r)))
    }
}

/// A byte-level BPE tokenizer in HF `tokenizer.json` form with the [`ChatFormat`] of its model:
/// either sandgym's own (trained on the envs' text, so the wider ecosystem can read it) or a
/// pretrained model's.
///
/// ```
/// use sandgym_policy::Tokenizer;
/// let corpus = ["SELECT name FROM products", "{\"tool_name\": \"run_sql\"}"];
/// let tok = Tokenizer::train(corpus.iter().map(|s| s.to_string()), 300)?;
/// let ids = tok.encode("SELECT name FROM products")?;
/// assert_eq!(tok.decode(&ids)?, "SELECT name FROM products");
/// assert_eq!(tok.format().name, "sandgym");
/// # Ok::<(), sandgym_policy::PolicyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: HfTokenizer,
    json: String,
    format: ChatFormat,
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

    /// Loads from `tokenizer.json` text; the chat format is detected from its special tokens
    /// (see [`ChatFormat`]).
    pub fn from_json(json: &str) -> Result<Self> {
        // The tokenizers crate panics on some malformed files (an `unwrap` in its decoder
        // deserialisation, found by fuzzing); a bad file is an error here, not a crash.
        let inner: HfTokenizer = std::panic::catch_unwind(|| json.parse::<HfTokenizer>())
            .map_err(|_| {
                PolicyError::Tokenizer("tokenizer.json is malformed (its parser gave up)".into())
            })?
            .map_err(err)?;
        let format = ChatFormat::detect(&inner)?;
        Ok(Self {
            inner,
            json: json.to_owned(),
            format,
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

    /// The chat format.
    pub fn format(&self) -> &ChatFormat {
        &self.format
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

    /// The id of a token, if the vocabulary has it.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The ids that open a turn of `role`.
    pub fn role(&self, role: Role) -> &[u32] {
        self.format.open(role)
    }

    /// The end-of-turn id (generation stops at it).
    pub fn end(&self) -> u32 {
        self.format.end
    }

    /// The end-of-text id.
    pub fn eos(&self) -> u32 {
        self.format.eos
    }
}
