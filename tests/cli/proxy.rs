//! `compare`, `serve-policy` and `proxy` as processes, and `bench proxy`.

use super::common::{assert_success, sandgym, spawn, tmp};

/// `compare` of `env` from the tiny model into a fresh directory named after `name`: each
/// approach warm-started on `demonstrations` train tasks, one iteration of 2 tasks x 2
/// rollouts, each final policy evaluated on `eval_episodes` test tasks in both places, with
/// `extra` arguments. Returns the output directory, the config file and the JSON report.
fn tiny_compare(
    name: &str,
    env: &str,
    demonstrations: usize,
    eval_episodes: usize,
    extra: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, serde_json::Value) {
    let out = tmp(name);
    let config = out.with_extension("json");
    std::fs::write(
        &config,
        format!(
            r#"{{"rollout": {{"tasks_per_iter": 2, "group_size": 2}}, "eval": {{"every": 0}},
                "sft": {{"episodes": 0, "demonstrations": {demonstrations}, "epochs": 1}}}}"#
        ),
    )
    .unwrap();
    let eval_episodes = eval_episodes.to_string();
    let mut args = vec![
        "compare",
        "--env",
        env,
        "--model",
        "tiny",
        "--iters",
        "1",
        "--eval-episodes",
        &eval_episodes,
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let run = sandgym(&args);
    assert_success(&run);
    let report = serde_json::from_slice(&run.stdout).unwrap();
    (out, config, report)
}

