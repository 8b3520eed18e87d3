//! The server's cache of finished generations: which entry a prompt continues, and what it
//! keeps within its budget.

use burn::tensor::{Tensor, TensorData};
use sandgym_policy::{Cpu, KvCache, MIN_REUSED, PrefixCache, SeqCache};

/// A one-layer cache of `tokens` (one head of 2 dims: 16 bytes of keys and values a token).
fn seq(tokens: Vec<u32>) -> SeqCache<Cpu> {
    let n = tokens.len();
    let t = |offset: f32| {
        let values: Vec<f32> = (0..n * 2).map(|i| i as f32 + offset).collect();
        Tensor::<Cpu, 4>::from_data(TensorData::new(values, [1, 1, n, 2]), &Default::default())
    };
    KvCache::from_layers(vec![Some((t(0.0), t(0.5)))])
        .into_rows(vec![vec![true; n]], &[tokens])
        .remove(0)
}

fn run(from: u32, len: usize) -> Vec<u32> {
    (from..from + len as u32).collect()
}

#[test]
fn a_prompt_continues_the_entry_it_shares_most_with_and_never_its_last_token() {
    let mut cache = PrefixCache::<Cpu>::new(1 << 20);
    let a = run(0, 100);
    let mut b = run(0, 60);
    b.extend(run(500, 40));
    cache.insert(seq(a.clone()), 70);
    cache.insert(seq(b.clone()), 65);
    assert_eq!(cache.stats().entries, 2);
    // 70 tokens of a, then something new: a's first 70.
    let mut p = run(0, 70);
    p.extend([900, 901]);
    assert_eq!(cache.lookup(&p).unwrap().tokens(), &a[..70]);
    // b's first 80: b, cut to 79 (the prompt's last token is encoded for its logits).
    assert_eq!(cache.lookup(&b[..80]).unwrap().tokens(), &b[..79]);
    // Too little shared: nothing.
    assert!(cache.lookup(&run(0, MIN_REUSED - 1)).is_none());
    assert!(cache.lookup(&run(1000, 80)).is_none());
    let stats = cache.stats();
    assert_eq!((stats.lookups, stats.hits), (4, 2));
    assert_eq!(stats.reused_tokens, 70 + 79);
    assert_eq!(stats.bytes, 200 * 16);
}

#[test]
fn a_later_call_replaces_its_conversations_entry_and_the_budget_evicts_the_oldest() {
    // Room for 250 tokens.
    let mut cache = PrefixCache::<Cpu>::new(250 * 16);
    // A first call: a 60-token prompt and its completion.
    let turn1 = run(0, 80);
    cache.insert(seq(turn1.clone()), 60);
    // The next call holds the first prompt whole, its completion only in part (its text came
    // back split otherwise): it replaces the first call's entry.
    let mut turn2 = run(0, 70);
    turn2.extend(run(300, 50));
    cache.insert(seq(turn2.clone()), 100);
    assert_eq!(cache.stats().entries, 1);
    assert_eq!(cache.stats().bytes, 120 * 16);
    // An entry that a kept one already extends is not kept.
    cache.insert(seq(turn2[..90].to_vec()), 60);
    assert_eq!(cache.stats().entries, 1);
    // Another conversation fits beside it; a third evicts the least recently used.
    let other = run(1000, 100);
    cache.insert(seq(other.clone()), 90);
    assert_eq!(cache.stats().entries, 2);
    assert!(
        cache.lookup(&turn2).is_some(),
        "used now: other is the oldest"
    );
    cache.insert(seq(run(2000, 60)), 50);
    assert_eq!(cache.stats().entries, 2);
    assert!(cache.lookup(&other).is_none(), "evicted");
    assert!(cache.lookup(&turn2).is_some());
    assert!(cache.stats().bytes <= 250 * 16);
    // Larger than the whole budget, or off: not kept.
    cache.insert(seq(run(5000, 300)), 200);
    assert_eq!(cache.stats().entries, 2);
    let mut off = PrefixCache::<Cpu>::new(0);
    assert!(!off.is_enabled());
    off.insert(seq(turn1), 60);
    assert_eq!(off.stats().entries, 0);
}
