//! When a canary's rewards say it is better or worse than the incumbent's.
//!
//! The two versions' rewards over the rollouts each answered since the canary started are
//! compared with Welch's statistic, z = (mean_c − mean_i) / √(var_c/n_c + var_i/n_i), read
//! against the normal distribution (a large-sample test: both sides need `min_rollouts`).
//! The candidate is promoted when P(better) ≥ `confidence`, rolled back when P(worse) ≥
//! `confidence`, and rolled back as well when it reaches `max_rollouts` without being shown
//! better (an update that cannot show a gain is not taken).

use serde::{Deserialize, Serialize};

/// The rewards of one version's rollouts: their count, mean and sum of squared deviations,
/// kept by Welford's update, so equal rewards give a mean of exactly that reward and a
/// variance of exactly 0 (running sums of squares leave rounding noise that would read as a
/// difference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Rollouts.
    pub n: u64,
    /// Their mean reward (0 with none).
    pub mean: f64,
    /// The sum of squared deviations from the mean.
    pub m2: f64,
}

impl Tally {
    /// Adds a rollout's reward.
    pub fn add(&mut self, reward: f64) {
        self.n += 1;
        let delta = reward - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (reward - self.mean);
    }

    /// The mean reward (0 with no rollout).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The unbiased variance (0 with fewer than two rollouts).
    pub fn variance(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        (self.m2 / (self.n - 1) as f64).max(0.0)
    }
}

/// The rule that decides a canary.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judge {
    /// Probability needed to promote or roll back (e.g. 0.95).
    pub confidence: f64,
    /// Rollouts each side needs before anything is decided.
    pub min_rollouts: u64,
    /// Candidate rollouts after which a candidate not shown better is rolled back.
    pub max_rollouts: u64,
}

impl Default for Judge {
    fn default() -> Self {
        Self {
            confidence: 0.95,
            min_rollouts: 20,
            max_rollouts: 400,
        }
    }
}

/// What the judge says.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Not enough evidence yet.
    Wait,
    /// The candidate is better.
    Promote,
    /// The candidate is worse, or not shown better within `max_rollouts`.
    Rollback,
}

/// The standard normal distribution function, from `erfc`.
fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

impl Judge {
    /// The probability that the candidate is better (from Welch's z; 0.5 when both sides are
    /// constant and equal). Differences within rounding (1e-12 of the rewards' size) are no
    /// difference.
    pub fn p_better(incumbent: &Tally, candidate: &Tally) -> f64 {
        let scale = candidate.mean().abs().max(incumbent.mean().abs()).max(1.0);
        let mut diff = candidate.mean() - incumbent.mean();
        if diff.abs() <= 1e-12 * scale {
            diff = 0.0;
        }
        let se = (candidate.variance() / candidate.n.max(1) as f64
            + incumbent.variance() / incumbent.n.max(1) as f64)
            .sqrt();
        if se <= 1e-12 * scale {
            return match diff.partial_cmp(&0.0) {
                Some(std::cmp::Ordering::Greater) => 1.0,
                Some(std::cmp::Ordering::Less) => 0.0,
                _ => 0.5,
            };
        }
        normal_cdf(diff / se)
    }

    /// The verdict on `candidate` against `incumbent`.
    pub fn decide(&self, incumbent: &Tally, candidate: &Tally) -> Verdict {
        if incumbent.n < self.min_rollouts || candidate.n < self.min_rollouts {
            return Verdict::Wait;
        }
        let p = Self::p_better(incumbent, candidate);
        if p >= self.confidence {
            Verdict::Promote
        } else if 1.0 - p >= self.confidence || candidate.n >= self.max_rollouts {
            Verdict::Rollback
        } else {
            Verdict::Wait
        }
    }

    /// Checks the settings: a confidence in (0.5, 1), at least two rollouts, and a maximum not
    /// below the minimum.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return Err(format!(
                "confidence must be within (0.5, 1) (got {})",
                self.confidence
            ));
        }
        if self.min_rollouts < 2 || self.max_rollouts < self.min_rollouts {
            return Err(format!(
                "need 2 <= min_rollouts <= max_rollouts (got {} and {})",
                self.min_rollouts, self.max_rollouts
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(rewards: &[f64]) -> Tally {
        let mut t = Tally::default();
        rewards.iter().for_each(|&r| t.add(r));
        t
    }

    #[test]
    fn welch_probability_matches_a_hand_computed_value() {
        // Means 0.5 and 0.8 over 10 each; variances 0.2778 and 0.1778: z = 0.3 / 0.2134
        // (the probability from Python's math.erfc).
        let inc = tally(&[1., 0., 1., 0., 1., 0., 1., 0., 1., 0.]);
        let cand = tally(&[1., 1., 1., 1., 0., 1., 1., 1., 0., 1.]);
        let z: f64 = 0.3 / (0.2777_7778_f64 / 10.0 + 0.1777_7778 / 10.0).sqrt();
        let p = Judge::p_better(&inc, &cand);
        assert!((z - 1.405_56).abs() < 1e-4, "{z}");
        assert!((p - 0.920_073).abs() < 1e-5, "{p}");
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn it_waits_for_evidence_then_promotes_or_rolls_back() {
        let judge = Judge {
            confidence: 0.95,
            min_rollouts: 5,
            max_rollouts: 40,
        };
        let half = tally(&[1., 0., 1., 0., 1., 0., 1., 0.]);
        assert_eq!(
            judge.decide(&half, &tally(&[1., 1., 1., 1.])),
            Verdict::Wait
        );
        assert_eq!(
            judge.decide(&half, &tally(&[1.; 12])),
            Verdict::Promote,
            "a constant 1 against a coin"
        );
        assert_eq!(judge.decide(&half, &tally(&[0.; 12])), Verdict::Rollback);
        assert_eq!(
            judge.decide(&half, &tally(&[1., 0., 1., 0., 1., 0.])),
            Verdict::Wait
        );
        let even = tally(&[1., 0.].repeat(20));
        assert_eq!(
            judge.decide(&half, &even),
            Verdict::Rollback,
            "no gain in 40"
        );
        assert_eq!(
            judge.decide(&tally(&[1.; 8]), &tally(&[1.; 8])),
            Verdict::Wait
        );
    }

    #[test]
    fn absurd_settings_are_refused() {
        for (confidence, min, max) in [
            (0.4, 5, 10),
            (1.0, 5, 10),
            (f64::NAN, 5, 10),
            (0.9, 1, 10),
            (0.9, 10, 5),
        ] {
            let judge = Judge {
                confidence,
                min_rollouts: min,
                max_rollouts: max,
            };
            assert!(judge.validate().is_err(), "{judge:?}");
        }
        assert!(Judge::default().validate().is_ok());
    }
}
