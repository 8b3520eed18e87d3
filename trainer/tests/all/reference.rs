//! Advantage estimators and loss terms against reference vectors (computed with verl's
//! formulas), and the tensor forms against the scalar ones.

use burn::tensor::{Tensor, TensorData};
use sandgym_policy::Cpu;
use sandgym_trainer::advantage::{
    discounted_returns, gae, grpo, masked_mean_var, masked_whiten, rloo,
};
use sandgym_trainer::objective::{
    aggregate, aggregate_tensor, kl, kl_tensor, ppo_loss, ppo_token_loss, value_loss,
    value_token_loss,
};
use sandgym_trainer::{KlEstimator, LossAgg};

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b}");
}

#[test]
fn grpo_and_rloo_on_the_published_group() {
    let r = [1.0, 0.0, 0.0, 1.0];
    let g = [0, 0, 0, 0];
    let a = grpo(&r, &g, 1e-6, true);
    for (x, want) in a.iter().zip([0.866024, -0.866024, -0.866024, 0.866024]) {
        close(*x, want, 1e-6);
    }
    let a = rloo(&r, &g);
    for (x, want) in a.iter().zip([2.0 / 3.0, -2.0 / 3.0, -2.0 / 3.0, 2.0 / 3.0]) {
        close(*x, want, 1e-6);
    }
}

#[test]
fn group_estimators_handle_several_groups_and_edge_cases() {
    // Two groups side by side, one constant, plus a lone rollout (verl: mean 0, std 1).
    let r = [3.0, 1.0, 2.0, 0.5, 0.5, 7.0];
    let g = [0, 0, 0, 1, 1, 2];
    let a = grpo(&r, &g, 1e-6, true);
    // Group 0: mean 2, unbiased std 1.
    close(a[0], 1.0 / (1.0 + 1e-6), 1e-9);
    close(a[1], -1.0 / (1.0 + 1e-6), 1e-9);
    close(a[2], 0.0, 1e-12);
    // Constant group: all zero, no division blow-up.
    close(a[3], 0.0, 1e-12);
    close(a[4], 0.0, 1e-12);
    // Lone rollout: (7 - 0) / (1 + eps).
    close(a[5], 7.0 / (1.0 + 1e-6), 1e-9);
    // Dr. GRPO: mean only.
    let a = grpo(&r, &g, 1e-6, false);
    close(a[0], 1.0, 1e-12);
    close(a[5], 7.0, 1e-12);
    // RLOO: score minus the mean of the others.
    let a = rloo(&r, &g);
    close(a[0], 3.0 - 1.5, 1e-12);
    close(a[1], 1.0 - 2.5, 1e-12);
    close(a[2], 2.0 - 2.0, 1e-12);
    close(a[5], 7.0, 1e-12);
}

#[test]
fn ppo_loss_matches_the_published_vectors() {
    // clip 0.2 / 0.28, dual clip 3.
    let cases = [
        (5.0, 1.0, -1.28),
        (5.0, -2.0, 6.0),
        (0.5, -2.0, 1.6),
        (1.5, -2.0, 3.0),
        // Inside the trust region the loss is plain -A r.
        (1.1, 1.0, -1.1),
        (0.9, -1.0, 0.9),
        // A positive advantage with a small ratio is not clipped from below: max(-0.5, -0.8).
        (0.5, 1.0, -0.5),
    ];
    for (ratio, adv, want) in cases {
        close(ppo_token_loss(ratio, adv, 0.2, 0.28, 3.0), want, 1e-12);
    }
    // Without dual clip, (ratio 5, A = -2) costs the full 10.
    close(ppo_token_loss(5.0, -2.0, 0.2, 0.28, 0.0), 10.0, 1e-12);
}

#[test]
fn kl_estimators_match_the_published_vectors() {
    close(kl(-1.0, -1.5, KlEstimator::K1), 0.5, 1e-12);
    close(kl(-1.0, -1.5, KlEstimator::K2), 0.125, 1e-12);
    close(kl(-1.0, -1.5, KlEstimator::K3), 0.1065307, 1e-7);
    // Identical policies: every estimator is zero.
    for e in [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3] {
        close(kl(-0.7, -0.7, e), 0.0, 1e-15);
    }
    // k3 is clamped at 10.
    close(kl(-30.0, 0.0, KlEstimator::K3), 10.0, 1e-12);
}

#[test]
fn gae_on_a_masked_multi_turn_sequence() {
    // Tokens: [act, act, obs, obs, act, act], reward 1 on the last action token.
    let rewards = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let values = [0.1, 0.2, 9.0, 9.0, 0.3, 0.4];
    let mask = [true, true, false, false, true, true];
    let (gamma, lam) = (0.9, 0.8);
    let (adv, ret) = gae(&rewards, &values, &mask, gamma, lam);
    // By hand over the action tokens only (observation values are skipped):
    let d5 = 1.0 - 0.4;
    let d4 = 0.0 + gamma * 0.4 - 0.3;
    let d1 = 0.0 + gamma * 0.3 - 0.2;
    let d0 = 0.0 + gamma * 0.2 - 0.1;
    let a5 = d5;
    let a4 = d4 + gamma * lam * a5;
    let a1 = d1 + gamma * lam * a4;
    let a0 = d0 + gamma * lam * a1;
    for (i, want) in [(0, a0), (1, a1), (4, a4), (5, a5)] {
        close(adv[i], want, 1e-12);
        close(ret[i], want + values[i], 1e-12);
    }
    // Observation positions carry the running advantage of the next action token (verl).
    close(adv[2], a4, 1e-12);
    // With lambda = gamma = 1 the advantage is the return minus the value.
    let (adv, _) = gae(&rewards, &values, &mask, 1.0, 1.0);
    close(adv[0], 1.0 - 0.1, 1e-12);
}

