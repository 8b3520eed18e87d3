//! The exponential over slices, vectorised: the loops of the fused kernels that call `exp`
//! (softmax, log-softmax and their gradients, SwiGLU's sigmoid).
//!
//! Each element's `exp` was a call into libm's scalar `expf`: 7% of the CPU samples of an SQL
//! agent's SFT pass (`perf`), more than any other function outside the matrix products.
//! [`exp_neg`] computes it with Cephes' `expf` reduction and polynomial instead, without a
//! branch or a call, so a loop over a slice compiles to SIMD code; each loop here is
//! compiled twice, for the x86-64 baseline (4 lanes) and with AVX2 (8 lanes), and runs the
//! AVX2 copy where the CPU has it ([`dispatch!`]). Written by hand: the SIMD crates already
//! in the build (pulp, macerator) have no exponential, and `std::simd` needs a nightly
//! compiler. Within 2 ulp of the true value over the fused kernels' domain (tested against
//! `f64::exp`).

/// `log2(e)`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts (Cody and Waite): `n · LN2_HI` is exact for the `n` that occur.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5 · 2^23`: adding and subtracting it rounds to the nearest integer, which then sits in
/// the low bits of the sum.
const ROUND: f32 = 12_582_912.0;
/// Below this the result is flushed to 0 (`e^-87` is 1.6e-38, near the smallest normal
/// `f32`); masked logits sit at -1e9.
const FLUSH: f32 = -87.0;

/// `e^d` for `d <= 0` (the exponent of a shifted logit, a log-probability or a negative
/// magnitude), 0 below [`FLUSH`], NaN for NaN. Branch-free, so loops of it vectorise.
#[inline(always)]
pub fn exp_neg(d: f32) -> f32 {
    let x = if d < FLUSH { FLUSH } else { d };
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    // The rounded n as an integer: the low bits of t's mantissa.
    let k = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_3e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_6e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let scale = f32::from_bits((k.wrapping_add(127) << 23) as u32);
    if d < FLUSH { 0.0 } else { e * scale }
}

/// The logistic function, through [`exp_neg`] of `-|x|` (no overflow on either side).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp_neg(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 { s } else { e * s }
}

/// Defines a slice loop twice, for the baseline target and with AVX2, and a function that
/// runs the AVX2 copy where the CPU has it (the check is one cached load).
macro_rules! dispatch {
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn plain($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) {
                plain($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: this CPU has AVX2, the only feature `avx2` was compiled with.
                return unsafe { avx2($($arg),*) };
            }
            plain($($arg),*)
        }
    };
}

dispatch! {
    /// `y[i] = e^(x[i] - m)` for `x[i] <= m` ([`exp_neg`]).
    pub fn exp_shifted(x: &[f32], m: f32, y: &mut [f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y = exp_neg(x - m);
        }
    }
}

dispatch! {
    /// `dx[i] = g[i] - e^y[i] · total`: log-softmax's gradient from its output `y`.
    pub fn log_softmax_grad(y: &[f32], g: &[f32], total: f32, dx: &mut [f32]) {
        for ((dx, &y), &g) in dx.iter_mut().zip(y).zip(g) {
            *dx = g - exp_neg(y) * total;
        }
    }
}

dispatch! {
    /// `o[i] = silu(a[i]) · b[i]`.
    pub fn swiglu(a: &[f32], b: &[f32], o: &mut [f32]) {
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            *o = a * sigmoid(a) * b;
        }
    }
}

dispatch! {
    /// `d[i] = g[i] · b[i] · silu'(a[i])`: SwiGLU's gradient in its gate `a`.
    pub fn swiglu_grad_gate(a: &[f32], b: &[f32], g: &[f32], d: &mut [f32]) {
        for (((d, &a), &b), &g) in d.iter_mut().zip(a).zip(b).zip(g) {
            let s = sigmoid(a);
            *d = g * b * s * (1.0 + a * (1.0 - s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance between two floats in units in the last place of the true value.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = (f32::from_bits(w.to_bits() + 1) - w) as f64;
        (got as f64 - want).abs() / ulp
    }

    #[test]
    fn exp_is_within_two_ulp_over_the_domain() {
        let mut worst = 0.0f64;
        let n = 1_000_000;
        for i in 0..=n {
            let d = FLUSH * i as f32 / n as f32;
            let got = exp_neg(d);
            worst = worst.max(ulps(got, (d as f64).exp()));
        }
        // Points near the reduction's boundaries (n changes at odd multiples of ln2 / 2).
        for j in 1..250 {
            let edge = -(j as f32 - 0.5) * std::f32::consts::LN_2;
            for d in [
                edge,
                f32::from_bits(edge.to_bits() + 1),
                f32::from_bits(edge.to_bits() - 1),
            ] {
                if d >= FLUSH {
                    worst = worst.max(ulps(exp_neg(d), (d as f64).exp()));
                }
            }
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
    }

    #[test]
    fn exp_edges() {
        assert_eq!(exp_neg(0.0), 1.0);
        assert_eq!(exp_neg(-0.0), 1.0);
        assert_eq!(exp_neg(-1e9), 0.0);
        assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_neg(-87.5), 0.0);
        assert!(exp_neg(f32::NAN).is_nan());
        assert!(exp_neg(FLUSH) > 0.0 && exp_neg(FLUSH).is_normal());
    }

    #[test]
    fn sigmoid_matches_its_definition_on_both_sides() {
        for i in -2000..=2000 {
            let x = i as f32 / 40.0;
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            let got = sigmoid(x) as f64;
            assert!(
                (got - want).abs() <= 2e-7 * want.max(1e-30) + 1e-38,
                "{x}: {got} vs {want}"
            );
        }
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(sigmoid(-200.0), 0.0);
        assert!(sigmoid(f32::NAN).is_nan());
    }

    #[test]
    fn the_slice_loops_compute_their_formulas() {
        // Lengths that leave a remainder after 8 and 4 lanes.
        let x: Vec<f32> = (0..37).map(|i| -(i as f32) * 0.37).collect();
        let g: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 + (i as f32 * 0.3).cos()).collect();
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.4 - 7.0).collect();
        let close = |got: &[f32], want: &[f64]| {
            for (i, (&u, &w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (u as f64 - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{i}: {u} vs {w}"
                );
            }
        };
        let mut y = vec![0.0; 37];
        exp_shifted(&x, 0.5, &mut y);
        close(
            &y,
            &x.iter()
                .map(|&x| (x as f64 - 0.5).exp())
                .collect::<Vec<_>>(),
        );
        log_softmax_grad(&x, &g, 0.3, &mut y);
        let want: Vec<f64> = x
            .iter()
            .zip(&g)
            .map(|(&y, &g)| g as f64 - (y as f64).exp() * 0.3)
            .collect();
        close(&y, &want);
        let s = |a: f32| 1.0 / (1.0 + (-(a as f64)).exp());
        swiglu(&a, &b, &mut y);
        close(
            &y,
            &a.iter()
                .zip(&b)
                .map(|(&a, &b)| a as f64 * s(a) * b as f64)
                .collect::<Vec<_>>(),
        );
        swiglu_grad_gate(&a, &b, &g, &mut y);
        let want: Vec<f64> = (0..37)
            .map(|i| {
                let (a, s) = (a[i] as f64, s(a[i]));
                g[i] as f64 * b[i] as f64 * s * (1.0 + a * (1.0 - s))
            })
            .collect();
        close(&y, &want);
    }
}
