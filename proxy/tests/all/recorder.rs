//! The recording proxy: transparent, complete, and clear about what it refuses.

use std::process::Command;

use sandgym_proxy::{Proxy, ProxyConfig, TraceStore};
use serde_json::json;

use crate::common::{Canned, post, require_python, temp_dir};

#[test]
fn forwards_unchanged_and_records_tokens_timing_and_reward() {
    let upstream = Canned::start();
    let dir = temp_dir("forward");
    let db = dir.join("t.db");
    let proxy = Proxy::start(&ProxyConfig::new(&upstream.url), &db).unwrap();
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (direct_status, direct) = post(&format!("{}/v1/chat/completions", upstream.url), &body);
    let (status, via) = post(&format!("{}/chat/completions", proxy.base_url("r1")), &body);
    assert_eq!((status, &via), (direct_status, &direct));
    post(&format!("{}/chat/completions", proxy.base_url("r1")), &body);
    let (status, answer) = post(
        &format!("http://{}/rollouts/r1/reward", proxy.addr()),
        r#"{"reward": 0.75, "info": {"success": true}}"#,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["calls"], 2);
    // Untagged calls and the header tag.
    let agent = ureq::Agent::new_with_defaults();
    agent
        .post(&format!("http://{}/v1/chat/completions", proxy.addr()))
        .header("x-rollout-id", "hdr")
        .header("content-type", "application/json")
        .send(&body)
        .unwrap();
    let store = TraceStore::open(&db).unwrap();
    let calls = store.calls("r1").unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls.iter().map(|c| c.seq).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(calls[0].prompt_ids, Some(vec![1, 2]));
    assert_eq!(calls[0].completion_ids, Some(vec![3, 4]));
    assert_eq!(calls[0].logprobs, Some(vec![-0.5, -0.25]));
    assert_eq!(calls[0].request, body);
    assert!(calls[0].total_us >= calls[0].upstream_us && calls[0].upstream_us > 0);
    let reward = store.reward("r1").unwrap().unwrap();
    assert_eq!(reward.reward, 0.75);
    assert_eq!(reward.info["success"], true);
    assert_eq!(store.calls("hdr").unwrap().len(), 1);
    assert_eq!(store.reward("nobody").unwrap(), None);
}

/// A token the upstream gave no log-prob for leaves the call's log-probs unknown (not 0.0,
/// which would claim probability 1), so traces never train on a made-up value.
#[test]
fn a_missing_logprob_is_unknown_not_zero() {
    let upstream = Canned::with_logprobs(json!([{"token": "h", "logprob": -0.5}, {"token": "i"}]));
    let dir = temp_dir("no-logprob");
    let db = dir.join("t.db");
    let proxy = Proxy::start(&ProxyConfig::new(&upstream.url), &db).unwrap();
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    let (status, _) = post(&format!("{}/chat/completions", proxy.base_url("r")), &body);
    assert_eq!(status, 200);
    let calls = TraceStore::open(&db).unwrap().calls("r").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].completion_ids, Some(vec![3, 4]));
    assert_eq!(calls[0].logprobs, None);
}

#[test]
fn bad_requests_get_clear_errors_and_are_not_recorded() {
    let upstream = Canned::start();
    let dir = temp_dir("bad");
    let db = dir.join("t.db");
    let proxy = Proxy::start(&ProxyConfig::new(&upstream.url), &db).unwrap();
    let base = format!("http://{}", proxy.addr());
    let cases = [
        (
            format!("{base}/rollouts/a/v1/chat/completions"),
            "{oops".to_owned(),
            400,
            "invalid JSON",
        ),
        (
            format!("{base}/rollouts/a/v1/chat/completions"),
            "[1, 2]".to_owned(),
            400,
            "JSON object",
        ),
        (
            format!("{base}/rollouts/a/v1/chat/completions"),
            json!({"messages": [], "stream": true}).to_string(),
            400,
            "streaming",
        ),
        (
            format!("{base}/rollouts/bad%id/v1/chat/completions"),
            "{}".to_owned(),
            400,
            "rollout ids",
        ),
        (
            format!("{base}/rollouts/a/reward"),
            r#"{"reward": "high"}"#.to_owned(),
            400,
            "reward",
        ),
        (
            format!("{base}/elsewhere"),
            "{}".to_owned(),
            404,
            "no route",
        ),
    ];
    for (url, body, status, needle) in cases {
        let (got, answer) = post(&url, &body);
        assert_eq!(got, status, "{url} {body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{url}: {message}");
    }
    // A header tag is checked as a path tag is.
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    for bad in ["../../etc", "a b", &"x".repeat(201)] {
        let mut answer = agent
            .post(&format!("{base}/v1/chat/completions"))
            .header("x-rollout-id", bad)
            .header("content-type", "application/json")
            .send(json!({"messages": []}).to_string())
            .unwrap();
        assert_eq!(answer.status(), 400, "{bad}");
        let text = answer.body_mut().read_to_string().unwrap();
        assert!(text.contains("rollout ids"), "{bad}: {text}");
    }
    assert_eq!(TraceStore::open(&db).unwrap().count().unwrap(), 0);
    // An unreachable upstream is a 502, not a hang or a crash.
    drop(upstream);
    let dead = Proxy::start(&ProxyConfig::new("http://127.0.0.1:9"), &dir.join("u.db")).unwrap();
    let (status, answer) = post(&format!("{}/chat/completions", dead.base_url("x")), "{}");
    assert_eq!(status, 502, "{answer}");
}

