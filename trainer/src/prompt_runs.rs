//! An epoch's order of SFT samples in runs that share their prompt's prefix.
//!
//! With the prompt encoded without gradient ([`crate::Passes::detach_prompt`]), a pass
//! encodes each prefix its samples share once ([`sandgym_policy::prefill`]). A shuffled
//! minibatch of an env whose prompts carry a long per-database part (the SQL agent's schema
//! line after the system turn) shares little beyond the system turn, so most of an SFT step
//! goes to encoding the same schemas again. [`order`] keeps the shuffle's randomness but
//! draws samples in runs of `run` that share a long prefix: the samples whose prompts share
//! a long part beyond what every prompt shares (the same database's schema after the system
//! turn) form a group, a group is shuffled and cut into runs, and the runs of all groups are
//! shuffled. Which samples of a group meet is random (a database's questions of every kind);
//! every sample is still seen once per epoch.

use sandgym_env_api::SplitMix64;

use crate::batch::{Sample, context};

/// The least number of tokens a group's samples must share beyond the prefix every sample
/// shares for [`groups`] to keep them together: a schema line is worth it, a question's
/// first word is not (grouping by it would only make minibatches alike).
pub const MIN_SHARED: usize = 16;

/// The prompt groups of `samples`: going down the tree of their contexts ([`context`])
/// from the prefix all of them share, the first set of two or more samples that shares at
/// least [`MIN_SHARED`] more tokens is a group (a database's questions); a sample in no
/// such set is a group of its own. Groups come in the order of their contexts.
pub fn groups(samples: &[Sample]) -> Vec<Vec<usize>> {
    let n = samples.len();
    if n == 0 {
        return Vec::new();
    }
    let contexts: Vec<&[i64]> = samples.iter().map(context).collect();
    let ctx = |i: usize| contexts[i];
    let mut sorted: Vec<usize> = (0..n).collect();
    sorted.sort_by(|&a, &b| ctx(a).cmp(ctx(b)).then(a.cmp(&b)));
    // lcp[k]: the common prefix of the contexts at sorted places k - 1 and k (lcp[0] unused).
    let lcp: Vec<usize> = (0..n)
        .map(|k| match k {
            0 => 0,
            _ => {
                let (a, b) = (ctx(sorted[k - 1]), ctx(sorted[k]));
                a.iter().zip(b).take_while(|(x, y)| x == y).count()
            }
        })
        .collect();
    // What a sorted range shares: the least lcp inside it.
    let shared = |lo: usize, hi: usize| lcp[lo + 1..hi].iter().copied().min();
    let common = shared(0, n).unwrap_or(0);
    let mut out = Vec::new();
    // Sorted ranges still to place, latest first; each is a node of the tree.
    let mut todo = vec![(0, n)];
    while let Some((lo, hi)) = todo.pop() {
        let Some(s) = shared(lo, hi) else {
            out.push((lo, vec![sorted[lo]]));
            continue;
        };
        if s >= common + MIN_SHARED {
            out.push((lo, sorted[lo..hi].to_vec()));
            continue;
        }
        // Split where the next token differs (an lcp of exactly `s`): the node's children.
        let mut start = lo;
        for (k, &l) in lcp.iter().enumerate().take(hi).skip(lo + 1) {
            if l == s {
                todo.push((start, k));
                start = k;
            }
        }
        todo.push((start, hi));
    }
    out.sort_by_key(|&(lo, _)| lo);
    out.into_iter().map(|(_, g)| g).collect()
}

