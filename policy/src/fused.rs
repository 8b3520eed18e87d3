//! Fused row kernels for the CPU backend: softmax, log-softmax, RMSNorm and SwiGLU, each one
//! pass over its rows forward and one backward, parallel over rows.
//!
//! burn's autodiff backend composes these functions from elementwise primitives: a softmax is
//! `max_dim`, `sub`, `exp`, `sum_dim` and `div`, each with its own backward node, and `exp`'s
//! backward computes the exponential a second time. On burn-flex every one of those
//! primitives is a separate pass over memory, the broadcasting ones element by element, and
//! they run on one thread while the GEMM threads wait (measured with `perf` on
//! SmolLM2-135M's forward+backward: `exp`, strided copies and broadcasts were most of the
//! time outside the GEMMs). burn offers no fused hooks for them under autodiff, so this
//! module writes them by hand: the forward and backward formulas of each function as row
//! loops over contiguous `f32` data, with a custom autodiff node
//! ([`burn::backend::autodiff::ops::Backward`], burn's documented way to extend a backend)
//! when training.
//!
//! Dispatch is by type: on [`Cpu`] (inference) and [`CpuTrain`] (training) the fused kernels
//! run; on any other backend (CUDA, where cubecl fuses elementwise work itself) the functions
//! fall back to burn's composition, so every caller stays generic over its backend. The
//! gradients are checked against burn's own composition in the tests below and in
//! `policy/tests/all/fused.rs`.

use std::any::{Any, TypeId};

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::{FlexTensor, Layout};
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Bytes, DType, Shape, Tensor, TensorPrimitive};
use rayon::prelude::*;

use crate::device::{Cpu, CpuTrain};
use crate::vexp;

/// Rows per parallel task: enough work per task to amortise rayon's dispatch on short rows.
const MIN_TASK_ELEMS: usize = 16 * 1024;

/// The backend a tensor lives on, as far as this module cares.
pub(crate) enum On<B: Backend> {
    Train(FloatTensor<CpuTrain>),
    Infer(FlexTensor),
    Other(FloatTensor<B>),
}

pub(crate) fn classify<B: Backend, const D: usize>(x: Tensor<B, D>) -> On<B> {
    let p = x.into_primitive().tensor();
    let boxed: Box<dyn Any> = Box::new(p);
    if TypeId::of::<B>() == TypeId::of::<CpuTrain>() {
        On::Train(*boxed.downcast().expect("the type was checked"))
    } else if TypeId::of::<B>() == TypeId::of::<Cpu>() {
        On::Infer(*boxed.downcast().expect("the type was checked"))
    } else {
        On::Other(*boxed.downcast().expect("a tensor of its own backend"))
    }
}

pub(crate) fn back<B: Backend, const D: usize, T: 'static>(p: T) -> Tensor<B, D> {
    let boxed: Box<dyn Any> = Box::new(p);
    let p: FloatTensor<B> = *boxed
        .downcast()
        .expect("a primitive of the backend it came from");
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

/// A CPU tensor as `f32` whose buffer is exactly its elements in row-major order (copied only
/// when it is not: a permuted view, an offset, or a prefix of a larger buffer — `storage()`
/// returns the whole buffer, whatever the layout).
pub(crate) fn contiguous(t: FlexTensor) -> FlexTensor {
    let t = if t.dtype() == DType::F32 {
        t
    } else {
        FlexTensor::from_data(t.into_data().convert::<f32>())
    };
    t.to_contiguous()
}

fn rows_of(t: &FlexTensor) -> usize {
    t.layout().shape().last().copied().unwrap_or(1).max(1)
}

fn tensor(data: Vec<f32>, shape: Shape) -> FlexTensor {
    FlexTensor::new(
        Bytes::from_elems(data),
        Layout::contiguous(shape),
        DType::F32,
    )
}

/// Rows per task for rows of `width` elements.
fn chunk_rows(width: usize) -> usize {
    MIN_TASK_ELEMS.div_ceil(width.max(1)).max(1)
}

