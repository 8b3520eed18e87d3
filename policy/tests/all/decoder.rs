//! Continuous batching: rows admitted into a running batch sample what they would alone.

use sandgym_policy::{
    ActionLimits, Decoder, PrefixCache, RowRequest, SampleConfig, Sampled, ToolCallGrammar,
    generate, sequence_logprobs,
};

use crate::model::{Infer, config, select_device};

fn request(id: usize, prompt: Vec<u32>, max_new_tokens: usize, seed: u64) -> RowRequest {
    RowRequest {
        id,
        prompt,
        constraint: None,
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens,
        seed,
    }
}

/// `prompt` generated alone by `generate` (its row 0 is seeded with the config's seed).
fn alone(
    model: &sandgym_policy::PolicyModel<Infer>,
    prompt: &[u32],
    max_new_tokens: usize,
    seed: u64,
) -> Sampled {
    let sample = SampleConfig {
        temperature: 0.9,
        top_p: 1.0,
        max_new_tokens,
        seed,
    };
    let device = select_device();
    generate(
        model,
        &[prompt.to_vec()],
        &mut [None],
        10_000,
        &sample,
        &device,
    )
    .unwrap()
    .remove(0)
}

#[test]
fn rows_admitted_between_steps_sample_as_if_alone() {
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    // `end` outside the vocabulary: rows run their whole budgets.
    let mut decoder = Decoder::new(&model, 10_000, &device);
    decoder.admit(vec![
        request(0, (20..32).collect(), 30, 1),
        request(1, vec![5, 9, 17], 6, 2),
    ]);
    let never = |_: usize| false;
    let mut done = Vec::new();
    for _ in 0..4 {
        decoder.step(&never);
        done.extend(decoder.done());
    }
    // A longer prompt joins a batch four tokens in, a short one after row 1 has ended (its
    // slot dropped from the cache on the way).
    decoder.admit(vec![request(2, (40..75).collect(), 10, 3)]);
    for _ in 0..5 {
        decoder.step(&never);
        done.extend(decoder.done());
    }
    assert!(done.iter().any(|d| d.id == 1), "row 1 ends at its budget");
    decoder.admit(vec![request(3, vec![7, 7], 12, 4)]);
    while !decoder.is_idle() {
        decoder.step(&never);
        done.extend(decoder.done());
    }
    done.sort_by_key(|d| d.id);
    let prompts: [(Vec<u32>, usize, u64); 4] = [
        ((20..32).collect(), 30, 1),
        (vec![5, 9, 17], 6, 2),
        ((40..75).collect(), 10, 3),
        (vec![7, 7], 12, 4),
    ];
    assert_eq!(done.len(), 4);
    for (d, (prompt, budget, seed)) in done.into_iter().zip(prompts) {
        let s = d.result.unwrap();
        assert_eq!(s.tokens.len(), budget, "row {}", d.id);
        let solo = alone(&model, &prompt, budget, seed);
        assert_eq!(
            s.tokens, solo.tokens,
            "row {} differs from its solo run",
            d.id
        );
        // And each token's log-prob is that of one full forward pass over the row alone.
        let full = sequence_logprobs(&model, &prompt, &s.tokens, &[], 0.9, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "row {}: cached {a} vs full {b}", d.id);
        }
    }
}

#[test]
fn a_stopped_row_ends_alone_and_an_idle_decoder_takes_new_rows() {
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let mut decoder = Decoder::new(&model, 10_000, &device);
    decoder.admit(vec![
        request(0, vec![1, 2, 3], 8, 1),
        request(1, vec![4, 5], 8, 2),
    ]);
    let stop_1 = |id: usize| id == 1;
    decoder.step(&stop_1);
    let done = decoder.done();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, 1);
    let stopped = done.into_iter().next().unwrap().result.unwrap();
    assert!(stopped.tokens.is_empty() && !stopped.finished);
    assert_eq!(decoder.running(), 1);
    while !decoder.is_idle() {
        decoder.step(&|_| false);
    }
    assert_eq!(decoder.done()[0].result.as_ref().unwrap().tokens.len(), 8);
    // Idle, it starts a new batch from nothing.
    decoder.admit(vec![request(7, vec![9, 9, 9], 3, 5)]);
    while !decoder.is_idle() {
        decoder.step(&|_| false);
    }
    let last = decoder.done().remove(0);
    assert_eq!(last.id, 7);
    assert_eq!(
        last.result.unwrap().tokens,
        alone(&model, &[9, 9, 9], 3, 5).tokens
    );
}

