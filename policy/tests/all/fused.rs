//! The fused CPU kernels against burn's own composition of the same functions: values and
//! gradients, in training (autodiff) and inference, including rows that are masked down to
//! one token and tensors handed over as non-contiguous views.

use burn::module::Param;
use burn::nn::{RmsNorm, RmsNormConfig};
use burn::tensor::activation::{log_softmax, silu, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor, TensorData};
use sandgym_policy::fused::{log_softmax_last, rms_norm, softmax_last, swap_12, swiglu};
use sandgym_policy::{Cpu, CpuTrain};

type T = CpuTrain;

fn dev() -> burn::backend::flex::FlexDevice {
    Default::default()
}

fn close<const D: usize, B: Backend>(a: Tensor<B, D>, b: Tensor<B, D>, tol: f32, what: &str) {
    let a: Vec<f32> = a.into_data().to_vec().unwrap();
    let b: Vec<f32> = b.into_data().to_vec().unwrap();
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "{what}[{i}]: fused {x} vs composed {y} (scale {scale})"
        );
    }
}

fn random<const D: usize>(shape: [usize; D], scale: f64) -> Tensor<T, D> {
    Tensor::<T, D>::random(shape, Distribution::Normal(0.0, scale), &dev())
}

/// `f_fused` and `f_ref` on the same inputs: equal outputs, and equal input gradients of a
/// random linear function of the output.
fn check_grads<const D: usize, const N: usize>(
    inputs: [Tensor<T, D>; N],
    fused: impl Fn(&[Tensor<T, D>]) -> Tensor<T, D>,
    reference: impl Fn(&[Tensor<T, D>]) -> Tensor<T, D>,
    what: &str,
) {
    let run = |f: &dyn Fn(&[Tensor<T, D>]) -> Tensor<T, D>| {
        let xs: Vec<Tensor<T, D>> = inputs
            .iter()
            .map(|x| x.clone().detach().require_grad())
            .collect();
        let y = f(&xs);
        let w = Tensor::<T, D>::from_data(
            TensorData::new(
                (0..y.shape().num_elements())
                    .map(|i| ((i * 7919 % 101) as f32 / 50.0) - 1.0)
                    .collect::<Vec<f32>>(),
                y.shape(),
            ),
            &dev(),
        );
        let grads = (y.clone() * w).sum().backward();
        let gs: Vec<_> = xs
            .iter()
            .map(|x| x.grad(&grads).expect("a gradient"))
            .collect();
        (y.inner(), gs)
    };
    let (yf, gf) = run(&fused);
    let (yr, gr) = run(&reference);
    close(yf, yr, 1e-5, &format!("{what} value"));
    for (i, (a, b)) in gf.into_iter().zip(gr).enumerate() {
        close(a, b, 1e-4, &format!("{what} gradient of input {i}"));
    }
}

#[test]
fn softmax_matches_burn_in_value_and_gradient() {
    let x = random([2, 3, 5, 17], 3.0);
    check_grads(
        [x],
        |x| softmax_last(x[0].clone()),
        |x| softmax(x[0].clone(), 3),
        "softmax",
    );
    // A transposed (non-contiguous) view, and rows with -inf bias except one entry.
    let x = random([4, 9], 2.0).transpose();
    let mask: Vec<f32> = (0..36)
        .map(|i| if i % 4 == 0 { 0.0 } else { -1e9 })
        .collect();
    let bias = Tensor::<T, 2>::from_data(TensorData::new(mask, [9, 4]), &dev());
    check_grads(
        [x],
        |x| softmax_last(x[0].clone() + bias.clone()),
        |x| softmax(x[0].clone() + bias.clone(), 1),
        "masked softmax",
    );
}

#[test]
fn prefix_views_of_larger_buffers_are_read_as_their_own_elements() {
    // `narrow` at offset 0 keeps the whole buffer under a contiguous layout.
    let x = random([6, 10], 2.0);
    check_grads(
        [x],
        |x| softmax_last(x[0].clone().narrow(0, 0, 2)),
        |x| softmax(x[0].clone().narrow(0, 0, 2), 1),
        "softmax of a prefix",
    );
    let norm: RmsNorm<T> = RmsNormConfig::new(10).init(&dev());
    let x = random([6, 10], 2.0);
    check_grads(
        [x],
        |x| rms_norm(&norm, x[0].clone().narrow(0, 0, 3)),
        |x| norm.forward(x[0].clone().narrow(0, 0, 3)),
        "rms_norm of a prefix",
    );
}

