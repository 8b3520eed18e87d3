//! Harness runs through the proxy become trajectories with exactly the sampled tokens, and
//! context changes are counted as drift, not lost.

use sandgym_harnesses::{ChatClient, Harness, HarnessConfig, Outcome};
use sandgym_proxy::{PolicyServer, Proxy, ProxyConfig, TraceReader, TraceStats, TraceStore};

use crate::common::{FakeTools, LIMITS, post, server_config, temp_dir, tiny_policy};

struct Setup {
    server: PolicyServer,
    proxy: Proxy,
    db: std::path::PathBuf,
    tokenizer: sandgym_policy::Tokenizer,
}

fn setup(name: &str) -> Setup {
    let (model, tokenizer) = tiny_policy();
    let server = PolicyServer::start(model, tokenizer.clone(), server_config(true)).unwrap();
    let db = temp_dir(name).join("t.db");
    let proxy = Proxy::start(&ProxyConfig::new(server.url()), &db).unwrap();
    Setup {
        server,
        proxy,
        db,
        tokenizer,
    }
}

/// Runs the support harness `runs` times over fake tools; returns the outcomes.
fn run_harness(s: &Setup, runs: usize, history_chars: usize, answer_chars: usize) -> Vec<Outcome> {
    run_harness_from(s, 0, runs, history_chars, answer_chars)
}

fn read(s: &Setup, runs: usize) -> (Vec<Vec<sandgym_policy::Episode>>, TraceStats) {
    let ids: Vec<(String, usize, u64)> = (0..runs)
        .map(|i| (format!("run{i}"), i, i as u64))
        .collect();
    let mut reader = TraceReader::new(s.tokenizer.clone(), LIMITS);
    reader
        .read(&TraceStore::open(&s.db).unwrap(), &ids)
        .unwrap()
}

#[test]
fn trajectories_hold_exactly_the_tokens_the_server_sampled() {
    let s = setup("exact");
    let runs = 6;
    let outcomes = run_harness(&s, runs, 100_000, 20);
    let (episodes, stats) = read(&s, runs);
    let calls: usize = outcomes.iter().map(|o| o.model_calls).sum();
    assert_eq!(stats.calls, calls, "every model call is recorded");
    assert_eq!(stats.calls_exact, calls, "and usable: {stats:?}");
    // What the server sampled, call for call, is what the proxy recorded.
    let mut served: Vec<(Vec<u32>, Vec<u32>)> = s
        .server
        .journal()
        .into_iter()
        .map(|j| (j.prompt, j.completion))
        .collect();
    let store = TraceStore::open(&s.db).unwrap();
    let mut recorded: Vec<(Vec<u32>, Vec<u32>)> = (0..runs)
        .flat_map(|i| store.calls(&format!("run{i}")).unwrap())
        .map(|c| (c.prompt_ids.unwrap(), c.completion_ids.unwrap()))
        .collect();
    served.sort();
    recorded.sort();
    assert_eq!(served, recorded);
    for (i, eps) in episodes.iter().enumerate() {
        let records = store.calls(&format!("run{i}")).unwrap();
        // The generated tokens of the run's episodes, in order, are the sampled completions.
        let generated: Vec<u32> = eps
            .iter()
            .flat_map(|e| {
                e.tokens
                    .iter()
                    .zip(&e.loss_mask)
                    .filter(|(_, m)| **m)
                    .map(|(t, _)| *t)
            })
            .collect();
        let recorded: Vec<u32> = records
            .iter()
            .flat_map(|r| r.completion_ids.clone().unwrap())
            .collect();
        assert_eq!(generated, recorded);
        // Sampled log-probs travel with the tokens; the masks are the grammar's.
        for e in eps {
            for (j, m) in e.loss_mask.iter().enumerate() {
                assert_eq!(*m, e.allowed[j].is_some());
                if let Some(mask) = &e.allowed[j] {
                    assert!(mask.allows(e.tokens[j] as usize));
                }
            }
            assert_eq!(e.turns.last().unwrap().reward, 1.0);
        }
    }
    // The sub-agent's conversation and the main one are separate contexts, counted as such.
    assert!(stats.drift.new_context >= runs, "{stats:?}");
    assert_eq!(stats.drift.compressed, 0);
}