/// One epoch's order of the samples of `groups` ([`groups`]): each group shuffled and cut
/// into runs of `run`, all runs shuffled together. `run` ≤ 1 is a plain shuffle.
pub fn order(groups: &[Vec<usize>], run: usize, rng: &mut SplitMix64) -> Vec<usize> {
    if run <= 1 {
        let mut all: Vec<usize> = groups.iter().flatten().copied().collect();
        all.sort_unstable();
        rng.shuffle(&mut all);
        return all;
    }
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for group in groups {
        let mut members = group.clone();
        rng.shuffle(&mut members);
        runs.extend(members.chunks(run).map(<[usize]>::to_vec));
    }
    rng.shuffle(&mut runs);
    runs.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample whose whole input is context (no trainable target).
    fn sample(prompt: &[i64]) -> Sample {
        let n = prompt.len();
        Sample {
            inputs: prompt.to_vec(),
            targets: vec![0; n],
            mask: vec![false; n],
            allowed: vec![None; n],
            ..Sample::default()
        }
    }

    /// A prompt: a shared system part, a schema of `MIN_SHARED` tokens of `db`, then the
    /// question's tokens.
    fn prompt(db: i64, question: &[i64]) -> Sample {
        let mut p = vec![1, 2, 3];
        p.extend(std::iter::repeat_n(db, MIN_SHARED));
        p.extend_from_slice(question);
        sample(&p)
    }

    /// `per_db` questions over each of two schemas, interleaved.
    fn two_schemas(per_db: usize) -> Vec<Sample> {
        let mut v = Vec::new();
        for q in 0..per_db as i64 {
            v.push(prompt(7, &[100 + q % 2, q]));
            v.push(prompt(8, &[100 + q % 2, q]));
        }
        v
    }

    #[test]
    fn samples_group_by_schema_not_by_question() {
        let s = two_schemas(5);
        let g = groups(&s);
        assert_eq!(g.len(), 2, "{g:?}");
        for group in &g {
            assert_eq!(
                group.len(),
                5,
                "questions of every kind stay in their schema's group"
            );
            let schema = s[group[0]].inputs[3];
            assert!(group.iter().all(|&i| s[i].inputs[3] == schema));
        }
        // One schema: what follows the shared prompt is the question, too short to group by.
        let one: Vec<Sample> = (0..6).map(|q| prompt(7, &[100 + q % 2, q])).collect();
        assert_eq!(groups(&one).len(), 6);
        // A schema shorter than MIN_SHARED tokens is not worth grouping by either.
        let short: Vec<Sample> = (0..6)
            .map(|q| sample(&[1, 2, 3, 7 + q % 2, 9, q]))
            .collect();
        assert_eq!(groups(&short).len(), 6);
        // Schemas whose names begin alike (`library_1`, `library_2`) are still told apart.
        let mut named = Vec::new();
        for db in [7, 8] {
            for q in 0..3 {
                let mut p = vec![1, 2, 3, 50, db];
                p.extend(std::iter::repeat_n(db, MIN_SHARED));
                p.push(q);
                named.push(sample(&p));
            }
        }
        named.push(sample(&[1, 2, 3, 60, 61]));
        let g = groups(&named);
        assert_eq!(g, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    }

    #[test]
    fn an_epoch_sees_every_sample_once_in_runs_of_one_schema() {
        let s = two_schemas(8);
        let g = groups(&s);
        let mut rng = SplitMix64::new(3);
        let o = order(&g, 4, &mut rng);
        let mut seen = o.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..s.len()).collect::<Vec<_>>());
        for run in o.chunks(4) {
            let schema = s[run[0]].inputs[3];
            assert!(run.iter().all(|&i| s[i].inputs[3] == schema), "{run:?}");
        }
        // Another epoch draws other runs.
        let o2 = order(&g, 4, &mut rng);
        assert_ne!(o, o2);
    }

    #[test]
    fn a_run_of_one_is_a_plain_shuffle_and_edge_cases_hold() {
        // The order SFT drew before runs existed: Fisher–Yates over 0..n.
        let mut plain: Vec<usize> = (0..6).collect();
        let mut b = SplitMix64::new(9);
        for i in (1..plain.len()).rev() {
            plain.swap(i, b.below(i as u64 + 1) as usize);
        }
        let mut a = SplitMix64::new(9);
        assert_eq!(order(&[vec![3, 4, 5], vec![0, 1, 2]], 1, &mut a), plain);
        assert!(groups(&[]).is_empty());
        assert_eq!(groups(&[sample(&[5, 6])]), vec![vec![0]]);
    }
}