/// `out[row] = f(in rows…, out row)` over every row, in parallel.
fn map_rows2(
    a: &[f32],
    b: &[f32],
    width: usize,
    f: impl Fn(&[f32], &[f32], &mut [f32]) + Sync,
) -> Vec<f32> {
    let mut out = vec![0.0f32; a.len()];
    let step = chunk_rows(width) * width;
    out.par_chunks_mut(step)
        .zip(a.par_chunks(step))
        .zip(b.par_chunks(step))
        .for_each(|((o, a), b)| {
            for ((o, a), b) in o
                .chunks_mut(width)
                .zip(a.chunks(width))
                .zip(b.chunks(width))
            {
                f(a, b, o);
            }
        });
    out
}

// --- softmax and log-softmax over the last dimension ---------------------------------------

/// A function of each row of the last dimension whose gradient needs only its output: one
/// autodiff node ([`RowBackward`]) and one dispatch ([`row_op`]) serve every such kernel.
trait RowKernel: std::fmt::Debug + Send + Sync + 'static {
    /// The outputs of rows of `width` values.
    fn forward(x: &[f32], width: usize) -> Vec<f32>;
    /// The input gradient from the outputs `y` and their gradient `g`.
    fn backward(y: &[f32], g: &[f32], width: usize) -> Vec<f32>;
    /// burn's composition, for the backends without a fused kernel.
    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D>;
}

#[derive(Debug)]
struct Softmax;

impl RowKernel for Softmax {
    fn forward(x: &[f32], width: usize) -> Vec<f32> {
        map_rows2(x, x, width, |x, _, y| {
            let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if m == f32::NEG_INFINITY {
                // A row that allows nothing: burn's composition gives NaN; keep it defined.
                return;
            }
            vexp::exp_shifted(x, m, y);
            let s: f32 = y.iter().sum();
            let inv = 1.0 / s;
            y.iter_mut().for_each(|y| *y *= inv);
        })
    }

    /// `dx = y * (g - sum(g * y))` per row.
    fn backward(y: &[f32], g: &[f32], width: usize) -> Vec<f32> {
        map_rows2(y, g, width, |y, g, dx| {
            let dot: f32 = y.iter().zip(g).map(|(y, g)| y * g).sum();
            for ((dx, &y), &g) in dx.iter_mut().zip(y).zip(g) {
                *dx = y * (g - dot);
            }
        })
    }

    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        burn::tensor::activation::softmax(x, D - 1)
    }
}

#[derive(Debug)]
struct LogSoftmax;

impl RowKernel for LogSoftmax {
    fn forward(x: &[f32], width: usize) -> Vec<f32> {
        map_rows2(x, x, width, |x, _, y| {
            let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // The exponentials in `y` first (one vectorised loop), then the output over them.
            vexp::exp_shifted(x, m, y);
            let s: f32 = y.iter().sum();
            let lse = m + s.ln();
            for (y, &x) in y.iter_mut().zip(x) {
                *y = x - lse;
            }
        })
    }

    /// `dx = g - exp(y) * sum(g)` per row.
    fn backward(y: &[f32], g: &[f32], width: usize) -> Vec<f32> {
        map_rows2(y, g, width, |y, g, dx| {
            let total: f32 = g.iter().sum();
            vexp::log_softmax_grad(y, g, total, dx);
        })
    }

    fn composed<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        burn::tensor::activation::log_softmax(x, D - 1)
    }
}

/// The autodiff node of a [`RowKernel`]; its state is the kernel's output.
#[derive(Debug)]
struct RowBackward<K>(std::marker::PhantomData<K>);

impl<K: RowKernel> Backward<Cpu, 1> for RowBackward<K> {
    type State = FlexTensor;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let g = contiguous(grads.consume::<Cpu>(&ops.node));
        if let Some(parent) = parent {
            let y = ops.state;
            let dx = K::backward(y.storage(), g.storage(), rows_of(&y));
            grads.register::<Cpu>(parent.id, tensor(dx, y.layout().shape().clone()));
        }
    }
}

