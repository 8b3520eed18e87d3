//! Spending rollouts where they teach. Under a group baseline (GRPO, RLOO, DAPO) a group of
//! rollouts of one task teaches nothing when every rollout gets the same reward — a task the
//! policy always solves, or never does. After SFT most train tasks are of the first kind:
//! drawn uniformly, most of an iteration's rollouts are spent on them (`zero_variance_groups`
//! in the metrics says how many). [`PassRates`] keeps each train task's record over the run
//! and draws the tasks of an iteration in proportion to the chance that a group of them has
//! both outcomes.

use sandgym_env_api::SplitMix64;
use serde::{Deserialize, Serialize};

/// How an iteration's tasks are chosen (`rollout.select`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSelect {
    /// Drawn uniformly from the train split by seed (any env).
    #[default]
    Uniform,
    /// Drawn from an env's fixed train task list in proportion to each task's chance of a
    /// group with both outcomes, from its record so far ([`PassRates::teaching_chance`]).
    PassRate,
}

/// Each train task's rollouts so far: attempts and successes, by position in the split.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassRates {
    attempts: Vec<u32>,
    successes: Vec<u32>,
}

impl PassRates {
    /// No record yet of `tasks` tasks.
    pub fn new(tasks: usize) -> Self {
        Self {
            attempts: vec![0; tasks],
            successes: vec![0; tasks],
        }
    }

    /// Tasks tracked.
    pub fn len(&self) -> usize {
        self.attempts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    /// Records one rollout of `task` (ignored when out of range).
    pub fn record(&mut self, task: usize, success: bool) {
        if let (Some(a), Some(s)) = (self.attempts.get_mut(task), self.successes.get_mut(task)) {
            *a = a.saturating_add(1);
            *s = s.saturating_add(u32::from(success));
        }
    }

    /// `(attempts, successes)` of `task`.
    pub fn record_of(&self, task: usize) -> (u32, u32) {
        (
            self.attempts.get(task).copied().unwrap_or(0),
            self.successes.get(task).copied().unwrap_or(0),
        )
    }

    /// The probability that `group` rollouts of `task` are not all alike — some succeed,
    /// some fail — with its pass rate `p` unknown, under the uniform prior updated by its
    /// record (`p ~ Beta(1 + successes, 1 + failures)`): `1 − E[p^g] − E[(1−p)^g]`, where
    /// `E[p^g] = Π_{i<g} (α + i) / (α + β + i)`. An unseen task scores `1 − 2/(g+1)`; a task
    /// solved in every attempt falls towards 0 as its record grows, but never reaches it, so
    /// it is checked again now and then.
    ///
    /// ```
    /// use sandgym_trainer::PassRates;
    /// let mut r = PassRates::new(2);
    /// assert!((r.teaching_chance(0, 8) - 7.0 / 9.0).abs() < 1e-12);
    /// for _ in 0..24 {
    ///     r.record(1, true);
    /// }
    /// // Beta(25, 1): E[p^8] = 25/33, E[(1-p)^8] = 8! / (26 · 27 ⋯ 33) = 1/13,884,156.
    /// assert!((r.teaching_chance(1, 8) - (8.0 / 33.0 - 1.0 / 13_884_156.0)).abs() < 1e-12);
    /// ```
    pub fn teaching_chance(&self, task: usize, group: usize) -> f64 {
        let (a, s) = self.record_of(task);
        let alpha = 1.0 + f64::from(s);
        let beta = 1.0 + f64::from(a - s.min(a));
        let moment = |x: f64| {
            (0..group)
                .map(|i| (x + i as f64) / (alpha + beta + i as f64))
                .product::<f64>()
        };
        (1.0 - moment(alpha) - moment(beta)).max(0.0)
    }

    /// `k` distinct tasks (all of them when `k` is at least their number), not among
    /// `taken`, drawn one after another in proportion to their teaching chance for groups of
    /// `group`.
    pub fn choose(
        &self,
        k: usize,
        group: usize,
        taken: &[usize],
        rng: &mut SplitMix64,
    ) -> Vec<usize> {
        let mut weights: Vec<f64> = (0..self.len())
            .map(|t| {
                if taken.contains(&t) {
                    0.0
                } else {
                    // A floor keeps every task drawable, in proportion, when all are settled.
                    self.teaching_chance(t, group).max(1e-6)
                }
            })
            .collect();
        let mut chosen = Vec::with_capacity(k);
        while chosen.len() < k {
            let total: f64 = weights.iter().sum();
            if total <= 0.0 {
                break;
            }
            // A uniform draw in [0, total) from 53 random bits.
            let mut x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut pick = weights.iter().rposition(|&w| w > 0.0).unwrap_or(0);
            for (t, &w) in weights.iter().enumerate() {
                if w > 0.0 && x < w {
                    pick = t;
                    break;
                }
                x -= w;
            }
            chosen.push(pick);
            weights[pick] = 0.0;
        }
        chosen
    }

    /// How many tasks were seen at least `min_attempts` times and always solved, and how
    /// many never.
    pub fn settled(&self, min_attempts: u32) -> (usize, usize) {
        let seen = || (0..self.len()).filter(|&t| self.attempts[t] >= min_attempts);
        (
            seen()
                .filter(|&t| self.successes[t] == self.attempts[t])
                .count(),
            seen().filter(|&t| self.successes[t] == 0).count(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_tasks_are_drawn_less_than_uncertain_ones() {
        let mut r = PassRates::new(3);
        for _ in 0..32 {
            r.record(0, true);
            r.record(1, false);
        }
        for i in 0..32 {
            r.record(2, i % 2 == 0);
        }
        let mut counts = [0usize; 3];
        let mut rng = SplitMix64::new(7);
        for _ in 0..2000 {
            counts[r.choose(1, 8, &[], &mut rng)[0]] += 1;
        }
        // Beta(33, 1) gives 1 - 33/41 ≈ 0.20, the even record ≈ 0.98: about five times less.
        assert!(
            counts[2] > 3 * counts[0] && counts[2] > 3 * counts[1],
            "{counts:?}"
        );
        assert!(
            counts[0] > 0 && counts[1] > 0,
            "settled tasks are still checked: {counts:?}"
        );
        assert_eq!(r.settled(32), (1, 1));
    }

    #[test]
    fn choices_are_distinct_avoid_the_taken_and_stop_at_the_split() {
        let r = PassRates::new(5);
        let mut rng = SplitMix64::new(1);
        let mut got = r.choose(3, 8, &[1], &mut rng);
        assert!(!got.contains(&1));
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), 3);
        assert_eq!(r.choose(9, 8, &[], &mut rng).len(), 5);
        assert!(PassRates::new(0).choose(2, 8, &[], &mut rng).is_empty());
    }

    #[test]
    fn out_of_range_records_are_ignored() {
        let mut r = PassRates::new(1);
        r.record(5, true);
        assert_eq!(r.record_of(0), (0, 0));
        assert_eq!(r.record_of(5), (0, 0));
    }
}
