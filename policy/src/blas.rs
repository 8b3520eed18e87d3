//! OpenBLAS's single-precision GEMM for the CPU backend's large matrix products.
//!
//! burn-flex multiplies with the `gemm` crate, which runs SmolLM2-135M's shapes at ~110
//! GFLOP/s on 2 cores where OpenBLAS reaches 230–260, and once the elementwise work is fused
//! (the `fused` kernels) the GEMMs are two thirds of a forward+backward pass (`perf`). OpenBLAS
//! comes the way the pretrained model does: from a pinned package on the Python package
//! registry (`scipy-openblas32`, the OpenBLAS build NumPy and SciPy ship), fetched with pip
//! into the cache and checked against pinned SHA-256 digests ([`fetch`]), then loaded at run
//! time with `libloading`. Nothing links against it: a build needs no BLAS, and a process
//! without one (not fetched, another platform, `SANDGYM_BLAS=off`) keeps burn-flex's GEMM.
//! `SANDGYM_BLAS=PATH` loads another OpenBLAS-compatible library (`cblas_sgemm`).

use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::OnceLock;

use burn::backend::flex::{FlexTensor, Layout};
use burn::tensor::{Bytes, DType, Shape};

use crate::fetch::RegistryFile;
use crate::{PolicyError, Result};

/// The OpenBLAS wheel: `scipy-openblas32` for x86-64 Linux (manylinux 2.27).
pub const OPENBLAS: RegistryFile = RegistryFile {
    name: "openblas",
    package: "scipy-openblas32==0.3.34.481.3",
    package_sha256: "0595f94cd58c1f8a0d90c975621f4587337a003916b1979e834ebdf2cb5d9504",
    member: "scipy_openblas32/lib/libscipy_openblas.so",
    sha256: "b396d74f12ab4319e6713b3287104d64245c76c60e5bd9eaeb4b447eda66a561",
    otherwise: "set SANDGYM_BLAS=PATH to an OpenBLAS library (without one, matrix products \
                run on burn-flex's own GEMM)",
};

/// Where the fetched library lives.
pub fn library_path() -> PathBuf {
    crate::fetch::cache_dir()
        .join("blas")
        .join("libscipy_openblas.so")
}

/// Fetches OpenBLAS into the cache unless it is there (x86-64 Linux only: the pinned wheel is
/// that platform's); returns its path.
pub fn fetch() -> Result<PathBuf> {
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(PolicyError::Fetch {
            name: OPENBLAS.name.into(),
            reason: "the pinned OpenBLAS wheel is for x86-64 Linux; set SANDGYM_BLAS=PATH to an \
                     OpenBLAS library"
                .into(),
        });
    }
    let path = library_path();
    OPENBLAS.fetch_to(&path)?;
    Ok(path)
}

/// Whether the file at `path` is the pinned OpenBLAS.
fn verified(path: &std::path::Path) -> bool {
    crate::fetch::sha256_file(path).is_ok_and(|d| d == OPENBLAS.sha256)
}

/// Fetches OpenBLAS, if it is not in the cache, when a known pretrained model is loaded (what
/// the main command and `sandgym model fetch` do first); a failure is a warning, since
/// burn-flex's GEMM computes the same products, only slower.
pub fn fetch_for_pretrained() {
    if std::env::var_os("SANDGYM_BLAS").is_some() || library_path().is_file() {
        return;
    }
    if let Err(e) = fetch() {
        eprintln!("warning: {e}; matrix products run on burn-flex's GEMM");
    }
}

type Sgemm = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    f32,
    *mut f32,
    c_int,
);

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

/// A loaded BLAS.
pub struct Blas {
    sgemm: Sgemm,
    /// Where it was loaded from.
    pub path: PathBuf,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Blas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blas").field("path", &self.path).finish()
    }
}

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

/// The BLAS this process multiplies with, loaded on first use: `SANDGYM_BLAS` (a path, or
/// `off`), else the fetched OpenBLAS if it is in the cache; `None` keeps burn-flex's GEMM.
pub fn get() -> Option<&'static Blas> {
    BLAS.get_or_init(|| {
        let path = match std::env::var_os("SANDGYM_BLAS") {
            Some(v) if v == "off" || v.is_empty() => return None,
            Some(v) => PathBuf::from(v),
            None => {
                let path = library_path();
                if !path.is_file() {
                    return None;
                }
                // Native code from the cache runs outside every sandbox: only the pinned file.
                match verified(&path) {
                    true => path,
                    false => {
                        eprintln!(
                            "warning: {} is not the pinned OpenBLAS (SHA-256 differs); matrix \
                             products stay on burn-flex's GEMM (delete it to fetch it again)",
                            path.display()
                        );
                        return None;
                    }
                }
            }
        };
        match Blas::load(&path) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("warning: {e}; matrix products stay on burn-flex's GEMM");
                None
            }
        }
    })
    .as_ref()
}