fn row_infer<K: RowKernel>(x: FlexTensor) -> FlexTensor {
    let x = contiguous(x);
    let y = K::forward(x.storage(), rows_of(&x));
    tensor(y, x.layout().shape().clone())
}

/// `K` over the last dimension: fused on the CPU backends, burn's composition elsewhere.
fn row_op<K: RowKernel, B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    match classify(x) {
        On::Infer(x) => back(row_infer::<K>(x)),
        On::Train(x) => {
            let out = match RowBackward::<K>(std::marker::PhantomData)
                .prepare::<NoCheckpointing>([x.node.clone()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let y = row_infer::<K>(x.primitive);
                    prep.finish(y.clone(), y)
                }
                OpsKind::UnTracked(prep) => prep.finish(row_infer::<K>(x.primitive)),
            };
            back(out)
        }
        On::Other(x) => K::composed(Tensor::<B, D>::from_primitive(TensorPrimitive::Float(x))),
    }
}

/// Softmax over the last dimension (burn's `softmax(x, D - 1)`), fused on the CPU.
pub fn softmax_last<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    row_op::<Softmax, B, D>(x)
}

/// Log-softmax over the last dimension (burn's `log_softmax(x, D - 1)`), fused on the CPU.
pub fn log_softmax_last<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    row_op::<LogSoftmax, B, D>(x)
}

// --- SwiGLU: silu(a) * b ---------------------------------------------------------------------

/// `silu(a[i]) · b[i]` over every element, in parallel.
fn swiglu_rows(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; a.len()];
    out.par_chunks_mut(MIN_TASK_ELEMS)
        .zip(a.par_chunks(MIN_TASK_ELEMS))
        .zip(b.par_chunks(MIN_TASK_ELEMS))
        .for_each(|((o, a), b)| vexp::swiglu(a, b, o));
    out
}

#[derive(Debug)]
struct SwigluBackward;

impl Backward<Cpu, 2> for SwigluBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [pa, pb] = ops.parents;
        let g = contiguous(grads.consume::<Cpu>(&ops.node));
        let (a, b) = ops.state;
        let shape = a.layout().shape().clone();
        let (a, b, g) = (a.storage::<f32>(), b.storage::<f32>(), g.storage::<f32>());
        if let Some(pa) = pa {
            // d/da silu(a) = s * (1 + a * (1 - s)), s = sigmoid(a)
            let mut da = vec![0.0f32; a.len()];
            da.par_chunks_mut(MIN_TASK_ELEMS)
                .zip(a.par_chunks(MIN_TASK_ELEMS))
                .zip(
                    b.par_chunks(MIN_TASK_ELEMS)
                        .zip(g.par_chunks(MIN_TASK_ELEMS)),
                )
                .for_each(|((d, a), (b, g))| vexp::swiglu_grad_gate(a, b, g, d));
            grads.register::<Cpu>(pa.id, tensor(da, shape.clone()));
        }
        if let Some(pb) = pb {
            let db = swiglu_rows(a, g);
            grads.register::<Cpu>(pb.id, tensor(db, shape));
        }
    }
}

fn swiglu_infer(a: &FlexTensor, b: &FlexTensor) -> FlexTensor {
    tensor(
        swiglu_rows(a.storage(), b.storage()),
        a.layout().shape().clone(),
    )
}

