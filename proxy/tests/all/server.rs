//! The policy server answers like an OpenAI-compatible API and refuses bad requests clearly.

use sandgym_chat_api::{ChatRequest, Message};
use sandgym_harnesses::{ChatClient, HarnessConfig, HarnessError, Tools};
use sandgym_proxy::{Express, PolicyServer};
use serde_json::json;

use crate::common::{FakeTools, post, server_config, tiny_policy};

fn server(journal: bool) -> PolicyServer {
    let (model, tok) = tiny_policy();
    PolicyServer::start(model, tok, server_config(journal)).expect("server starts")
}

#[test]
fn answers_with_a_valid_tool_call_or_message_and_its_tokens() {
    let server = server(true);
    let client = ChatClient::new(&HarnessConfig::new(format!("{}/v1", server.url())));
    let tools = FakeTools::new(10).definitions();
    for seed in 0..6 {
        let request = ChatRequest {
            model: "sandgym-policy".into(),
            messages: vec![
                Message::system("You answer questions."),
                Message::user("What is alpha?"),
            ],
            tools: tools.clone(),
            seed: Some(seed),
            max_tokens: Some(48),
            ..ChatRequest::default()
        };
        let response = client.complete(&request).expect("a completion");
        let choice = &response.choices[0];
        let ids = choice.token_ids.clone().expect("token ids");
        assert_eq!(choice.logprobs.as_ref().unwrap().content.len(), ids.len());
        assert_eq!(
            response.usage.unwrap().completion_tokens as usize,
            ids.len()
        );
        match choice.finish_reason.as_deref() {
            Some("tool_calls") => {
                let call = &choice.message.tool_calls[0];
                assert!(["lookup", "list"].contains(&call.function.name.as_str()));
                let args: serde_json::Value =
                    serde_json::from_str(&call.function.arguments).unwrap();
                assert!(args.is_object());
            }
            Some("stop") => assert!(choice.message.tool_calls.is_empty()),
            Some("length") => assert_eq!(ids.len(), 48),
            other => panic!("unexpected finish reason {other:?}"),
        }
        let served = server.journal();
        assert_eq!(served.last().unwrap().completion, ids);
        assert_eq!(
            Some(served.last().unwrap().prompt.clone()),
            response.prompt_token_ids
        );
    }
}

#[test]
fn tool_choice_decides_between_calls_and_answers() {
    let server = server(false);
    let url = format!("{}/v1/chat/completions", server.url());
    let tools = serde_json::to_value(FakeTools::new(10).definitions()).unwrap();
    let ask = |seed: u64, choice: serde_json::Value| {
        let body = json!({"messages": [{"role": "user", "content": "What is alpha?"}],
            "seed": seed, "max_tokens": 48, "temperature": 1.5, "tools": tools,
            "tool_choice": choice});
        post(&url, &body.to_string())
    };
    for seed in 0..4 {
        let (status, answer) = ask(seed, json!("required"));
        assert_eq!(status, 200, "{answer}");
        let choice = &answer["choices"][0];
        if choice["finish_reason"] != "length" {
            assert_eq!(choice["finish_reason"], "tool_calls", "{answer}");
        }
        let (status, answer) = ask(seed, json!("none"));
        assert_eq!(status, 200, "{answer}");
        let message = &answer["choices"][0]["message"];
        assert!(
            message["tool_calls"].as_array().is_none_or(Vec::is_empty),
            "{answer}"
        );
        let named = json!({"type": "function", "function": {"name": "list"}});
        let (status, answer) = ask(seed, named);
        assert_eq!(status, 200, "{answer}");
        let choice = &answer["choices"][0];
        if choice["finish_reason"] != "length" {
            assert_eq!(
                choice["message"]["tool_calls"][0]["function"]["name"], "list",
                "{answer}"
            );
        }
    }
    for bad in [
        json!("always"),
        json!(3),
        json!({"type": "function"}),
        json!({"type": "function", "function": {"name": "missing"}}),
    ] {
        let (status, answer) = ask(0, bad.clone());
        assert_eq!(status, 400, "{bad}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("tool_choice"), "{message}");
    }
}

#[test]
fn concurrent_requests_are_batched_and_all_answered() {
    let server = server(true);
    let url = format!("{}/v1", server.url());
    std::thread::scope(|s| {
        for i in 0..8 {
            let url = url.clone();
            s.spawn(move || {
                let client = ChatClient::new(&HarnessConfig::new(url));
                let request = ChatRequest {
                    messages: vec![Message::user(format!("question {i}"))],
                    tools: FakeTools::new(5).definitions(),
                    max_tokens: Some(32),
                    ..ChatRequest::default()
                };
                client.complete(&request).expect("answered");
            });
        }
    });
    assert_eq!(server.journal().len(), 8);
    // The requests that queued while one generation ran were generated together.
    assert!(
        server.largest_batch() > 1,
        "no two requests shared a generation"
    );
}

#[test]
fn lists_its_model() {
    let server = server(false);
    let mut resp = ureq::get(&format!("{}/v1/models", server.url()))
        .call()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["data"][0]["id"], "sandgym-policy");
}