impl Blas {
    /// Loads the library at `path` and finds its SGEMM.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let fail =
            |reason: String| PolicyError::Device(format!("BLAS {}: {reason}", path.display()));
        // SAFETY: loading a shared library runs its initialisers; this is the pinned OpenBLAS
        // (its digest was checked when it was fetched) or the one `SANDGYM_BLAS` names.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| fail(e.to_string()))?;
        let mut sgemm = None;
        for name in [&b"scipy_cblas_sgemm\0"[..], b"cblas_sgemm\0"] {
            // SAFETY: the symbol is cblas_sgemm's, whose C signature `Sgemm` spells out.
            if let Ok(f) = unsafe { lib.get::<Sgemm>(name) } {
                sgemm = Some(*f);
                break;
            }
        }
        let sgemm = sgemm.ok_or_else(|| fail("no cblas_sgemm in it".into()))?;
        Ok(Self {
            sgemm,
            path: path.to_owned(),
            _lib: lib,
        })
    }
}

/// One operand of a product as BLAS reads it: row-major data from `offset`, whether it is
/// used transposed, and its leading dimension.
struct Operand<'a> {
    data: &'a [f32],
    trans: bool,
    ld: usize,
}

impl<'a> Operand<'a> {
    /// The `[rows, cols]` matrix `t` (any strides: a row-major or a transposed view is read in
    /// place, anything else is first copied into `scratch`).
    fn of(t: &'a FlexTensor, scratch: &'a mut Option<FlexTensor>) -> Self {
        let layout = t.layout();
        let (rows, cols) = (layout.shape()[0], layout.shape()[1]);
        let (s0, s1) = (layout.strides()[0], layout.strides()[1]);
        let off = layout.start_offset();
        if t.dtype() == DType::F32 {
            let data = &t.storage::<f32>()[off.min(t.storage::<f32>().len())..];
            let fits = |ld: usize, outer: usize, inner: usize| {
                outer == 0 || inner == 0 || (outer - 1) * ld + inner <= data.len()
            };
            if (s1 == 1 || cols <= 1) && (rows <= 1 || s0 >= cols.max(1) as isize) {
                let ld = if rows <= 1 { cols.max(1) } else { s0 as usize };
                if fits(ld, rows, cols) {
                    return Self {
                        data,
                        trans: false,
                        ld,
                    };
                }
            }
            if (s0 == 1 || rows <= 1) && (cols <= 1 || s1 >= rows.max(1) as isize) {
                let ld = if cols <= 1 { rows.max(1) } else { s1 as usize };
                if fits(ld, cols, rows) {
                    return Self {
                        data,
                        trans: true,
                        ld,
                    };
                }
            }
        }
        let copy = scratch.insert(if t.dtype() == DType::F32 {
            t.to_contiguous()
        } else {
            FlexTensor::from_data(t.clone().into_data().convert::<f32>())
        });
        Self {
            data: copy.storage::<f32>(),
            trans: false,
            ld: cols.max(1),
        }
    }

    fn transposed(self) -> Self {
        Self {
            trans: !self.trans,
            ..self
        }
    }
}

impl Blas {
    /// `op(a) · op(b)`, `[m, k] × [k, n]`, into a new contiguous `[m, n]` buffer.
    fn gemm(&self, a: &Operand, b: &Operand, m: usize, n: usize, k: usize) -> Vec<f32> {
        if m == 0 || n == 0 || k == 0 {
            return vec![0.0f32; m * n];
        }
        // Not zeroed first: with beta = 0 sgemm writes every element of C without reading it
        // (zeroing the outputs was 4% of a forward+backward pass).
        let mut c: Vec<f32> = Vec::with_capacity(m * n);
        self.gemm_into(a, b, [m, n, k], 1.0, &mut c, false);
        c
    }