/// `silu(a) * b`, the gated unit of a Llama MLP, fused on the CPU.
///
/// # Panics
/// When `a` and `b` differ in shape.
pub fn swiglu<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    assert_eq!(a.dims(), b.dims(), "swiglu: the two halves differ in shape");
    match (classify(a), classify(b)) {
        (On::Infer(a), On::Infer(b)) => back(swiglu_infer(&contiguous(a), &contiguous(b))),
        (On::Train(a), On::Train(b)) => {
            let out = match SwigluBackward
                .prepare::<NoCheckpointing>([a.node.clone(), b.node.clone()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let (pa, pb) = (contiguous(a.primitive), contiguous(b.primitive));
                    let y = swiglu_infer(&pa, &pb);
                    prep.finish((pa, pb), y)
                }
                OpsKind::UnTracked(prep) => {
                    let (pa, pb) = (contiguous(a.primitive), contiguous(b.primitive));
                    prep.finish(swiglu_infer(&pa, &pb))
                }
            };
            back(out)
        }
        (On::Other(a), On::Other(b)) => {
            let a = Tensor::<B, D>::from_primitive(TensorPrimitive::Float(a));
            let b = Tensor::<B, D>::from_primitive(TensorPrimitive::Float(b));
            burn::tensor::activation::silu(a) * b
        }
        _ => unreachable!("both tensors are of the same backend"),
    }
}

// --- swapping the two middle dimensions ------------------------------------------------------

/// `[a, b, c, d]` → `[a, c, b, d]`, contiguous: one `d`-element copy per `(a, b, c)`.
fn swap_12_data(x: &FlexTensor) -> FlexTensor {
    let shape = x.layout().shape().clone();
    let [b, c, d] = [shape[1], shape[2], shape[3]];
    let src = x.storage::<f32>();
    let mut out = vec![0.0f32; src.len()];
    let plane = b * c * d;
    out.par_chunks_mut(plane.max(1))
        .zip(src.par_chunks(plane.max(1)))
        .for_each(|(o, s)| {
            for j in 0..c {
                for i in 0..b {
                    let from = (i * c + j) * d;
                    let to = (j * b + i) * d;
                    o[to..to + d].copy_from_slice(&s[from..from + d]);
                }
            }
        });
    tensor(out, Shape::new([shape[0], shape[2], shape[1], shape[3]]))
}

#[derive(Debug)]
struct Swap12Backward;

impl Backward<Cpu, 1> for Swap12Backward {
    type State = ();

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let g = contiguous(grads.consume::<Cpu>(&ops.node));
        if let Some(parent) = parent {
            grads.register::<Cpu>(parent.id, swap_12_data(&g));
        }
    }
}

/// `x.swap_dims(1, 2)` materialised contiguously, so that the reshapes after it (merging
/// heads, or heads with positions) are free: burn-flex copies a permuted view element by
/// element through its strided iterator, this copies whole innermost rows.
pub fn swap_12<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    match classify(x) {
        On::Infer(x) => back(swap_12_data(&contiguous(x))),
        On::Train(x) => {
            let out = match Swap12Backward
                .prepare::<NoCheckpointing>([x.node.clone()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => prep.finish((), swap_12_data(&contiguous(x.primitive))),
                OpsKind::UnTracked(prep) => prep.finish(swap_12_data(&contiguous(x.primitive))),
            };
            back(out)
        }
        On::Other(x) => Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(x)).swap_dims(1, 2),
    }
}

// --- matrix products through OpenBLAS --------------------------------------------------------

#[derive(Debug)]
struct MatmulBackward;

impl Backward<Cpu, 2> for MatmulBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [pa, pb] = ops.parents;
        let g = grads.consume::<Cpu>(&ops.node);
        let (a, b) = ops.state;
        let blas = crate::blas::get().expect("the node was made with a BLAS");
        let [da, db] = blas.matmul_grads(&a, &b, &g, [pa.is_some(), pb.is_some()]);
        if let (Some(p), Some(d)) = (pa, da) {
            grads.register::<Cpu>(p.id, d);
        }
        if let (Some(p), Some(d)) = (pb, db) {
            grads.register::<Cpu>(p.id, d);
        }
    }
}