/// Load from a second process: a Python script with 16 threads sends 400 calls over 40
/// rollouts; every call is recorded, in order, and every reward is there.
#[test]
fn concurrent_load_from_another_process_loses_no_trace() {
    require_python();
    let upstream = Canned::start();
    let dir = temp_dir("load");
    let db = dir.join("t.db");
    let mut config = ProxyConfig::new(&upstream.url);
    config.timeout = std::time::Duration::from_secs(5);
    let proxy = Proxy::start(&config, &db).unwrap();
    let script = r#"
import json, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
base = sys.argv[1]
def rollout(r):
    for i in range(10):
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"{r}-{i}"}]}).encode()
        req = urllib.request.Request(f"{base}/rollouts/r{r}/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        assert urllib.request.urlopen(req).status == 200
    req = urllib.request.Request(f"{base}/rollouts/r{r}/reward", data=b'{"reward": 1}',
                                 headers={"content-type": "application/json"})
    assert json.load(urllib.request.urlopen(req))["calls"] == 10
with ThreadPoolExecutor(16) as pool:
    list(pool.map(rollout, range(40)))
print("ok")
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(format!("http://{}", proxy.addr()))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = TraceStore::open(&db).unwrap();
    assert_eq!(store.count().unwrap(), 400);
    assert_eq!(store.rollouts().unwrap().len(), 40);
    for r in 0..40 {
        let calls = store.calls(&format!("r{r}")).unwrap();
        assert_eq!(
            calls.iter().map(|c| c.seq).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        let contents: Vec<String> = calls
            .iter()
            .map(|c| serde_json::from_str::<serde_json::Value>(&c.request).unwrap()["messages"][0]["content"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            contents,
            (0..10).map(|i| format!("{r}-{i}")).collect::<Vec<_>>()
        );
        assert_eq!(store.reward(&format!("r{r}")).unwrap().unwrap().reward, 1.0);
    }
}

#[test]
fn a_locked_trace_database_delays_recording_or_gets_a_retryable_503() {
    let upstream = Canned::start();
    let dir = temp_dir("locked");
    let db = dir.join("t.db");
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).to_string();
    // Another process holds the database's write lock for `hold`.
    let lock_for = |hold: std::time::Duration| {
        let locker = rusqlite::Connection::open(&db).unwrap();
        locker.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(hold);
            locker.execute_batch("COMMIT").unwrap();
        })
    };
    let mut config = ProxyConfig::new(&upstream.url);
    config.record_timeout = std::time::Duration::from_secs(10);
    let patient = Proxy::start(&config, &db).unwrap();
    config.record_timeout = std::time::Duration::from_millis(200);
    let hasty = Proxy::start(&config, &db).unwrap();
    let url = |p: &Proxy, path: &str| format!("http://{}/rollouts/r1{path}", p.addr());

    // Within the record timeout: the answer waits for the lock and the call is recorded.
    let release = lock_for(std::time::Duration::from_millis(800));
    let (status, _) = post(&url(&patient, "/v1/chat/completions"), &body);
    assert_eq!(status, 200);
    release.join().unwrap();
    // Past it: a 503 to retry, and the call is not counted as recorded.
    let release = lock_for(std::time::Duration::from_millis(1500));
    let (status, answer) = post(&url(&hasty, "/v1/chat/completions"), &body);
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry")
    );
    release.join().unwrap();
    let (_, reward) = post(&url(&hasty, "/reward"), r#"{"reward": 1}"#);
    assert_eq!(reward["calls"], 0);
    let (_, reward) = post(&url(&patient, "/reward"), r#"{"reward": 1}"#);
    assert_eq!(reward["calls"], 1);
    assert_eq!(TraceStore::open(&db).unwrap().count().unwrap(), 1);
}
