//! Learning while serving (`learn`, `serve-policy --follow`, `bench online`), end to end: traffic through the recording proxy to a following
//! policy server, rewards posted, a learner's update published and swapped in mid-traffic
//! without a failed request, a deliberately bad candidate rolled back on its rewards, a
//! corrupt and a mismatched version refused, and rewards for unknown or trained rollouts
//! refused.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandgym::online::{LearnConfig, Learner};
use sandgym::policy::{Cpu, CpuTrain, load};
use sandgym::proxy::judge::Judge;
use sandgym::proxy::published::{self, Manifest};
use sandgym::proxy::{
    Action, FollowConfig, FollowState, Follower, PolicyServer, Proxy, ProxyConfig, ServerConfig,
    TraceStore, Trial,
};
use sandgym::trainer::RunDir;

use super::common::{assert_success, get, spawn, tmp};
use serde_json::{Value, json};

/// A small guess-number run (SFT only) to serve and to continue learning from.
fn small_run(out: &Path) {
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        r#"{"rollout": {"tasks_per_iter": 2, "group_size": 2, "max_turns": 3}, "sft": {"episodes": 8, "epochs": 1}, "optimiser": {"lr": 1e-3}}"#,
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(["train", "--env", "guess-number-v0", "--model", "tiny"])
        .args([
            "--algo",
            "reinforce_pp",
            "--iters",
            "0",
            "--eval-episodes",
            "0",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert_success(&run);
}

fn post(url: &str, body: &Value, rollout: Option<&str>) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent.post(url).header("content-type", "application/json");
    if let Some(r) = rollout {
        req = req.header("x-rollout-id", r);
    }
    let mut resp = match req.send(body.to_string()) {
        Ok(r) => r,
        Err(e) => return (0, Value::String(e.to_string())),
    };
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn request(question: usize, temperature: f64) -> Value {
    json!({
        "model": "sandgym-policy",
        "temperature": temperature,
        "max_tokens": 24,
        "messages": [
            {"role": "system", "content": "Guess the number between 1 and 100."},
            {"role": "user", "content": format!("Round {question}: make a guess.")},
        ],
        "tools": [{"type": "function", "function": {"name": "guess", "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        }}}],
    })
}

/// The answer's token ids.
fn answer(response: &Value) -> Vec<u64> {
    response["choices"][0]["token_ids"]
        .as_array()
        .map(|ids| ids.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// The share of positions where `got` has `want`'s token.
fn agreement(got: &[u64], want: &[u64]) -> f64 {
    let same = got.iter().zip(want).filter(|(a, b)| a == b).count();
    same as f64 / got.len().max(want.len()).max(1) as f64
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_loop_learns_swaps_mid_traffic_and_rolls_back_a_bad_candidate() {
    sandgym::register_builtin_envs();
    let run = tmp("run");
    small_run(&run);
    let publish = run.join("versions");
    let db = run.join("traces.db");
    let (config, model, tokenizer) =
        load::checkpoint::<Cpu>(&RunDir::new(&run).policy(), &Default::default()).unwrap();
    let server = PolicyServer::start(
        model.clone().for_inference(),
        tokenizer.clone(),
        ServerConfig {
            version: "v0".into(),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let proxy = Proxy::start(&ProxyConfig::new(server.url()), &db).unwrap();
    // The task: answer as the serving policy answers greedily (its own reference answers); the
    // reward is the share of tokens in place. The incumbent, sampling, earns more of it than a
    // model of random weights. The rewards are far from normal, mostly one value: at temperature 0.7
    // the incumbent's samples left its greedy answer after the grammar's two forced tokens
    // (reward 2/24) 60% of the time, and a trial that judged 10 such rollouts against a
    // random model's once promoted the random one (Welch's z on a zero-variance side). At
    // temperature 0.3 (measured: 46% such samples, mean 0.41, against 96% and 0.085 for a
    // random model) and with 20 rollouts a side before the first look, the verdict on the bad
    // candidate does not depend on luck.
    let temperature = 0.3;
    let questions = 4;
    let reference: Vec<Vec<u64>> = (0..questions)
        .map(|q| {
            let (status, resp) = post(
                &format!("{}/v1/chat/completions", server.url()),
                &request(q, 0.0),
                None,
            );
            assert_eq!(status, 200, "{resp}");
            answer(&resp)
        })
        .collect();
    let follower = Follower::start(
        FollowState::new(
            FollowConfig {
                dir: publish.clone(),
                traces: Some(db.clone()),
                trial: Trial::Canary { share: 0.5 },
                judge: Judge {
                    confidence: 0.95,
                    min_rollouts: 20,
                    max_rollouts: 40,
                },
                poll: Duration::from_millis(20),
            },
            server.controls(),
            ("v0", &config, &tokenizer),
        )
        .unwrap(),
    );

    // Harness traffic: one call per rollout through the proxy, then its reward.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let served: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let rollouts = Arc::new(AtomicUsize::new(0));
    let traffic: Vec<_> = (0..2)
        .map(|t| {
            let (stop, failures, served, rollouts, reference) = (
                stop.clone(),
                failures.clone(),
                served.clone(),
                rollouts.clone(),
                reference.clone(),
            );
            let base = format!("http://{}", proxy.addr());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("t{t}-{i}");
                    let q = i % questions;
                    i += 1;
                    let (status, resp) = post(
                        &format!("{base}/rollouts/{id}/v1/chat/completions"),
                        &request(q, temperature),
                        None,
                    );
                    if status != 200 {
                        failures.lock().unwrap().push(format!("{status}: {resp}"));
                        continue;
                    }
                    let version = resp["policy_version"].as_str().unwrap_or("?").to_owned();
                    *served.lock().unwrap().entry(version).or_default() += 1;
                    let reward = agreement(&answer(&resp), &reference[q]);
                    let (status, resp) = post(
                        &format!("{base}/rollouts/{id}/reward"),
                        &json!({"reward": reward}),
                        None,
                    );
                    if status != 200 {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("reward {status}: {resp}"));
                    }
                    rollouts.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // The learner continues the run on the traffic's rewarded rollouts.
    let mut learner = Learner::<CpuTrain>::for_run(
        &run,
        LearnConfig {
            traces: db.clone(),
            publish: publish.clone(),
            batch: 8,
            limits: Default::default(),
        },
    )
    .unwrap();
    let before = learner.trainer().iteration();
    wait_for("8 rewarded rollouts", Duration::from_secs(120), || {
        rollouts.load(Ordering::Relaxed) >= 8
    });
    let step = learner.step().unwrap().expect("a batch was waiting");
    let learned = format!("v{}", before + 1);
    assert_eq!(step.version, learned);
    assert_eq!(step.rollouts, 8);
    assert_eq!(step.traces.calls_exact, 8, "{:?}", step.traces);
    assert!(step.metrics.update_norm > 0.0, "{:?}", step.metrics);
    // Swapped in mid-traffic: the canary answers its share of rollouts.
    wait_for(
        "the learned version to serve",
        Duration::from_secs(60),
        || served.lock().unwrap().contains_key(&learned),
    );

    // A deliberately bad candidate: the same model with random weights.
    let bad = config.init::<Cpu>(&Default::default());
    let manifest = |number: u64| Manifest {
        version: format!("v{number}"),
        number,
        rollouts: Vec::new(),
        reward_mean: 0.0,
        published_us: 0,
    };
    published::publish(&publish, &manifest(50), &config, &bad, &tokenizer).unwrap();
    wait_for(
        "the bad candidate's verdict",
        Duration::from_secs(180),
        || {
            sandgym::proxy::decisions(&publish)
                .unwrap()
                .iter()
                .any(|d| d.version == "v50" && d.action != Action::Staged)
        },
    );
    let decisions = sandgym::proxy::decisions(&publish).unwrap();
    let verdict = decisions
        .iter()
        .find(|d| d.version == "v50" && d.action != Action::Staged)
        .unwrap();
    assert_eq!(verdict.action, Action::RolledBack, "{decisions:#?}");
    let (incumbent, candidate) = verdict.tallies.unwrap();
    assert!(candidate.mean() < incumbent.mean(), "{verdict:?}");
    // The learned version's trial ran to its verdict before the bad one was tried.
    let first_verdict = |version: &str| {
        decisions
            .iter()
            .position(|d| d.version == version && d.action != Action::Staged)
    };
    let learned_verdict = first_verdict(&learned).expect("the learned version was judged");
    assert!(
        matches!(
            decisions[learned_verdict].action,
            Action::Promoted | Action::RolledBack
        ),
        "{decisions:#?}"
    );
    assert!(learned_verdict < first_verdict("v50").unwrap());
    let incumbent_now = decisions[learned_verdict..]
        .iter()
        .rev()
        .find(|d| d.version == learned && d.action == Action::Promoted)
        .map_or("v0", |_| learned.as_str())
        .to_owned();

    // A version of another architecture, and a corrupt one: refused, the incumbent serves on.
    let other = sandgym::policy::PolicyConfig::new(config.vocab_size)
        .with_d_model(16)
        .with_n_layers(1)
        .with_n_heads(2)
        .with_n_kv_heads(1)
        .with_d_ff(16);
    let other_model = other.init::<Cpu>(&Default::default());
    published::publish(&publish, &manifest(51), &other, &other_model, &tokenizer).unwrap();
    published::publish(&publish, &manifest(52), &config, &bad, &tokenizer).unwrap();
    let weights = std::fs::read_dir(publish.join("v52/policy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "mpk"))
        .unwrap();
    std::fs::write(&weights, b"not a checkpoint").unwrap();
    // The corrupt one is the newest: the follower takes it (and logs the mismatched one as
    // superseded, unless a round fell between the two publications), so the mismatched one
    // is published again as v53 after.
    wait_for("v52's refusal", Duration::from_secs(30), || {
        sandgym::proxy::decisions(&publish)
            .unwrap()
            .iter()
            .any(|d| d.version == "v52")
    });
    std::fs::rename(publish.join("v51"), publish.join("v53")).unwrap();
    wait_for("v53's refusal", Duration::from_secs(30), || {
        sandgym::proxy::decisions(&publish)
            .unwrap()
            .iter()
            .any(|d| d.version == "v53")
    });
    let decisions = sandgym::proxy::decisions(&publish).unwrap();
    for (version, says) in [("v52", "checkpoint"), ("v53", "not the incumbent's")] {
        let d = decisions.iter().find(|d| d.version == version).unwrap();
        assert_eq!(d.action, Action::Refused, "{d:?}");
        assert!(d.reason.contains(says), "{d:?}");
    }
    let count = |v: &str| served.lock().unwrap().get(v).copied().unwrap_or(0);
    let served_before = count(&incumbent_now);
    wait_for(
        "the incumbent to keep serving",
        Duration::from_secs(30),
        || count(&incumbent_now) > served_before + 4,
    );
    stop.store(true, Ordering::Relaxed);
    for t in traffic {
        t.join().unwrap();
    }
    drop(follower);
    let failures = failures.lock().unwrap();
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    let status = server.status();
    assert_eq!(status.incumbent, incumbent_now);
    assert_eq!(status.candidate, None);

    // Rewards that would change what was trained, or that belong to nothing, are refused.
    let base = format!("http://{}", proxy.addr());
    let rollouts_of = |version: &str| -> Vec<String> {
        published::list(&publish)
            .unwrap()
            .into_iter()
            .find(|(n, _)| format!("v{n}") == version)
            .unwrap()
            .1
            .unwrap()
            .rollouts
    };
    // The learner published its starting point as v0 (what it starts again from after a
    // rollback while v0 serves); it trained on nothing.
    assert!(rollouts_of("v0").is_empty());
    let trained = rollouts_of(&learned)[0].clone();
    let (status, resp) = post(
        &format!("{base}/rollouts/{trained}/reward"),
        &json!({"reward": 1.0}),
        None,
    );
    assert_eq!(status, 409, "{resp}");
    assert!(resp.to_string().contains("already trained"), "{resp}");
    let (status, resp) = post(
        &format!("{base}/rollouts/nobody/reward"),
        &json!({"reward": 1.0}),
        None,
    );
    assert_eq!(status, 404, "{resp}");
    assert!(resp.to_string().contains("unknown"), "{resp}");

    // A restarted learner takes only rollouts no update has taken.
    drop(learner);
    let mut learner = Learner::<CpuTrain>::for_run(
        &run,
        LearnConfig {
            traces: db.clone(),
            publish: publish.clone(),
            batch: 8,
            limits: Default::default(),
        },
    )
    .unwrap();
    assert_eq!(learner.trainer().iteration(), before + 1);
    let second = learner
        .step()
        .unwrap()
        .expect("more than 8 rollouts are waiting");
    let first = rollouts_of(&learned);
    let again = rollouts_of(&second.version);
    // v50 was rolled back since the learner's last update: it started again from the
    // version serving then, once.
    assert_eq!(second.rebased_from.as_deref(), Some(incumbent_now.as_str()));
    assert_eq!(learner.rebase_after_rollback().unwrap(), None);
    assert!(
        again.iter().all(|r| !first.contains(r)),
        "{first:?} {again:?}"
    );
    let store = TraceStore::open(&db).unwrap();
    assert_eq!(
        store.trained_by(&again[0]).unwrap().as_deref(),
        Some(second.version.as_str())
    );
    let _ = std::fs::remove_dir_all(&run);
}

/// The same loop from the command line: `serve-policy --follow`, `proxy`, `learn`.
#[test]
fn learn_publishes_and_serve_policy_follows_from_the_command_line() {
    let run = tmp("cli");
    small_run(&run);
    let versions = run.join("versions");
    let db = run.join("traces.db");
    let path = |p: &Path| p.to_str().expect("a UTF-8 temporary path").to_owned();
    let (run_s, versions_s, db_s) = (path(&run), path(&versions), path(&db));
    let (_server, api) = spawn(&[
        "serve-policy",
        "--checkpoint",
        &run_s,
        "--port",
        "0",
        "--follow",
        &versions_s,
    ]);
    let base = api.trim_end_matches("/v1").to_owned();
    let (_proxy, proxy) = spawn(&["proxy", "--upstream", &api, "--port", "0", "--db", &db_s]);
    for i in 0..4 {
        let (status, resp) = post(
            &format!("{proxy}/rollouts/c{i}/v1/chat/completions"),
            &request(i, 1.0),
            None,
        );
        assert_eq!(status, 200, "{resp}");
        assert_eq!(resp["policy_version"], "v0");
        let (status, resp) = post(
            &format!("{proxy}/rollouts/c{i}/reward"),
            &json!({"reward": f64::from(i as u8) / 3.0}),
            None,
        );
        assert_eq!(status, 200, "{resp}");
    }
    let learn = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(["learn", "--batch", "4", "--updates", "1", "--run"])
        .arg(&run)
        .arg("--traces")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&learn.stderr);
    assert!(learn.status.success(), "{stderr}");
    let step: Value = serde_json::from_slice(&learn.stdout).unwrap();
    let version = step["version"].as_str().unwrap().to_owned();
    assert_eq!(step["rollouts"], 4, "{step}");
    assert!(versions.join(&version).join("manifest.json").exists());
    // Without a trace store the follower serves it at once.
    wait_for("the learned version", Duration::from_secs(30), || {
        get(&format!("{base}/v1/policy"))["incumbent"] == version.as_str()
    });
    let (status, resp) = post(
        &format!("{proxy}/rollouts/after/v1/chat/completions"),
        &request(0, 1.0),
        None,
    );
    assert_eq!(
        (status, resp["policy_version"].as_str()),
        (200, Some(version.as_str()))
    );
    // Trained rollouts keep their rewards.
    let (status, _) = post(
        &format!("{proxy}/rollouts/c0/reward"),
        &json!({"reward": 1}),
        None,
    );
    assert_eq!(status, 409);

    // Absurd settings are clear errors.
    let bad = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(["learn", "--batch", "0", "--run"])
        .arg(&run)
        .arg("--traces")
        .arg(&db)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("batch"));
    let bad = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args([
            "serve-policy",
            "--port",
            "0",
            "--canary",
            "1.5",
            "--checkpoint",
        ])
        .arg(&run)
        .arg("--follow")
        .arg(&versions)
        .arg("--traces")
        .arg(&db)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("share"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let _ = std::fs::remove_dir_all(&run);
}

#[test]
fn bench_online_measures_the_serving_path_and_the_swap() {
    let out = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args([
            "bench",
            "online",
            "--json",
            "--seconds",
            "1",
            "--rate",
            "200",
        ])
        .args(["--rounds", "2"])
        .output()
        .unwrap();
    assert_success(&out);
    let v: sandgym::bench::online::OnlineReport = serde_json::from_slice(&out.stdout).unwrap();
    for phase in [&v.proxy_alone, &v.proxy_while_training] {
        assert_eq!(phase.lost_traces, 0, "{v:?}");
        assert!(phase.requests > 100, "{v:?}");
    }
    let swap = &v.update_to_served;
    assert_eq!(swap.each_ms.len(), 2, "{v:?}");
    assert!(swap.p50_ms > 0.0, "{v:?}");
    assert_eq!(swap.failed_requests, 0, "{v:?}");
}

#[test]
fn bench_serve_measures_a_short_request_behind_a_long_batch() {
    let out = Command::new(env!("CARGO_BIN_EXE_sandgym"))
        .args(["bench", "serve", "--json", "--rounds", "1"])
        .output()
        .unwrap();
    assert_success(&out);
    let v: sandgym::bench::serve::ServeReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.short_requests_per_round, 4, "{v:?}");
    for l in [&v.express, &v.joined] {
        for figure in [
            l.short_solo_p50_ms,
            l.short_behind_long_p50_ms,
            l.long_p50_ms,
            l.long_ms_per_token_p50,
        ] {
            assert!(figure > 0.0, "{v:?}");
        }
        assert!(l.ratio_p50 > 0.0, "{v:?}");
        assert!(l.long_tokens_mean >= 1.0, "{v:?}");
        assert!(
            l.short_behind_long_p50_ms <= l.short_behind_long_p99_ms
                && l.short_behind_long_p99_ms <= l.short_behind_long_max_ms,
            "{v:?}"
        );
    }
    // The express lane is off in the second setting.
    assert_eq!(v.joined.express_steps, 0, "{v:?}");
    // Each call of a conversation after its first continues the last one's cached keys and
    // values: most prompt tokens are served from the cache.
    let c = &v.conversation;
    assert!(c.reused_share > 0.4, "{c:?}");
    assert!(c.cached_wall_ms > 0.0 && c.uncached_wall_ms > 0.0, "{c:?}");
}