#[test]
fn bad_requests_get_clear_4xx_errors() {
    let server = server(false);
    let url = format!("{}/v1/chat/completions", server.url());
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        ("{not json", 400, "invalid JSON"),
        (r#"{"model": "sandgym-policy", "messages": []}"#, 400, "must not be empty"),
        (&json!({"model": "gpt-9", "messages": user}).to_string(), 404, "not served here"),
        (&json!({"messages": user, "stream": true}).to_string(), 400, "streaming"),
        (&json!({"messages": user, "tools": [{"type": "retrieval", "function": {"name": "x"}}]}).to_string(), 400, "not supported"),
        (&json!({"messages": user, "tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": 7}}}]}).to_string(), 400, "JSON Schema"),
        (&json!({"messages": [{"role": "wizard", "content": "hi"}]}).to_string(), 400, "role"),
        (&json!({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "x", "arguments": "[1"}}]}]}).to_string(), 400, "not a JSON object"),
        (&json!({"messages": user, "temperature": -1}).to_string(), 400, "temperature"),
        (&json!({"messages": user, "n": -1}).to_string(), 400, "n = 1"),
        (&json!({"messages": user, "n": 2.5}).to_string(), 400, "n = 1"),
        (&json!({"messages": user, "n": "3"}).to_string(), 400, "n = 1"),
        (&json!({"messages": user, "max_tokens": 0}).to_string(), 400, "max_tokens"),
    ];
    for (body, status, needle) in cases {
        let (got, answer) = post(&url, body);
        assert_eq!(got, status, "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{body}: {message}");
    }
    // n = 1 spelled out is fine.
    let (status, answer) = post(
        &url,
        &json!({"messages": user, "n": 1, "max_tokens": 4}).to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    let (status, _) = post(&format!("{}/v2/nothing", server.url()), "{}");
    assert_eq!(status, 404);
    let client = ChatClient::new(&HarnessConfig::new(format!("{}/v1", server.url())));
    let err = client
        .complete(&ChatRequest {
            model: "other".into(),
            messages: vec![Message::user("x")],
            ..ChatRequest::default()
        })
        .unwrap_err();
    assert!(
        matches!(err, HarnessError::Status { status: 404, .. }),
        "{err}"
    );
}

#[test]
fn a_prompt_too_long_for_any_tokenisation_is_refused_before_tokenising() {
    let server = server(false);
    let url = format!("{}/v1/chat/completions", server.url());
    // 15 MB of text: more bytes than the context's tokens can hold at the longest token.
    let huge = "word ".repeat(3_000_000);
    let body = json!({"messages": [{"role": "user", "content": huge}]}).to_string();
    let (status, answer) = post(&url, &body);
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("more than 4096 tokens"), "{message}");
}