#[test]
fn log_softmax_matches_burn_in_value_and_gradient() {
    let x = random([3, 7, 300], 4.0);
    check_grads(
        [x],
        |x| log_softmax_last(x[0].clone()),
        |x| log_softmax(x[0].clone(), 2),
        "log-softmax",
    );
    let x = random([5, 11], 1.0).transpose();
    check_grads(
        [x],
        |x| log_softmax_last(x[0].clone()),
        |x| log_softmax(x[0].clone(), 1),
        "log-softmax of a view",
    );
}

#[test]
fn swiglu_matches_burn_in_value_and_gradient() {
    let a = random([2, 6, 40], 4.0);
    let b = random([2, 6, 40], 1.0);
    check_grads(
        [a, b],
        |x| swiglu(x[0].clone(), x[1].clone()),
        |x| silu(x[0].clone()) * x[1].clone(),
        "swiglu",
    );
}

#[test]
fn rms_norm_matches_burn_in_value_and_gradients() {
    let norm: RmsNorm<T> = RmsNormConfig::new(24).with_epsilon(1e-5).init(&dev());
    let norm = RmsNorm {
        gamma: Param::from_tensor(random([24], 1.0)),
        ..norm
    };
    let x = random([3, 5, 24], 2.0);
    check_grads(
        [x.clone()],
        |x| rms_norm(&norm, x[0].clone()),
        |x| norm.forward(x[0].clone()),
        "rms_norm",
    );
    // The weight's gradient too (training every weight, not only adapters).
    let g = |fused: bool| {
        let x = x.clone().detach();
        let y = if fused {
            rms_norm(&norm, x)
        } else {
            norm.forward(x)
        };
        let grads = (y.clone() * y).sum().backward();
        norm.gamma.val().grad(&grads).expect("gamma's gradient")
    };
    close(g(true), g(false), 1e-4, "rms_norm weight gradient");
}

#[test]
fn inference_kernels_match_burn() {
    let d = Default::default();
    let x = Tensor::<Cpu, 3>::random([2, 4, 33], Distribution::Normal(0.0, 3.0), &d);
    let y = Tensor::<Cpu, 3>::random([2, 4, 33], Distribution::Normal(0.0, 1.0), &d);
    close(
        softmax_last(x.clone()),
        softmax(x.clone(), 2),
        1e-5,
        "softmax",
    );
    close(
        log_softmax_last(x.clone()),
        log_softmax(x.clone(), 2),
        1e-5,
        "log-softmax",
    );
    close(
        swiglu(x.clone(), y.clone()),
        silu(x.clone()) * y,
        1e-5,
        "swiglu",
    );
    let norm: RmsNorm<Cpu> = RmsNormConfig::new(33).init(&d);
    close(
        rms_norm(&norm, x.clone()),
        norm.forward(x),
        1e-5,
        "rms_norm",
    );
}

#[test]
fn swap_12_matches_burn_in_value_and_gradient() {
    let x = random([2, 3, 5, 4], 1.0);
    check_grads(
        [x],
        |x| swap_12(x[0].clone()),
        |x| x[0].clone().swap_dims(1, 2),
        "swap_12",
    );
    // A view that is not contiguous already.
    let x = random([2, 4, 3, 5], 1.0).swap_dims(2, 3);
    check_grads(
        [x],
        |x| swap_12(x[0].clone()),
        |x| x[0].clone().swap_dims(1, 2),
        "swap_12 of a view",
    );
    let d = Default::default();
    let y = Tensor::<Cpu, 4>::random([3, 2, 4, 6], Distribution::Default, &d);
    close(
        swap_12(y.clone()),
        y.swap_dims(1, 2),
        0.0,
        "swap_12 (inference)",
    );
}
