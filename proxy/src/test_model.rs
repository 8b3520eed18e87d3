//! A tiny policy and tokenizer for this crate's unit tests.

use sandgym_policy::{PolicyConfig, Tokenizer};

/// A 300-token tokenizer and a one-layer model config over it, quick to build and run.
pub(crate) fn tiny() -> (PolicyConfig, Tokenizer) {
    let corpus = ["{\"response\":\"hi\"}", "You answer questions."];
    let tokenizer =
        Tokenizer::train(corpus.iter().map(|s| s.to_string()).cycle().take(20), 300).unwrap();
    let config = PolicyConfig::new(tokenizer.vocab_size())
        .with_d_model(16)
        .with_n_layers(1)
        .with_n_heads(2)
        .with_n_kv_heads(1)
        .with_d_ff(32);
    (config, tokenizer)
}