#[test]
fn constrained_rows_finish_their_action_when_admitted_late() {
    let tok = crate::tokenizer();
    let device = select_device();
    let model = config(tok.vocab_size()).init::<Infer>(&device);
    let tools = &crate::episodes()[0].0;
    let limits = ActionLimits {
        thought_chars: 16,
        response_chars: 24,
    };
    let grammar = ToolCallGrammar::new(tok, tools, limits).unwrap();
    let template = sandgym_policy::Template::new(tok);
    let prompt = |i: usize| {
        let mut p = template
            .prompt(tools, &crate::episodes()[2 * i].1.records[0].instruction)
            .unwrap()
            .ids;
        p.truncate(30 + 11 * i);
        p.extend(template.generation_prefix());
        p
    };
    let constrained = |id: usize| RowRequest {
        constraint: Some(grammar.matcher().unwrap()),
        temperature: 1.0,
        ..request(id, prompt(id), 300, 9 + id as u64)
    };
    let mut decoder = Decoder::new(&model, tok.end(), &device);
    decoder.admit(vec![constrained(0)]);
    for _ in 0..3 {
        decoder.step(&|_| false);
    }
    decoder.admit(vec![constrained(1), constrained(2)]);
    let mut done = decoder.done();
    while !decoder.is_idle() {
        decoder.step(&|_| false);
        done.extend(decoder.done());
    }
    assert_eq!(done.len(), 3);
    for d in done {
        let s = d.result.unwrap();
        assert!(s.finished, "row {}", d.id);
        let text = tok.decode(&s.tokens[..s.tokens.len() - 1]).unwrap();
        let action = sandgym_env_api::Action::from_json(&text).unwrap();
        sandgym_env_api::validate_action(tools, &action).unwrap();
        // The matcher comes back consumed to the end.
        assert!(d.constraint.unwrap().is_finished());
        // Log-probs under the masks recorded, from one full pass over the row alone.
        let full = sequence_logprobs(&model, &prompt(d.id), &s.tokens, &s.allowed, 1.0, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "row {}: cached {a} vs full {b}", d.id);
        }
    }
}

#[test]
fn a_row_that_continues_a_kept_cache_samples_as_if_alone() {
    let device = select_device();
    let model = config(300).init::<Infer>(&device);
    let mut decoder = Decoder::new(&model, 10_000, &device);
    decoder.keep_caches(true);
    let first: Vec<u32> = (20..60).collect();
    decoder.admit(vec![request(0, first.clone(), 10, 1)]);
    while !decoder.is_idle() {
        decoder.step(&|_| false);
    }
    let sampled = decoder.done().remove(0).result.unwrap();
    let mut kept = decoder.take_caches();
    assert_eq!(kept.len(), 1);
    let (id, seq) = kept.remove(0);
    assert_eq!(id, 0);
    // The prompt and every sampled token but the last, which was never fed.
    let mut fed = first.clone();
    fed.extend(&sampled.tokens[..sampled.tokens.len() - 1]);
    assert_eq!(seq.tokens(), fed.as_slice());
    let mut cache = PrefixCache::new(1 << 30);
    cache.insert(seq, first.len());
    // The conversation's next call: the whole first call, its answer and a tool result. And a
    // call that shares only the first 35 tokens (an older turn rewritten).
    let mut next = first.clone();
    next.extend(&sampled.tokens);
    next.extend([3, 4, 5, 6]);
    let rewritten: Vec<u32> = (20..55).chain([8, 8, 8]).collect();
    let mut bases = Vec::new();
    for (id, prompt) in [(1, &next), (2, &rewritten)] {
        let base = cache.lookup(prompt).expect("a shared prefix");
        bases.push((request(id, prompt.clone(), 8, 7 + id as u64), base));
    }
    assert_eq!(bases[0].1.tokens().len(), fed.len());
    assert_eq!(bases[1].1.tokens().len(), 35);
    let stats = cache.stats();
    assert_eq!((stats.lookups, stats.hits), (2, 2));
    assert_eq!(stats.reused_tokens, (fed.len() + 35) as u64);
    // Beside a row admitted fresh.
    decoder.admit_continuing(bases);
    decoder.admit(vec![request(3, vec![5, 9, 17], 8, 10)]);
    let mut done = Vec::new();
    while !decoder.is_idle() {
        decoder.step(&|_| false);
        done.extend(decoder.done());
    }
    done.sort_by_key(|d| d.id);
    for (d, prompt) in done.into_iter().zip([next, rewritten, vec![5, 9, 17]]) {
        let s = d.result.unwrap();
        let solo = alone(&model, &prompt, 8, 7 + d.id as u64);
        assert_eq!(
            s.tokens, solo.tokens,
            "row {} differs from its solo run",
            d.id
        );
        let full = sequence_logprobs(&model, &prompt, &s.tokens, &[], 0.9, &device);
        for (a, b) in s.logprobs.iter().zip(&full) {
            assert!((a - b).abs() < 1e-4, "row {}: cached {a} vs full {b}", d.id);
        }
    }
}
