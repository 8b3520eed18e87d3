//! Norms of what an update does, to see whether RL moves the policy at all: the gradient's
//! global L2 norm before clipping, and the L2 size of the change of the trainable weights
//! (next to their own norm) over an iteration. Only trainable parameters count (with LoRA,
//! the adapters; the frozen base weights never change).

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor};

/// The trainable weights of a module, each flattened (cheap: tensors share their storage).
pub(crate) struct Trainable<B: AutodiffBackend>(Vec<Tensor<B::InnerBackend, 1>>);

impl<B: AutodiffBackend> ModuleVisitor<B> for Trainable<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if param.is_require_grad() {
            let t = param.val().inner();
            let n = t.shape().num_elements();
            self.0.push(t.reshape([n]));
        }
    }
}

impl<B: AutodiffBackend> Trainable<B> {
    /// The trainable weights of `module` now.
    pub(crate) fn of<M: Module<B>>(module: &M) -> Self {
        let mut t = Self(Vec::new());
        module.visit(&mut t);
        t
    }

    /// The L2 norm of all of them together.
    pub(crate) fn norm(&self) -> f64 {
        self.0
            .iter()
            .map(|t| sum_f64(t.clone().powi_scalar(2)))
            .sum::<f64>()
            .sqrt()
    }

    /// The L2 norm of `later - self` (the same module after an update; 0 if its set of
    /// trainable weights changed shape).
    pub(crate) fn distance(&self, later: &Self) -> f64 {
        if self.0.len() != later.0.len() {
            return 0.0;
        }
        self.0
            .iter()
            .zip(&later.0)
            .filter(|(a, b)| a.dims() == b.dims())
            .map(|(a, b)| sum_f64((b.clone() - a.clone()).powi_scalar(2)))
            .sum::<f64>()
            .sqrt()
    }
}

/// The global L2 norm of the gradients in `grads` of `module`'s trainable parameters.
pub(crate) fn grad_norm<B: AutodiffBackend, M: Module<B>>(
    module: &M,
    grads: &GradientsParams,
) -> f64 {
    struct Squares<'g> {
        grads: &'g GradientsParams,
        sum: f64,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Squares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                self.sum += sum_f64(g.powi_scalar(2));
            }
        }
    }
    let mut v = Squares { grads, sum: 0.0 };
    module.visit(&mut v);
    v.sum.sqrt()
}

fn sum_f64<B: Backend, const D: usize>(t: Tensor<B, D>) -> f64 {
    t.sum().into_scalar().elem::<f64>()
}
