//! LoRA: an adapted model starts at its base, only adapters (and the value head) train,
//! merging keeps the function, and checkpoints hold the adapters and the base's identity.

use std::path::{Path, PathBuf};

use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Distribution, Tensor};
use sandgym_policy::pretrained::Pretrained;
use sandgym_policy::{Cpu, CpuTrain, LoraConfig, LoraTarget, PolicyModel, checkpoint, load};

fn tiny_llama<B: burn::tensor::backend::Backend>() -> Pretrained<B> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-llama");
    load::model::<B>(dir.to_str().unwrap(), &Default::default()).unwrap()
}

fn logits(model: &PolicyModel<Cpu>) -> Vec<f32> {
    model
        .logits_of(&[1, 20, 33, 47, 5, 9])
        .into_data()
        .to_vec()
        .unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Gives every adapter's `B` random values, so the adapters change the function.
fn perturb(model: PolicyModel<Cpu>) -> PolicyModel<Cpu> {
    let device = Default::default();
    let mut state = model.lora_state().unwrap();
    for block in &mut state.blocks {
        for slot in block.slots.iter_mut().flatten() {
            let dims = slot.b.val().dims();
            slot.b = Param::from_tensor(Tensor::random(
                dims,
                Distribution::Normal(0.0, 0.05),
                &device,
            ));
        }
    }
    model.with_lora_state(state)
}

#[test]
fn adapters_start_at_the_base_and_merge_into_the_same_function() {
    let base = tiny_llama::<Cpu>();
    let before = logits(&base.model);
    let config = LoraConfig {
        rank: 4,
        alpha: 8.0,
        targets: vec![LoraTarget::Q, LoraTarget::V, LoraTarget::Down],
    };
    let adapted = base.model.with_lora(&config, &Default::default());
    assert!(adapted.has_lora());
    assert!(
        max_diff(&logits(&adapted), &before) < 1e-6,
        "B = 0: no change"
    );
    let adapted = perturb(adapted);
    let changed = logits(&adapted);
    assert!(
        max_diff(&changed, &before) > 1e-3,
        "the adapters change the function"
    );
    let merged = adapted.merge_lora();
    assert!(!merged.has_lora());
    assert!(max_diff(&logits(&merged), &changed) < 1e-4);
}

#[test]
fn only_adapters_receive_gradients() {
    let base = tiny_llama::<CpuTrain>();
    let layers = base.config.n_layers;
    let config = LoraConfig::default();
    let adapted = base.model.with_lora(&config, &Default::default());
    let loss = adapted.logits_of(&[1, 20, 33, 47]).sum();
    let grads = GradientsParams::from_grads(loss.backward(), &adapted);
    // Without adapters, every parameter of the language model gets one: per layer two norms
    // and seven projections, then the embedding, the final norm and the output projection.
    let full = tiny_llama::<CpuTrain>().model;
    let loss = full.logits_of(&[1, 20, 33, 47]).sum();
    let all = GradientsParams::from_grads(loss.backward(), &full);
    assert_eq!(all.len(), 9 * layers + 3);
    // With them, exactly A and B of every targeted projection of every layer: none of the
    // frozen base (that would add the 9 * layers + 3 above).
    assert_eq!(grads.len(), 2 * LoraTarget::ALL.len() * layers);
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sandgym-lora-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn lora_checkpoints_hold_adapters_and_the_base_identity() {
    let base = tiny_llama::<Cpu>();
    let lora = LoraConfig::default();
    let config = base
        .config
        .clone()
        .with_lora(Some(lora.clone()))
        .with_base(Some(base.info.clone()));
    let model = perturb(base.model.with_lora(&lora, &Default::default()));
    let want = logits(&model);
    let dir = tempdir("save");
    checkpoint::save(&dir, &config, &model, &base.tokenizer).unwrap();
    assert!(dir.join("adapters.mpk").is_file());
    assert!(
        !dir.join("model.mpk").exists(),
        "the base weights are not copied"
    );
    let (back_config, back, _) = load::checkpoint::<Cpu>(&dir, &Default::default()).unwrap();
    assert_eq!(back_config, config);
    assert!(back.has_lora());
    assert!(max_diff(&logits(&back), &want) < 1e-6);

    // A base whose digest changed is refused.
    let mut wrong = config.clone();
    wrong.base.as_mut().unwrap().sha256 = "0".repeat(64);
    let dir2 = tempdir("wrong-base");
    checkpoint::save(&dir2, &wrong, &model, &base.tokenizer).unwrap();
    let err = load::checkpoint::<Cpu>(&dir2, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("SHA-256"), "{err}");
    // Over a base already in memory (a server swapping versions): the same model, the base
    // read once; another base, or a checkpoint without adapters, is refused.
    let kept = tiny_llama::<Cpu>();
    let (onto_config, onto, _) =
        checkpoint::load_onto::<Cpu>(&dir, &kept.model, &kept.info, &Default::default()).unwrap();
    assert_eq!(onto_config, config);
    assert!(max_diff(&logits(&onto), &want) < 1e-6);
    let err = checkpoint::load_onto::<Cpu>(&dir2, &kept.model, &kept.info, &Default::default())
        .unwrap_err();
    assert!(err.to_string().contains("SHA-256"), "{err}");
    let plain = tempdir("plain");
    checkpoint::save(&plain, &base.config, &kept.model, &base.tokenizer).unwrap();
    let err = checkpoint::load_onto::<Cpu>(&plain, &kept.model, &kept.info, &Default::default())
        .unwrap_err();
    assert!(err.to_string().contains("not a LoRA checkpoint"), "{err}");
    let _ = std::fs::remove_dir_all(&plain);
    // Truncated adapters are an error, not a panic.
    let f = dir.join("adapters.mpk");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    assert!(load::checkpoint::<Cpu>(&dir, &Default::default()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
    let _ = model.num_params();
}