#[test]
fn reinforce_pp_returns_and_whitening() {
    let r = discounted_returns(
        &[0.0, 1.0, 0.0, 0.0, 2.0],
        &[true, true, false, true, true],
        0.5,
    );
    // Backwards over masked tokens: t4 = 2, t3 = 0 + 0.5*2 = 1, t1 = 1 + 0.5*1 = 1.5,
    // t0 = 0 + 0.5*1.5 = 0.75; t2 is an observation.
    for (x, want) in r.iter().zip([0.75, 1.5, 0.0, 1.0, 2.0]) {
        close(*x, want, 1e-12);
    }
    let values = vec![vec![1.0, 2.0, 100.0], vec![3.0, 4.0]];
    let masks = vec![vec![true, true, false], vec![true, true]];
    let (mean, var) = masked_mean_var(&values, &masks);
    close(mean, 2.5, 1e-12);
    close(var, 5.0 / 3.0, 1e-12);
    let w = masked_whiten(&values, &masks);
    close(w[0][0], (1.0 - 2.5) / (5.0f64 / 3.0 + 1e-8).sqrt(), 1e-12);
    close(w[0][2], 0.0, 0.0);
}

#[test]
fn value_loss_and_aggregation() {
    // Clipped: old 0, clip 0.2, pred 1, return 1 -> max((1-1)^2, (0.2-1)^2)/2 = 0.32.
    close(value_token_loss(1.0, 0.0, 1.0, 0.2), 0.32, 1e-12);
    let losses = vec![vec![1.0, 2.0, 3.0], vec![4.0, 0.0, 0.0]];
    let masks = vec![vec![true, true, true], vec![true, false, false]];
    close(
        aggregate(&losses, &masks, LossAgg::TokenMean),
        10.0 / 4.0,
        1e-12,
    );
    close(
        aggregate(&losses, &masks, LossAgg::SeqMeanTokenSum),
        (6.0 + 4.0) / 2.0,
        1e-12,
    );
    close(
        aggregate(&losses, &masks, LossAgg::SeqMeanTokenMean),
        (2.0 + 4.0) / 2.0,
        1e-12,
    );
}

fn t2(rows: &[Vec<f64>]) -> Tensor<Cpu, 2> {
    let n = rows[0].len();
    let data: Vec<f32> = rows.iter().flatten().map(|&x| x as f32).collect();
    Tensor::from_data(TensorData::new(data, [rows.len(), n]), &Default::default())
}

fn values(t: Tensor<Cpu, 2>) -> Vec<f64> {
    t.into_data()
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect()
}

#[test]
fn tensor_forms_equal_the_scalar_references() {
    let mut rng = sandgym_env_api::SplitMix64::new(7);
    let mut r = |lo: f64, hi: f64| lo + (hi - lo) * rng.next_f64();
    let (b, n) = (3, 17);
    let logp: Vec<Vec<f64>> = (0..b)
        .map(|_| (0..n).map(|_| r(-3.0, 0.0)).collect())
        .collect();
    let old: Vec<Vec<f64>> = (0..b)
        .map(|_| (0..n).map(|_| r(-3.0, 0.0)).collect())
        .collect();
    let adv: Vec<Vec<f64>> = (0..b)
        .map(|_| (0..n).map(|_| r(-2.0, 2.0)).collect())
        .collect();
    let masks: Vec<Vec<bool>> = (0..b)
        .map(|i| (0..n).map(|j| (i + j) % 3 != 0).collect())
        .collect();
    let maskf: Vec<Vec<f64>> = masks
        .iter()
        .map(|m| m.iter().map(|&x| f64::from(u8::from(x))).collect())
        .collect();
    let (loss, _) = ppo_loss(t2(&logp), t2(&old), t2(&adv), 0.2, 0.28, 3.0);
    let got = values(loss);
    let mut per_token = Vec::new();
    for i in 0..b {
        let mut row = Vec::new();
        for j in 0..n {
            let want = ppo_token_loss((logp[i][j] - old[i][j]).exp(), adv[i][j], 0.2, 0.28, 3.0);
            close(got[i * n + j], want, 1e-4 * want.abs().max(1.0));
            row.push(want);
        }
        per_token.push(row);
    }
    for mode in [
        LossAgg::TokenMean,
        LossAgg::SeqMeanTokenSum,
        LossAgg::SeqMeanTokenMean,
    ] {
        let want = aggregate(&per_token, &masks, mode);
        let (loss, _) = ppo_loss(t2(&logp), t2(&old), t2(&adv), 0.2, 0.28, 3.0);
        let got = aggregate_tensor(loss, t2(&maskf), mode).into_scalar();
        close(f64::from(got), want, 1e-4);
    }
    for e in [KlEstimator::K1, KlEstimator::K2, KlEstimator::K3] {
        let got = values(kl_tensor(t2(&logp), t2(&old), e));
        for i in 0..b {
            for j in 0..n {
                close(got[i * n + j], kl(logp[i][j], old[i][j], e), 1e-4);
            }
        }
    }
    let got = values(value_loss(t2(&logp), t2(&old), t2(&adv), 0.2));
    for i in 0..b {
        for j in 0..n {
            close(
                got[i * n + j],
                value_token_loss(logp[i][j], old[i][j], adv[i][j], 0.2),
                1e-4,
            );
        }
    }
}
