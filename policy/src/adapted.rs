//! A decoder with LoRA adapters ([`crate::lora`]): adding them, freezing the base, the state a
//! LoRA checkpoint stores, and merging them back into plain weights.

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::lora::{Adapter, BlockAdapters, LoraConfig, LoraState, LoraTarget};
use crate::model::PolicyModel;

/// Sets every parameter's `require_grad` to `train`.
struct RequireGrad(bool);

impl<B: Backend> burn::module::ModuleMapper<B> for RequireGrad {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.set_require_grad(self.0)
    }
}

impl<B: Backend> PolicyModel<B> {
    /// Whether the model carries adapters.
    pub fn has_lora(&self) -> bool {
        self.blocks.iter().any(|b| b.adapters.is_some())
    }

    /// Adds fresh adapters (see the module docs) and freezes everything else but the value
    /// head. Replaces adapters the model had.
    pub fn with_lora(mut self, config: &LoraConfig, device: &B::Device) -> Self {
        for block in &mut self.blocks {
            let shape = |lin: &burn::nn::Linear<B>| {
                let [i, o] = lin.weight.val().dims();
                (i, o)
            };
            let sizes = [
                shape(&block.wq),
                shape(&block.wk),
                shape(&block.wv),
                shape(&block.wo),
                shape(&block.w1),
                shape(&block.w3),
                shape(&block.w2),
            ];
            let slots = LoraTarget::ALL
                .iter()
                .map(|t| {
                    config.targets.contains(t).then(|| {
                        let (i, o) = sizes[t.index()];
                        Adapter::new(i, o, config, device)
                    })
                })
                .collect();
            block.adapters = Some(BlockAdapters { slots });
        }
        self.freeze_base()
    }

    /// Marks the base weights (everything but adapters and the value head) as not trainable;
    /// a model without adapters is returned unchanged.
    pub fn freeze_base(mut self) -> Self {
        if !self.has_lora() {
            return self;
        }
        self.embed = self.embed.map(&mut RequireGrad(false));
        self.norm = self.norm.map(&mut RequireGrad(false));
        self.lm_head = self.lm_head.map(|h| h.map(&mut RequireGrad(false)));
        for block in &mut self.blocks {
            let adapters = block.adapters.take();
            *block = block.clone().map(&mut RequireGrad(false));
            block.adapters = adapters.map(|a| a.map(&mut RequireGrad(true)));
        }
        self
    }

    /// The adapters and value head (what a LoRA checkpoint stores), if the model has adapters.
    pub fn lora_state(&self) -> Option<LoraState<B>> {
        let blocks = self
            .blocks
            .iter()
            .map(|b| b.adapters.clone())
            .collect::<Option<Vec<_>>>()?;
        Some(LoraState {
            blocks,
            value_head: self.value_head.clone(),
        })
    }

    /// Puts saved adapters and value head in place (the base must be the one they were
    /// trained on) and freezes the base.
    pub fn with_lora_state(mut self, state: LoraState<B>) -> Self {
        for (block, adapters) in self.blocks.iter_mut().zip(state.blocks) {
            block.adapters = Some(adapters);
        }
        self.value_head = state.value_head;
        self.freeze_base()
    }

    /// The model to sample from: a model with adapters merged into plain weights (the same
    /// function; each adapted projection costs one product instead of three, which tripled a
    /// decoding step's time), any other unchanged.
    pub fn for_inference(self) -> Self {
        if self.has_lora() {
            self.merge_lora()
        } else {
            self
        }
    }

    /// Folds the adapters into the projection weights: the same function, no adapters, every
    /// parameter trainable again.
    pub fn merge_lora(mut self) -> Self {
        for block in &mut self.blocks {
            let Some(adapters) = block.adapters.take() else {
                continue;
            };
            let lins = [
                &mut block.wq,
                &mut block.wk,
                &mut block.wv,
                &mut block.wo,
                &mut block.w1,
                &mut block.w3,
                &mut block.w2,
            ];
            for (target, lin) in LoraTarget::ALL.iter().zip(lins) {
                if let Some(a) = adapters.get(*target) {
                    let merged =
                        crate::fused::add_low_rank(lin.weight.val(), a.a.val(), a.b.val(), a.scale);
                    lin.weight = Param::from_tensor(merged);
                }
            }
        }
        self.map(&mut RequireGrad(true))
    }
}