#[test]
fn a_schema_that_fails_while_decoding_fails_only_its_own_request() {
    // A wide batch window so both requests are generated in one call.
    let (model, tok) = tiny_policy();
    let config = sandgym_proxy::ServerConfig {
        batch_window: std::time::Duration::from_millis(500),
        ..server_config(false)
    };
    let server = PolicyServer::start(model, tok, config).unwrap();
    let url = format!("{}/v1/chat/completions", server.url());
    // The pattern compiles, but its lexer explodes as soon as decoding reaches the tool call,
    // which `required` makes the only way out of the (empty) thought.
    let bad = json!({
        "messages": [{"role": "user", "content": "hi"}], "seed": 1, "max_tokens": 48,
        "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "p", "parameters": {
            "type": "object", "properties": {"s": {"type": "string", "pattern": "^(x{10000}){10000}$"}},
            "required": ["s"]}}}]
    })
    .to_string();
    let good = json!({"messages": [{"role": "user", "content": "What is alpha?"}], "seed": 1,
        "max_tokens": 48, "tools": serde_json::to_value(FakeTools::new(10).definitions()).unwrap()})
    .to_string();
    let answers = std::thread::scope(|s| {
        let bad = s.spawn(|| post(&url, &bad));
        let good = s.spawn(|| post(&url, &good));
        (bad.join().unwrap(), good.join().unwrap())
    });
    let ((bad_status, bad_answer), (good_status, good_answer)) = answers;
    assert_eq!(good_status, 200, "{good_answer}");
    assert_eq!(bad_status, 400, "{bad_answer}");
    let message = bad_answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("tool schema"), "{message}");
}

/// A long request (1,500 forced characters, one per step) and, 50 ms into it, a short one
/// (4 tokens), on a server with one generating thread and the express lane `express`: the
/// long answer's token count, the tokens generated when the short answer came, and the
/// server.
fn short_behind_long(express: Express) -> (u64, u64, PolicyServer) {
    let (model, tok) = tiny_policy();
    let config = sandgym_proxy::ServerConfig {
        concurrent_batches: 1,
        express,
        ..server_config(false)
    };
    let server = PolicyServer::start(model, tok, config).unwrap();
    let url = format!("{}/v1/chat/completions", server.url());
    // Whichever tool it picks, its argument is 1,500 forced characters, fed one per step.
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {"s": {"type": "string", "pattern": "^x{1500}$"}},
            "required": ["s"]}}})
    };
    let long = json!({
        "messages": [{"role": "user", "content": "hi"}], "seed": 1, "max_tokens": 4096,
        "tool_choice": "required", "tools": [tool("long_a"), tool("long_b")]
    })
    .to_string();
    let short = json!({"messages": [{"role": "user", "content": "What is alpha?"}],
        "seed": 2, "max_tokens": 4})
    .to_string();
    let ((long_status, long_answer), (short_status, short_answer, generated_before)) =
        std::thread::scope(|s| {
            let long = s.spawn(|| post(&url, &long));
            std::thread::sleep(std::time::Duration::from_millis(50));
            let short = s.spawn(|| {
                let (status, answer) = post(&url, &short);
                // Tokens of the answers generated so far: the long one's count once it is done.
                (status, answer, server.generated_tokens())
            });
            (long.join().unwrap(), short.join().unwrap())
        });
    assert_eq!(long_status, 200, "{long_answer}");
    assert_eq!(short_status, 200, "{short_answer}");
    let long_tokens = long_answer["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(
        long_tokens > 1000,
        "the long request made {long_tokens} tokens"
    );
    assert!(
        generated_before < long_tokens,
        "the short request was answered after the long one ({generated_before} tokens generated)"
    );
    (long_tokens, generated_before, server)
}

#[test]
fn a_short_request_joins_a_running_batch_instead_of_waiting_for_it() {
    // No express lane and one generating thread: the short request can only be answered
    // early by joining the long request's batch between its decode steps.
    let off = Express {
        tokens: 0,
        ..Express::default()
    };
    let (_, _, server) = short_behind_long(off);
    assert_eq!(server.largest_batch(), 2);
    assert_eq!(server.express_steps(), 0);
}