#[test]
fn compare_then_serve_the_policy_behind_the_proxy() {
    // Both approaches on the SQL agent from the tiny model: each warm-started on 6 train
    // tasks (the env's demonstrations; the harness's traces with the demonstrator as
    // teacher), one iteration of 2 tasks x 2 rollouts, each final policy evaluated on 3 test
    // tasks in the env and in the harness. The proxy approach trains from its warm start
    // twice: each segment of a run its own sample, and each run's segments stitched into one.
    let (out, config, report) = tiny_compare(
        "compare",
        "sql-agent-v0",
        6,
        3,
        &["--proxy-samples", "segments,stitched"],
    );
    let (env, proxy) = (&report["env_approach"], &report["proxy_approach"]);
    assert!(env["integration_lines"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(proxy["integration_lines"], 0);
    // The harness consults its sub-agent, so every run makes at least two calls, all recorded.
    let calls = proxy["model_calls"].as_u64().unwrap();
    assert!(calls >= 8, "{report}");
    assert_eq!(proxy["calls_captured_exactly"], calls, "{report}");
    assert_eq!(
        proxy["tokens_captured_exactly"], proxy["generated_tokens"],
        "{report}"
    );
    // The env approach's figures are measured the same way (its rollout engine's journal).
    let env_calls = env["model_calls"].as_u64().unwrap();
    assert!(env_calls > 0, "{report}");
    assert_eq!(env["calls_captured_exactly"], env_calls, "{report}");
    assert_eq!(
        env["tokens_captured_exactly"], env["generated_tokens"],
        "{report}"
    );
    assert!(proxy["sub_agent_calls"].as_u64().unwrap() >= 4, "{report}");
    assert!(proxy["drift"].as_u64().unwrap() >= 4, "{report}");
    // As segments, every turn is trained in the context it was sampled in; stitched, from the
    // same warm start, every turn after a run's first break moved behind another context, and
    // every sampled token still reached the update.
    assert_eq!(proxy["samples"], "segments", "{report}");
    assert_eq!(proxy["moved_turns"], 0, "{report}");
    assert!(env["samples"].is_null(), "{report}");
    let alternatives = report["proxy_alternatives"].as_array().unwrap();
    assert_eq!(alternatives.len(), 1, "{report}");
    let stitched = &alternatives[0];
    assert_eq!(stitched["samples"], "stitched", "{report}");
    assert!(stitched["moved_turns"].as_u64().unwrap() >= 4, "{report}");
    let calls = stitched["model_calls"].as_u64().unwrap();
    assert!(calls >= 8, "{report}");
    assert_eq!(stitched["calls_captured_exactly"], calls, "{report}");
    assert_eq!(
        stitched["tokens_captured_exactly"], stitched["generated_tokens"],
        "{report}"
    );
    assert_eq!(stitched["warm_start"], proxy["warm_start"], "{report}");
    // A stitched sample is never longer than the longest context one call could have had
    // (the server's prompt limit: twice the SQL preset's `rollout.max_context` of 400), unless
    // one segment alone is; the model's context (4,096 for the tiny model) would let a run's
    // segments join past it.
    // (That segments were joined at all is `moved_turns` above: the turns of every segment
    // joined behind another. The two runs sample rollouts of their own, so the stitched run's
    // longest sample need not outgrow the segments run's longest: a segment near the limit
    // joins nothing.)
    let longest = |side: &serde_json::Value| side["longest_sample"].as_u64().unwrap();
    assert!(longest(stitched) <= longest(proxy).max(800), "{report}");
    assert!(env["longest_sample"].is_null(), "{report}");
    assert!(out.join("proxy-stitched/traces.db").exists());
    // Each warm start is kept beside its run, as `train` keeps its own.
    for run in ["env", "proxy"] {
        assert!(out.join(run).join("sft/config.json").is_file(), "{run}");
    }
    // The proxy's own work per call (parsing, forwarding, recording) takes tens of µs: a zero
    // median means the timing is not measured.
    let (p50, p99) = (
        proxy["added_latency_p50_ms"].as_f64().unwrap(),
        proxy["added_latency_p99_ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{report}");
    assert!(env["added_latency_p50_ms"].is_null());
    assert_eq!(env["reward_curve"].as_array().unwrap().len(), 1);
    assert_eq!(proxy["reward_curve"].as_array().unwrap().len(), 1);
    assert!(out.join("compare-reward.png").exists());
    assert!(out.join("proxy/traces.db").exists());
    // The warm starts: the env's 6 demonstrations; the teacher's 6 harness runs, every one
    // solved (it answers with the demonstrator's actions), every call usable, one note per
    // run (the sub-agent cannot run the SQL), two contexts per run.
    assert_eq!(env["warm_start"]["samples"], 6, "{report}");
    let teacher = &proxy["warm_start"]["teacher"];
    assert_eq!(teacher["runs"]["runs"], 6, "{report}");
    assert_eq!(teacher["solved"], 6, "{report}");
    assert_eq!(teacher["runs"]["failed"], 0, "{report}");
    assert_eq!(teacher["notes"], 6, "{report}");
    assert_eq!(teacher["traces"]["calls_unusable"], 0, "{report}");
    assert_eq!(
        teacher["traces"]["calls_exact"], teacher["traces"]["calls"],
        "{report}"
    );
    assert_eq!(teacher["traces"]["drift"]["new_context"], 6, "{report}");
    assert_eq!(proxy["warm_start"]["samples"], 12, "{report}");
    // The 2x2: each final policy on the same 3 test tasks in the env and in the harness.
    for side in [env, proxy, stitched] {
        for place in ["in_env", "in_harness"] {
            assert_eq!(side[place]["episodes"], 3, "{place}: {report}");
            let rate = side[place]["success_rate"].as_f64().unwrap();
            let (lo, hi) = (
                side[place]["success_ci95"][0].as_f64().unwrap(),
                side[place]["success_ci95"][1].as_f64().unwrap(),
            );
            assert!(lo <= rate && rate <= hi && hi > 0.0, "{place}: {report}");
        }
        assert!(
            side["in_harness"]["model_calls"].as_u64().unwrap() >= 6,
            "{report}"
        );
        assert!(
            side["in_harness"]["harness"]["sub_agent_calls"]
                .as_u64()
                .unwrap()
                >= 3
        );
    }
    // The tables print from the report, as the README shows them.
    let written: sandgym::comparison::Report =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    let table = sandgym::comparison::markdown(&written);
    assert!(table.contains("| env approach "), "{table}");
    assert!(table.contains("| proxy approach, stitched "), "{table}");
    assert!(table.contains("of 3 |"), "{table}");
    let reprint = sandgym(&[
        "compare",
        "--report",
        out.join("compare.json").to_str().unwrap(),
    ]);
    assert_success(&reprint);
    assert_eq!(String::from_utf8_lossy(&reprint.stdout), table);
    // A file that is not a report is a clear error.
    let bad = sandgym(&["compare", "--report", config.to_str().unwrap()]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not a compare report"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // A kind of sample named twice, or one that does not exist, is refused before any work.
    for kinds in ["segments,segments", "segments,spliced"] {
        let bad = sandgym(&[
            "compare",
            "--env",
            "sql-agent-v0",
            "--model",
            "tiny",
            "--out",
            out.join("bad").to_str().unwrap(),
            "--proxy-samples",
            kinds,
        ]);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success(), "{kinds}: {stderr}");
        assert!(
            stderr.contains("names a kind twice") || stderr.contains("unknown sample kind"),
            "{kinds}: {stderr}"
        );
    }

    // `train --source proxy`: the same proxy path as a training run of its own.
    let px = out.join("px");
    let run = sandgym(&[
        "train",
        "--env",
        "sql-agent-v0",
        "--model",
        "tiny",
        "--source",
        "proxy",
        "--proxy-samples",
        "stitched",
        "--iters",
        "1",
        "--config",
        config.to_str().unwrap(),
        "--out",
        px.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    assert_success(&run);
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("proxy source (stitched samples)"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let metrics = std::fs::read_to_string(px.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 1);
    let store = sandgym::proxy::TraceStore::open(&px.join("traces.db")).unwrap();
    assert!(store.count().unwrap() >= 8);
    // Resumed, a proxy-source run stays on the proxy source, with its kind of sample.
    let resumed = sandgym(&[
        "train",
        "--resume",
        px.to_str().unwrap(),
        "--eval-episodes",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains("proxy source (stitched samples)"),
        "{stderr}"
    );
    let bad = sandgym(&["train", "--env", "guess-number-v0", "--source", "proxy"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no harness"));
    let bad = sandgym(&[
        "train",
        "--env",
        "sql-agent-v0",
        "--proxy-samples",
        "stitched",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("applies to --source proxy"));

    // The trained policy behind `serve-policy`, recorded by `proxy`, both as processes.
    let ckpt = out.join("env");
    let (mut server, api) = spawn(&[
        "serve-policy",
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--port",
        "0",
    ]);
    let db = out.join("cli-traces.db");
    let (mut proxy_proc, proxy_url) = spawn(&[
        "proxy",
        "--upstream",
        &api,
        "--port",
        "0",
        "--db",
        db.to_str().unwrap(),
    ]);
    let body = serde_json::json!({"model": "sandgym-policy", "max_tokens": 64,
        "messages": [{"role": "user", "content": "How many customers are there?"}]});
    let mut resp = ureq::post(&format!("{proxy_url}/rollouts/cli/v1/chat/completions"))
        .header("content-type", "application/json")
        .send(body.to_string())
        .unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert!(
        answer["choices"][0]["token_ids"].as_array().unwrap().len() > 1,
        "{answer}"
    );
    // Killed without warning, the proxy has still kept what it answered.
    proxy_proc.0.kill().unwrap();
    server.0.kill().unwrap();
    let _ = (proxy_proc.0.wait(), server.0.wait());
    let store = sandgym::proxy::TraceStore::open(&db).unwrap();
    assert_eq!(store.calls("cli").unwrap().len(), 1);
    // `eval --harness` evaluates the env approach's final policy in the harness alone, the
    // same way: greedy, so the policy server's cache of finished generations changes
    // nothing but the time.
    let in_harness = |cache_mib: &str| -> serde_json::Value {
        let run = sandgym(&[
            "eval",
            "--checkpoint",
            out.join("env").to_str().unwrap(),
            "--harness",
            "--episodes",
            "3",
            "--prefix-cache-mib",
            cache_mib,
            "--json",
        ]);
        assert_success(&run);
        serde_json::from_slice(&run.stdout).unwrap()
    };
    let (cached, uncached) = (in_harness("1024"), in_harness("0"));
    assert_eq!(cached["report"]["episodes"], 3, "{cached}");
    assert!(
        cached["runs"]["model_calls"].as_u64().unwrap() >= 6,
        "{cached}"
    );
    for figure in ["model_calls", "completion_tokens", "failed"] {
        assert_eq!(cached["runs"][figure], uncached["runs"][figure], "{figure}");
    }
    assert_eq!(
        cached["report"]["success_rate"], uncached["report"]["success_rate"],
        "{cached}\n{uncached}"
    );
    let refused = sandgym(&[
        "eval",
        "--checkpoint",
        out.join("env").to_str().unwrap(),
        "--harness",
        "--concurrency",
        "0",
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--concurrency must be at least 1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}

#[test]
fn compare_with_a_harness_that_compresses_its_history() {
    // The support harness with a history budget its conversations outgrow: it elides old
    // tool outputs, and each elision is a break of the token sequence that the teacher's
    // traces, RL and the evaluation in the harness count as compression drift.
    let (out, config, report) = tiny_compare(
        "compare-compress",
        "customer-service-v0",
        4,
        2,
        &["--history-chars", "600"],
    );
    assert_eq!(report["history_chars"], 600, "{report}");
    let proxy = &report["proxy_approach"];
    // The demonstrator answers every call, so each of its runs reaches the tool calls whose
    // outputs outgrow the budget.
    let teacher = &proxy["warm_start"]["teacher"];
    assert_eq!(teacher["solved"], 4, "{report}");
    let compressed = teacher["traces"]["drift"]["compressed"].as_u64().unwrap();
    assert!(compressed >= 4, "{report}");
    assert!(
        teacher["runs"]["compressions"].as_u64().unwrap() >= compressed,
        "{report}"
    );
    // Each compressed context is a segment of its own: more samples than runs × 2 contexts.
    assert!(
        proxy["warm_start"]["samples"].as_u64().unwrap() >= 8 + compressed,
        "{report}"
    );
    // The budget is printed with the tables; in the harness both policies met compression.
    let table = sandgym::comparison::markdown(
        &serde_json::from_value::<sandgym::comparison::Report>(report.clone()).unwrap(),
    );
    let budget = table
        .lines()
        .find(|l| l.starts_with("| harness history budget (characters) "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = budget
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(cells[1..], ["600", "600"], "{table}");
    // Every compression the harness made is found in its traces as a compression break: in RL
    // and in the evaluation in the harness, whichever policy answered.
    assert_eq!(proxy["drift_compressed"], proxy["compressions"], "{report}");
    for side in ["env_approach", "proxy_approach"] {
        let h = &report[side]["in_harness"]["harness"];
        assert_eq!(
            h["drift"]["compressed"], h["compressions"],
            "{side}: {report}"
        );
    }
    // A budget of 0 is refused before any work.
    let bad = sandgym(&[
        "compare",
        "--env",
        "customer-service-v0",
        "--history-chars",
        "0",
        "--out",
        out.join("bad").to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--history-chars must be at least 1"));

    // `--resume` with the same options: every stage is taken from what it left, the same
    // report.
    let resume = |history_chars: &str, out: &std::path::Path| {
        sandgym(&[
            "compare",
            "--env",
            "customer-service-v0",
            "--model",
            "tiny",
            "--iters",
            "1",
            "--eval-episodes",
            "2",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
            "--history-chars",
            history_chars,
            "--resume",
        ])
    };
    let run = resume("600", &out);
    assert_success(&run);
    let resumed: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(resumed, report);
    // The proxy approach's RL interrupted (its stage unrecorded, its run left behind): done
    // again from the kept warm start, the rest kept. Its traces hold the new run's calls
    // only, every one matched to the server's journal.
    for stage in ["proxy-rl", "proxy-in-env", "proxy-in-harness"] {
        std::fs::remove_file(out.join(format!("stages/{stage}.json"))).unwrap();
    }
    let run = resume("600", &out);
    assert_success(&run);
    let redone: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(redone["env_approach"], report["env_approach"]);
    let proxy = &redone["proxy_approach"];
    assert_eq!(proxy["warm_start"], report["proxy_approach"]["warm_start"]);
    let calls = proxy["model_calls"].as_u64().unwrap();
    assert!(calls > 0, "{redone}");
    assert_eq!(proxy["calls_captured_exactly"], calls, "{redone}");
    assert_eq!(proxy["in_harness"]["episodes"], 2, "{redone}");
    // Other options, or nothing to resume: refused.
    let other = resume("700", &out);
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("was started with other options"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    let nothing = resume("600", &out.join("nothing"));
    assert!(!nothing.status.success());
    assert!(
        String::from_utf8_lossy(&nothing.stderr).contains("holds no comparison to resume"),
        "{}",
        String::from_utf8_lossy(&nothing.stderr)
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}
#[test]
fn bench_proxy_reports_added_latency_and_loses_nothing() {
    let out = sandgym(&[
        "bench",
        "proxy",
        "--json",
        "--seconds",
        "1",
        "--rate",
        "500",
    ]);
    assert_success(&out);
    let v: sandgym::bench::proxy::ProxyReport = serde_json::from_slice(&out.stdout).unwrap();
    // Each side's latencies are real measurements: positive, and p99 at least p50. (The
    // added latency is their difference, which noise may push below zero.)
    for (side, p50, p99) in [
        ("direct", v.direct_p50_ms, v.direct_p99_ms),
        ("proxied", v.proxied_p50_ms, v.proxied_p99_ms),
    ] {
        assert!(p50 > 0.0 && p99 >= p50, "{side}: {v:?}");
    }
    assert!(v.requests_per_s > 100.0, "{v:?}");
    assert_eq!(v.lost_traces, 0, "{v:?}");
}