/// `a · b` for `[m, k]` and `[k, n]` matrices: on the CPU through OpenBLAS's SGEMM when one
/// is loaded ([`crate::blas`]; row-major and transposed views are read in place), else
/// burn's `matmul`.
pub fn matmul<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>) -> Tensor<B, 2> {
    let Some(blas) = crate::blas::get() else {
        return a.matmul(b);
    };
    assert_eq!(
        a.dims()[1],
        b.dims()[0],
        "matmul: [m, k] x [k, n] expected, got {:?} x {:?}",
        a.dims(),
        b.dims()
    );
    match (classify(a), classify(b)) {
        (On::Infer(a), On::Infer(b)) => back(blas.matmul(&a, &b)),
        (On::Train(a), On::Train(b)) => {
            let out = match MatmulBackward
                .prepare::<NoCheckpointing>([a.node.clone(), b.node.clone()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let y = blas.matmul(&a.primitive, &b.primitive);
                    prep.finish((a.primitive, b.primitive), y)
                }
                OpsKind::UnTracked(prep) => prep.finish(blas.matmul(&a.primitive, &b.primitive)),
            };
            back(out)
        }
        (On::Other(a), On::Other(b)) => Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(a))
            .matmul(Tensor::from_primitive(TensorPrimitive::Float(b))),
        _ => unreachable!("both tensors are of the same backend"),
    }
}

/// `w + scale · a · b`: a low-rank update folded into a weight (a LoRA adapter's `A`, `B`
/// and `alpha / r`). Without gradient tracking and with a BLAS, one product accumulates into
/// a copy of `w` ([`crate::blas`]); otherwise burn's product, scaling and sum.
///
/// # Shapes
/// - `w`: `[m, n]`, `a`: `[m, r]`, `b`: `[r, n]`; returns `[m, n]`
pub fn add_low_rank<B: Backend>(
    w: Tensor<B, 2>,
    a: Tensor<B, 2>,
    b: Tensor<B, 2>,
    scale: f64,
) -> Tensor<B, 2> {
    let blas = crate::blas::get().filter(|_| TypeId::of::<B>() == TypeId::of::<Cpu>());
    let Some(blas) = blas else {
        return w + a.matmul(b).mul_scalar(scale);
    };
    let [m, n] = w.dims();
    assert!(
        a.dims() == [m, a.dims()[1]] && b.dims() == [a.dims()[1], n],
        "add_low_rank: [m, n] + [m, r] x [r, n] expected, got {:?} + {:?} x {:?}",
        w.dims(),
        a.dims(),
        b.dims()
    );
    match (classify(w), classify(a), classify(b)) {
        (On::Infer(w), On::Infer(a), On::Infer(b)) => {
            back(blas.add_product(w, &a, &b, scale as f32))
        }
        _ => unreachable!("the backend was checked to be the CPU one"),
    }
}

/// burn's `Linear::forward` on `[rows, d_in]` rows, its product through [`matmul`].
pub fn linear<B: Backend>(lin: &burn::nn::Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let y = matmul(x, lin.weight.val());
    match &lin.bias {
        Some(bias) => y + bias.val().unsqueeze(),
        None => y,
    }
}

// --- RMSNorm ---------------------------------------------------------------------------------

/// Per row: `y = x * r * w` with `r = 1 / sqrt(mean(x^2) + eps)`; returns `y` and `r`.
///
/// # Panics
/// When `x` is not made of rows as long as `w` (burn's broadcast would panic too).
fn rms_rows(x: &[f32], w: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>) {
    let width = w.len().max(1);
    assert_eq!(x.len() % width, 0, "rms_norm: rows of {width} expected");
    let rows = x.len() / width;
    let mut r = vec![0.0f32; rows];
    let mut y = vec![0.0f32; x.len()];
    let per = chunk_rows(width);
    y.par_chunks_mut(per * width)
        .zip(r.par_chunks_mut(per))
        .zip(x.par_chunks(per * width))
        .for_each(|((y, r), x)| {
            for ((y, r), x) in y.chunks_mut(width).zip(r.iter_mut()).zip(x.chunks(width)) {
                let ms = x.iter().map(|v| v * v).sum::<f32>() / width as f32;
                *r = 1.0 / (ms + eps).sqrt();
                for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
                    *y = x * *r * w;
                }
            }
        });
    (y, r)
}