#[test]
fn a_short_request_beside_a_long_batch_decodes_in_the_express_lane_while_the_long_one_waits() {
    let express = Express {
        tokens: 4,
        wait: 1000,
    };
    let (_, _, server) = short_behind_long(express);
    // Its steps (at most its 4 tokens and those its grammar forces) ran in the express lane
    // alone.
    let steps = server.express_steps();
    assert!((1..200).contains(&steps), "{steps} express steps");
    assert_eq!(server.largest_batch(), 2);
    // A budget over the lane's bound is not short: it joins the long batch.
    let (_, _, server) = short_behind_long(Express {
        tokens: 3,
        wait: 1000,
    });
    assert_eq!(server.express_steps(), 0);
}

#[test]
fn a_long_batch_waits_for_the_express_lane_at_most_its_bound_in_a_row() {
    // A bound of 0: the express lane never runs alone, the long batch steps beside it every
    // time, and the short request is still answered first.
    let (_, _, server) = short_behind_long(Express { tokens: 4, wait: 0 });
    assert_eq!(server.express_steps(), 0);
    // A bound of 1: the lanes take turns.
    let (_, _, server) = short_behind_long(Express { tokens: 4, wait: 1 });
    assert!(server.express_steps() > 0);
}

#[test]
fn a_conversations_next_call_reuses_the_last_ones_keys_and_values() {
    let tools = FakeTools::new(10).definitions();
    let (model, tok) = tiny_policy();
    let cached = PolicyServer::start(model.clone(), tok.clone(), server_config(true)).unwrap();
    let uncached = PolicyServer::start(
        model,
        tok,
        sandgym_proxy::ServerConfig {
            prefix_cache_bytes: 0,
            ..server_config(true)
        },
    )
    .unwrap();
    // Two turns of one conversation, the same on both servers: each answer goes back into
    // the conversation with a tool result after it.
    let mut answers = Vec::new();
    for server in [&cached, &uncached] {
        let client = ChatClient::new(&HarnessConfig::new(format!("{}/v1", server.url())));
        let mut messages = vec![
            Message::system("You answer questions."),
            Message::user("What is alpha? Look it up, then answer."),
        ];
        let mut tokens = Vec::new();
        for turn in 0..3 {
            let request = ChatRequest {
                model: "sandgym-policy".into(),
                messages: messages.clone(),
                tools: tools.clone(),
                seed: Some(turn),
                max_tokens: Some(48),
                temperature: Some(1.0),
                ..ChatRequest::default()
            };
            let response = client.complete(&request).expect("a completion");
            let choice = &response.choices[0];
            tokens.push(choice.token_ids.clone().unwrap());
            let message = choice.message.clone();
            let call_id = message.tool_calls.first().map(|c| c.id.clone());
            messages.push(message);
            messages.push(match call_id {
                Some(id) => Message::tool(id, "alpha beta gamma delta: value 42"),
                None => Message::user("Look it up again."),
            });
        }
        answers.push(tokens);
    }
    assert_eq!(answers[0], answers[1], "the cache changed what was sampled");
    // Each call after the first continued the one before: its whole prompt and completion
    // (all but the last token, never fed) came from the cache.
    // Each call after the first continued the one before: at least its whole prompt came from
    // the cache, at most its prompt and its completion but the last token (never fed). (The
    // completion comes back as text, which the tokenizer may split otherwise.)
    let served = cached.journal();
    let stats = cached.prefix_stats();
    assert_eq!((stats.lookups, stats.hits), (3, 2), "{stats:?}");
    let least: usize = served[..2].iter().map(|s| s.prompt.len()).sum();
    let most: usize = served[..2]
        .iter()
        .map(|s| s.prompt.len() + s.completion.len() - 1)
        .sum();
    let reused = stats.reused_tokens as usize;
    assert!(
        (least..=most).contains(&reused),
        "{stats:?}: {least}..={most}"
    );
    assert_eq!(
        stats.entries, 1,
        "each turn's entry replaces the one before"
    );
    assert_eq!(uncached.prefix_stats().hits, 0);
}
