//! Two policies on the same episodes: the difference of their success rates, episode by
//! episode, with McNemar's exact test — the honest way to say whether one checkpoint (an RL
//! run) beats another (its SFT start) on one test set, where two independent intervals
//! overlap long after the paired difference is clear.

use serde::{Deserialize, Serialize};

/// One evaluation episode's outcome, kept so two evaluations can be paired.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The reset seed (with a fixed task list, the task's position in its split).
    pub seed: u64,
    /// The task it played, when the env names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Whether it succeeded.
    pub success: bool,
    /// Its total reward.
    pub reward: f64,
}

/// Why two evaluations cannot be paired.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PairError {
    /// An evaluation without per-episode outcomes (written before they were kept).
    #[error("an evaluation has no per-episode outcomes to pair")]
    NoOutcomes,
    /// The two played different episodes.
    #[error("the evaluations played different episodes: seed {0} is in one only")]
    DifferentEpisodes(u64),
    /// One evaluation played a seed twice.
    #[error("seed {0} was played twice in one evaluation")]
    RepeatedSeed(u64),
}

/// Policy A against policy B on the same episodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Episodes paired.
    pub episodes: usize,
    /// Episodes both solved.
    pub both: usize,
    /// Episodes only A solved.
    pub only_a: usize,
    /// Episodes only B solved.
    pub only_b: usize,
    /// Episodes neither solved.
    pub neither: usize,
    /// B's success rate minus A's.
    pub difference: f64,
    /// The 95% interval of that difference (Agresti–Min: the paired Wald interval with half
    /// an episode added to each of the four cells, which keeps its coverage near 95% for
    /// small counts).
    pub difference_ci95: (f64, f64),
    /// McNemar's exact two-sided p-value: the probability, were A and B equally good, of a
    /// split of the discordant episodes at least this uneven (a binomial test of `only_b`
    /// out of `only_a + only_b` at one half).
    pub p_value: f64,
}

impl Paired {
    /// Pairs A's and B's outcomes by seed. Both must have played the same seeds, each once.
    ///
    /// ```
    /// use sandgym_trainer::{Outcome, Paired};
    /// let o = |seed, success| Outcome { seed, success, ..Outcome::default() };
    /// let a = [o(0, true), o(1, false), o(2, false)];
    /// let b = [o(2, true), o(1, true), o(0, true)];
    /// let p = Paired::of(&a, &b).unwrap();
    /// assert_eq!((p.both, p.only_a, p.only_b, p.neither), (1, 0, 2, 0));
    /// assert!((p.difference - 2.0 / 3.0).abs() < 1e-12);
    /// assert_eq!(p.p_value, 0.5);
    /// ```
    pub fn of(a: &[Outcome], b: &[Outcome]) -> Result<Self, PairError> {
        if a.is_empty() || b.is_empty() {
            return Err(PairError::NoOutcomes);
        }
        let by_seed = |xs: &[Outcome]| {
            let mut map = std::collections::BTreeMap::new();
            for x in xs {
                if map.insert(x.seed, x.success).is_some() {
                    return Err(PairError::RepeatedSeed(x.seed));
                }
            }
            Ok(map)
        };
        let (a, b) = (by_seed(a)?, by_seed(b)?);
        if let Some(&seed) = a
            .keys()
            .find(|s| !b.contains_key(s))
            .or_else(|| b.keys().find(|s| !a.contains_key(s)))
        {
            return Err(PairError::DifferentEpisodes(seed));
        }
        let mut p = Self {
            episodes: a.len(),
            ..Self::default()
        };
        for (seed, &sa) in &a {
            match (sa, b[seed]) {
                (true, true) => p.both += 1,
                (true, false) => p.only_a += 1,
                (false, true) => p.only_b += 1,
                (false, false) => p.neither += 1,
            }
        }
        let n = p.episodes as f64;
        p.difference = (p.only_b as f64 - p.only_a as f64) / n;
        p.difference_ci95 = agresti_min(p.only_a, p.only_b, p.episodes);
        p.p_value = mcnemar_exact(p.only_a, p.only_b);
        Ok(p)
    }