#[derive(Debug, Clone)]
struct RmsState {
    x: FlexTensor,
    w: FlexTensor,
    r: Vec<f32>,
}

#[derive(Debug)]
struct RmsBackward;

impl Backward<Cpu, 2> for RmsBackward {
    type State = RmsState;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pw] = ops.parents;
        let g = contiguous(grads.consume::<Cpu>(&ops.node));
        let RmsState { x: xt, w: wt, r } = ops.state;
        let (x, w, g) = (xt.storage::<f32>(), wt.storage::<f32>(), g.storage::<f32>());
        let width = w.len().max(1);
        let per = chunk_rows(width);
        if let Some(px) = px {
            // dx = r * (g*w - x * r^2 * mean(g*w*x))
            let mut dx = vec![0.0f32; x.len()];
            dx.par_chunks_mut(per * width)
                .zip(x.par_chunks(per * width).zip(g.par_chunks(per * width)))
                .zip(r.par_chunks(per))
                .for_each(|((dx, (x, g)), r)| {
                    for (((dx, x), g), &r) in dx
                        .chunks_mut(width)
                        .zip(x.chunks(width))
                        .zip(g.chunks(width))
                        .zip(r)
                    {
                        let dot: f32 = x.iter().zip(g).zip(w).map(|((x, g), w)| x * g * w).sum();
                        let k = r * r * dot / width as f32;
                        for (((d, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(w) {
                            *d = r * (g * w - x * k);
                        }
                    }
                });
            grads.register::<Cpu>(px.id, tensor(dx, xt.layout().shape().clone()));
        }
        if let Some(pw) = pw {
            // dw = sum over rows of g * x * r
            let dw = x
                .par_chunks(per * width)
                .zip(g.par_chunks(per * width))
                .zip(r.par_chunks(per))
                .map(|((x, g), r)| {
                    let mut acc = vec![0.0f32; width];
                    for ((x, g), &r) in x.chunks(width).zip(g.chunks(width)).zip(r) {
                        for ((a, &x), &g) in acc.iter_mut().zip(x).zip(g) {
                            *a += g * x * r;
                        }
                    }
                    acc
                })
                .reduce(
                    || vec![0.0f32; width],
                    |mut a, b| {
                        a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                        a
                    },
                );
            grads.register::<Cpu>(pw.id, tensor(dw, wt.layout().shape().clone()));
        }
    }
}

/// burn's `RmsNorm::forward` (over the last dimension), fused on the CPU.
pub fn rms_norm<B: Backend, const D: usize>(norm: &RmsNorm<B>, x: Tensor<B, D>) -> Tensor<B, D> {
    let eps = norm.epsilon as f32;
    match (classify(x), classify(norm.gamma.val())) {
        (On::Infer(x), On::Infer(w)) => {
            let (x, w) = (contiguous(x), contiguous(w));
            let (y, _) = rms_rows(x.storage(), w.storage(), eps);
            back(tensor(y, x.layout().shape().clone()))
        }
        (On::Train(x), On::Train(w)) => {
            let out = match RmsBackward
                .prepare::<NoCheckpointing>([x.node.clone(), w.node.clone()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let (xp, wp) = (contiguous(x.primitive), contiguous(w.primitive));
                    let (y, r) = rms_rows(xp.storage(), wp.storage(), eps);
                    let shape = xp.layout().shape().clone();
                    prep.finish(RmsState { x: xp, w: wp, r }, tensor(y, shape))
                }
                OpsKind::UnTracked(prep) => {
                    let (xp, wp) = (contiguous(x.primitive), contiguous(w.primitive));
                    let (y, _) = rms_rows(xp.storage(), wp.storage(), eps);
                    prep.finish(tensor(y, xp.layout().shape().clone()))
                }
            };
            back(out)
        }
        (On::Other(x), On::Other(_)) => {
            norm.forward(Tensor::<B, D>::from_primitive(TensorPrimitive::Float(x)))
        }
        _ => unreachable!("a module and its input are of the same backend"),
    }
}