    /// `c = alpha · op(a) · op(b) + (accumulate ? c : 0)` for `[m, k] × [k, n]`, `c` left
    /// `m × n` long (it must hold that many elements already when `accumulate`).
    fn gemm_into(
        &self,
        a: &Operand,
        b: &Operand,
        [m, n, k]: [usize; 3],
        alpha: f32,
        c: &mut Vec<f32>,
        accumulate: bool,
    ) {
        if m == 0 || n == 0 || k == 0 {
            if !accumulate {
                c.clear();
                c.resize(m * n, 0.0);
            }
            return;
        }
        assert!(
            !accumulate || c.len() == m * n,
            "blas: the accumulator holds {} elements, not {m} x {n}",
            c.len()
        );
        if !accumulate {
            c.clear();
        }
        c.reserve(m * n - c.len());
        let fits = |o: &Operand, rows: usize, cols: usize| {
            // Row-major `rows x cols` (or its transpose stored as `cols x rows`).
            let (outer, inner) = if o.trans { (cols, rows) } else { (rows, cols) };
            o.ld >= inner && (outer - 1) * o.ld + inner <= o.data.len()
        };
        let small = |v: usize| c_int::try_from(v).is_ok();
        assert!(
            fits(a, m, k) && fits(b, k, n) && [m, n, k, a.ld, b.ld].into_iter().all(small),
            "blas: operands do not cover their shapes"
        );
        // SAFETY: `a` holds `m x k` (`b`: `k x n`) row-major elements at its leading dimension,
        // checked above, and `c` has room for `m x n` (initialised when accumulating, checked
        // above); sgemm reads and writes only those, and with beta = 0 it writes every
        // element of `c` without reading it, which makes `set_len` sound.
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                if a.trans { TRANS } else { NO_TRANS },
                if b.trans { TRANS } else { NO_TRANS },
                m as c_int,
                n as c_int,
                k as c_int,
                alpha,
                a.data.as_ptr(),
                a.ld as c_int,
                b.data.as_ptr(),
                b.ld as c_int,
                if accumulate { 1.0 } else { 0.0 },
                c.as_mut_ptr(),
                n as c_int,
            );
            c.set_len(m * n);
        }
    }

    /// `a · b` for `[m, k]` and `[k, n]` CPU tensors.
    pub(crate) fn matmul(&self, a: &FlexTensor, b: &FlexTensor) -> FlexTensor {
        let (m, k) = (a.layout().shape()[0], a.layout().shape()[1]);
        let n = b.layout().shape()[1];
        let (mut sa, mut sb) = (None, None);
        let c = self.gemm(&Operand::of(a, &mut sa), &Operand::of(b, &mut sb), m, n, k);
        out(c, [m, n])
    }

    /// `c + alpha · a · b` for `[m, n]`, `[m, k]` and `[k, n]` CPU tensors, in one product
    /// that accumulates into a copy of `c`: a LoRA adapter folded into its weight reads and
    /// writes the weight's size once, instead of a full-size product, a scaling and a sum.
    pub(crate) fn add_product(
        &self,
        c: FlexTensor,
        a: &FlexTensor,
        b: &FlexTensor,
        alpha: f32,
    ) -> FlexTensor {
        let (m, k) = (a.layout().shape()[0], a.layout().shape()[1]);
        let n = b.layout().shape()[1];
        assert_eq!(
            c.layout().shape().as_ref(),
            [m, n],
            "blas: add_product's accumulator is not [m, n]"
        );
        let mut acc = crate::fused::contiguous(c).storage::<f32>()[..m * n].to_vec();
        let (mut sa, mut sb) = (None, None);
        let (oa, ob) = (Operand::of(a, &mut sa), Operand::of(b, &mut sb));
        self.gemm_into(&oa, &ob, [m, n, k], alpha, &mut acc, true);
        out(acc, [m, n])
    }

    /// The gradients of `a · b` given the output's `g`: `g · bᵀ` and `aᵀ · g`.
    pub(crate) fn matmul_grads(
        &self,
        a: &FlexTensor,
        b: &FlexTensor,
        g: &FlexTensor,
        need: [bool; 2],
    ) -> [Option<FlexTensor>; 2] {
        let (m, k) = (a.layout().shape()[0], a.layout().shape()[1]);
        let n = b.layout().shape()[1];
        let mut sg = None;
        let go = Operand::of(g, &mut sg);
        let da = need[0].then(|| {
            let mut sb = None;
            let bt = Operand::of(b, &mut sb).transposed();
            out(self.gemm(&go, &bt, m, k, n), [m, k])
        });
        let db = need[1].then(|| {
            let mut sa = None;
            let at = Operand::of(a, &mut sa).transposed();
            out(self.gemm(&at, &go, k, n, m), [k, n])
        });
        [da, db]
    }
}

