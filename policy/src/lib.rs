//! The sandgym policy: tokenizer, chat template, tool-call constraint, and a Llama-style
//! decoder in burn with KV-cached batched sampling and checkpoints.
//!
//! A [`Tokenizer`] (byte-level BPE, HF `tokenizer.json`) is trained on the envs' own text.
//! The [`Template`] renders an Agent Template history as token ids with a loss mask in which
//! only the policy's action tokens are trainable. A [`ToolCallGrammar`] built from the env's
//! [`ToolSpec`](sandgym_env_api::ToolSpec)s (with llguidance) masks, token by token, everything
//! that would not be a valid action, so a sampled action always parses and validates.
//!
//! # Which log-probs train
//! Sampling under the constraint draws from the model's distribution restricted to the allowed
//! tokens and renormalised. The log-prob recorded for each sampled token is the log-prob
//! under that masked distribution, i.e. the distribution actually sampled from, and the trainer
//! recomputes it the same way (same mask) for importance ratios; forced tokens (a single allowed
//! token) have log-prob 0 and no gradient. The unconstrained log-prob is never used, so the
//! ratio in PPO-style objectives compares like with like.
#![deny(missing_docs)]

mod adapted;
mod attention;
pub mod blas;
mod cache;
pub mod checkpoint;
mod constraint;
mod decoder;
mod device;
mod episode;
mod error;
mod fetch;
pub mod fused;
pub mod load;
mod lora;
mod loss;
mod model;
mod model_info;
mod packing;
mod prefill;
mod prefix_cache;
pub mod pretrained;
mod sample;
mod template;
mod token_mask;
mod tokenizer;
mod vexp;

pub use attention::{attention_bias, causal_bias};
pub use cache::{KvCache, LayerCache, SeqCache, constant_cache};
pub use constraint::{
    ActionLimits, ToolCallGrammar, ToolCallMatcher, lark_grammar, lark_grammar_calling,
    lark_grammar_for,
};
pub use decoder::{Decoder, Done, RowRequest};
pub use device::{Cpu, CpuTrain, DeviceKind, OnDevice, select_device};
#[cfg(feature = "cuda")]
pub use device::{Gpu, GpuTrain};
pub use episode::{Episode, Turn};
pub use error::{PolicyError, Result};
pub use lora::{Adapter, BlockAdapters, LoraConfig, LoraState, LoraTarget};
pub use loss::{masked_mean, token_logprobs};
pub use model::{Block, Output, PolicyConfig, PolicyModel, RowOutput};
pub use packing::Packing;
pub use prefill::{PREFILL_SCORES, Prefill, prefill, prefill_continuing, prefill_within};
pub use prefix_cache::{MIN_REUSED, PrefixCache, PrefixStats};
pub use sample::{
    RowControl, SampleConfig, Sampled, generate, generate_continuing, generate_continuing_last,
    generate_with, masked_log_softmax, replay_masks, sequence_logprobs,
};
pub use template::{Rendered, Template, canonical_json, tool_list};
pub use token_mask::TokenMask;
pub use tokenizer::{ChatFormat, Role, SPECIAL_TOKENS, Tokenizer};