#[test]
fn compression_shows_up_as_counted_drift_not_silent_loss() {
    let s = setup("compress");
    let mut outcomes = Vec::new();
    let mut total = 0;
    // A random policy calls tools often enough; keep going until histories were compressed.
    while outcomes
        .iter()
        .map(|o: &Outcome| o.compressions)
        .sum::<usize>()
        == 0
        && total < 40
    {
        let batch = run_harness_from(&s, total, 5, 220, 120);
        total += 5;
        outcomes.extend(batch);
    }
    let compressions: usize = outcomes.iter().map(|o| o.compressions).sum();
    assert!(compressions > 0, "no run compressed its history");
    let (_, stats) = read(&s, total);
    let calls: usize = outcomes.iter().map(|o| o.model_calls).sum();
    assert_eq!(stats.calls, calls);
    assert_eq!(stats.calls_exact, calls, "nothing is lost: {stats:?}");
    assert!(stats.drift.compressed >= 1, "{stats:?}");
    assert!(stats.drift.compressed <= compressions, "{stats:?}");
}

fn run_harness_from(
    s: &Setup,
    from: usize,
    runs: usize,
    history: usize,
    answer: usize,
) -> Vec<Outcome> {
    (from..from + runs)
        .map(|i| {
            let outcome = play(s, i, history, answer);
            post_reward(s, i, r#"{"reward": 1.0}"#);
            outcome
        })
        .collect()
}

/// One harness run `run{i}` through the proxy, its reward not posted.
fn play(s: &Setup, i: usize, history: usize, answer: usize) -> Outcome {
    let mut config = HarnessConfig::new(s.proxy.base_url(&format!("run{i}")));
    config.max_tokens = 48;
    config.max_turns = 6;
    config.history_chars = history;
    let client = ChatClient::new(&config);
    let mut tools = FakeTools::new(answer);
    Harness::support(config)
        .run(&client, &mut tools, "What is alpha?")
        .expect("the harness runs")
}

fn post_reward(s: &Setup, i: usize, body: &str) {
    let (status, _) = post(
        &format!("http://{}/rollouts/run{i}/reward", s.proxy.addr()),
        body,
    );
    assert_eq!(status, 200);
}

#[test]
fn runs_that_died_or_failed_are_counted_and_never_trained_as_ordinary_episodes() {
    let s = setup("died");
    // run0 ends normally; run1 dies before posting its reward (a crashed harness, a killed
    // proxy); run2's harness failed mid-run and says so in its reward.
    let calls: Vec<usize> = (0..3)
        .map(|i| play(&s, i, 100_000, 20).model_calls)
        .collect();
    post_reward(&s, 0, r#"{"reward": 1.0, "info": {"success": true}}"#);
    post_reward(
        &s,
        2,
        r#"{"reward": 0.0, "info": {"success": false, "error": "tool service: connection reset"}}"#,
    );
    let (episodes, stats) = read(&s, 3);
    assert_eq!(stats.rollouts, 2, "{stats:?}");
    assert_eq!(stats.unrewarded, 1, "{stats:?}");
    assert_eq!(stats.failed, 1, "{stats:?}");
    // What run1 was answered stays in the store, and none of it becomes an episode.
    let store = TraceStore::open(&s.db).unwrap();
    assert_eq!(store.calls("run1").unwrap().len(), calls[1]);
    assert!(episodes[1].is_empty());
    assert!(!episodes[0].is_empty() && episodes[0].iter().all(|e| e.error.is_none()));
    assert!(!episodes[2].is_empty());
    for e in &episodes[2] {
        assert_eq!(e.error.as_deref(), Some("tool service: connection reset"));
    }
    assert_eq!(stats.calls, calls[0] + calls[2]);
}

#[test]
fn corrupted_records_are_counted_unusable() {
    let s = setup("corrupt");
    run_harness(&s, 1, 100_000, 10);
    let store = TraceStore::open(&s.db).unwrap();
    let mut calls = store.calls("run0").unwrap();
    let n = calls.len();
    calls[0].completion_ids = Some(vec![999_999]);
    calls[0].logprobs = Some(vec![0.0]);
    let mut reader = TraceReader::new(s.tokenizer.clone(), LIMITS);
    let (_, stats) = reader.episodes(&calls, 1.0, true, 0, 0);
    assert_eq!(stats.calls_unusable, 1);
    assert_eq!(stats.calls_exact, n - 1);
}