fn out(c: Vec<f32>, shape: [usize; 2]) -> FlexTensor {
    FlexTensor::new(
        Bytes::from_elems(c),
        Layout::contiguous(Shape::new(shape)),
        DType::F32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Cpu;
    use burn::tensor::{Distribution, Tensor};

    fn flex(t: Tensor<Cpu, 2>) -> FlexTensor {
        t.into_primitive().tensor()
    }

    fn close(got: FlexTensor, want: Tensor<Cpu, 2>, what: &str) {
        let got: Tensor<Cpu, 2> = Tensor::from_primitive(burn::tensor::TensorPrimitive::Float(got));
        assert_eq!(got.dims(), want.dims(), "{what}: shape");
        let (g, w): (Vec<f32>, Vec<f32>) = (
            got.into_data().to_vec().unwrap(),
            want.into_data().to_vec().unwrap(),
        );
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{what}[{i}]: {a} vs {b}"
            );
        }
    }

    /// Fails (never skips) where the registry package cannot be fetched, as the SmolLM2 test.
    fn openblas() -> Blas {
        let path = fetch().expect("OpenBLAS from its registry package (needs python3 with pip)");
        assert!(verified(&path), "the fetched library is the pinned one");
        Blas::load(&path).expect("OpenBLAS loads")
    }

    #[test]
    fn openblas_products_and_gradients_match_burn_for_every_layout() {
        let blas = openblas();
        let d = Default::default();
        let r = |shape: [usize; 2]| Tensor::<Cpu, 2>::random(shape, Distribution::Default, &d);
        for (m, k, n) in [(7, 5, 3), (1, 9, 4), (6, 1, 8), (5, 7, 1), (33, 64, 17)] {
            // Row-major, transposed views, a column window (an offset and a wider row), and
            // a permuted 3D view flattened (copied first).
            let lhs = [
                r([m, k]),
                r([k, m]).transpose(),
                r([m, k + 3]).slice([0..m, 2..k + 2]),
                r([k, 1]).reshape([1, k]).repeat_dim(0, m),
            ];
            let rhs = [
                r([k, n]),
                r([n, k]).transpose(),
                r([k, n + 2]).slice([0..k, 1..n + 1]),
                r([k, n]),
            ];
            for (i, (a, b)) in lhs.iter().zip(&rhs).enumerate() {
                let what = format!("{m}x{k}x{n} layout {i}");
                let got = blas.matmul(&flex(a.clone()), &flex(b.clone()));
                close(got, a.clone().matmul(b.clone()), &format!("{what} product"));
                let g = r([m, n]);
                let [da, db] = blas.matmul_grads(
                    &flex(a.clone()),
                    &flex(b.clone()),
                    &flex(g.clone()),
                    [true, true],
                );
                close(
                    da.expect("asked for"),
                    g.clone().matmul(b.clone().transpose()),
                    &format!("{what} lhs gradient"),
                );
                close(
                    db.expect("asked for"),
                    a.clone().transpose().matmul(g),
                    &format!("{what} rhs gradient"),
                );
            }
        }
    }

    #[test]
    fn a_product_added_into_a_copy_matches_burn_and_leaves_the_original() {
        let blas = openblas();
        let d = Default::default();
        let r = |shape: [usize; 2]| Tensor::<Cpu, 2>::random(shape, Distribution::Default, &d);
        for (m, k, n) in [(7, 5, 3), (1, 9, 4), (6, 1, 8), (33, 16, 17), (5, 0, 4)] {
            // A row-major weight and a transposed view of one (copied to row-major first).
            for (i, c) in [r([m, n]), r([n, m]).transpose()].into_iter().enumerate() {
                let (a, b) = (r([m, k]), r([k, n]));
                let before: Vec<f32> = c.clone().into_data().to_vec().unwrap();
                let got =
                    blas.add_product(flex(c.clone()), &flex(a.clone()), &flex(b.clone()), 2.5);
                let want = c.clone() + a.matmul(b).mul_scalar(2.5);
                close(got, want, &format!("{m}x{k}x{n} accumulator {i}"));
                let after: Vec<f32> = c.into_data().to_vec().unwrap();
                assert_eq!(before, after, "the accumulated copy, not the weight itself");
            }
        }
    }

    #[test]
    fn a_cached_library_that_is_not_the_pinned_one_is_not_loaded() {
        let dir = std::env::temp_dir().join(format!("sandgym-blas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("libscipy_openblas.so");
        std::fs::write(&fake, b"not a library").unwrap();
        assert!(!verified(&fake));
        assert!(Blas::load(&fake).is_err(), "junk is an error, not a crash");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
