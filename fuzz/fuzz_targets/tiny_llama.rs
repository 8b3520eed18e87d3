//! The tiny Llama of the policy crate's parity fixtures, shared by the fuzz targets that need a
//! whole model (included with `#[path]`; not a target itself).

use std::path::Path;

/// The tiny Llama fixture, as a Hugging Face directory.
pub const FIXTURE: [(&str, &[u8]); 5] = [
    (
        "config.json",
        include_bytes!("../../policy/tests/fixtures/tiny-llama/config.json"),
    ),
    (
        "model.safetensors",
        include_bytes!("../../policy/tests/fixtures/tiny-llama/model.safetensors"),
    ),
    (
        "tokenizer.json",
        include_bytes!("../../policy/tests/fixtures/tiny-llama/tokenizer.json"),
    ),
    (
        "tokenizer_config.json",
        include_bytes!("../../policy/tests/fixtures/tiny-llama/tokenizer_config.json"),
    ),
    (
        "chat_template.jinja",
        include_bytes!("../../policy/tests/fixtures/tiny-llama/chat_template.jinja"),
    ),
];

/// Writes the fixture into `dir` as a Hugging Face directory.
pub fn write_hf(dir: &Path) {
    std::fs::create_dir_all(dir).expect("a temporary directory");
    for (name, bytes) in FIXTURE {
        std::fs::write(dir.join(name), bytes).expect("the fixture written");
    }
}