    /// Whether B beats A at the 5% level (two-sided test, B ahead).
    pub fn b_better(&self) -> bool {
        self.p_value < 0.05 && self.only_b > self.only_a
    }
}

/// McNemar's exact two-sided p-value for `b` and `c` discordant pairs: twice the binomial
/// tail `P(X ≤ min(b, c))`, `X ~ Bin(b + c, 1/2)`, at most 1 (1 with no discordant pair).
/// The tail is summed in log space so any count is exact to rounding.
///
/// The reference is the exact binomial sum (Python's `math.comb`): `(2, 12)` gives
/// 0.012939453125 and `(4, 14)` 0.0308837890625.
///
/// ```
/// use sandgym_trainer::mcnemar_exact;
/// assert!((mcnemar_exact(2, 12) - 0.012939453125).abs() < 1e-12);
/// assert!((mcnemar_exact(14, 4) - 0.0308837890625).abs() < 1e-12);
/// assert_eq!(mcnemar_exact(0, 0), 1.0);
/// assert_eq!(mcnemar_exact(5, 5), 1.0);
/// ```
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // ln C(n, i) built up term by term; ln 2^n subtracted from each.
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_comb = 0.0_f64;
    let mut tail = 0.0_f64;
    for i in 0..=k {
        if i > 0 {
            ln_comb += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_comb - ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

/// The Agresti–Min 95% interval of a paired difference in proportions, B minus A, from the
/// discordant counts `only_a`, `only_b` of `n` pairs.
fn agresti_min(only_a: usize, only_b: usize, n: usize) -> (f64, f64) {
    const Z: f64 = 1.959_963_984_540_054;
    let (a, b, n) = (only_a as f64 + 0.5, only_b as f64 + 0.5, n as f64 + 2.0);
    let d = (b - a) / n;
    let se = ((a + b) - (b - a).powi(2) / n).max(0.0).sqrt() / n;
    ((d - Z * se).max(-1.0), (d + Z * se).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(successes: &[bool]) -> Vec<Outcome> {
        successes
            .iter()
            .enumerate()
            .map(|(i, &success)| Outcome {
                seed: i as u64,
                success,
                ..Outcome::default()
            })
            .collect()
    }

    #[test]
    fn the_interval_matches_the_formula_computed_by_hand() {
        // 4 episodes only A solved, 14 only B, of 232; reference from the formula in Python.
        let (lo, hi) = agresti_min(4, 14, 232);
        assert!((lo - 0.006_638_204_275_970_318).abs() < 1e-12, "{lo}");
        assert!((hi - 0.078_831_881_194_115_16).abs() < 1e-12, "{hi}");
    }

    #[test]
    fn large_counts_stay_finite_and_symmetric() {
        let p = mcnemar_exact(5000, 5000);
        assert_eq!(p, 1.0);
        let p = mcnemar_exact(4800, 5200);
        assert!(p > 0.0 && p < 1e-3, "{p}");
        assert!((mcnemar_exact(3, 9) - mcnemar_exact(9, 3)).abs() < 1e-15);
    }

    #[test]
    fn different_or_repeated_episodes_are_refused() {
        let a = outcomes(&[true, false]);
        let mut b = outcomes(&[true, false]);
        b[1].seed = 7;
        assert_eq!(Paired::of(&a, &b), Err(PairError::DifferentEpisodes(1)));
        b[1].seed = 0;
        assert_eq!(Paired::of(&a, &b), Err(PairError::RepeatedSeed(0)));
        assert_eq!(Paired::of(&a, &[]), Err(PairError::NoOutcomes));
    }

    #[test]
    fn a_clear_gain_is_significant_and_a_tie_is_not() {
        let a = outcomes(&[vec![false; 20], vec![true; 80]].concat());
        let b = outcomes(&[vec![true; 20], vec![true; 80]].concat());
        let p = Paired::of(&a, &b).unwrap();
        assert!(p.b_better() && p.p_value < 1e-5, "{p:?}");
        assert!(p.difference_ci95.0 > 0.0);
        let p = Paired::of(&a, &a).unwrap();
        assert!(!p.b_better());
        assert_eq!((p.difference, p.p_value), (0.0, 1.0));
    }
}
