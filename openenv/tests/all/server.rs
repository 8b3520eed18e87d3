//! The env server speaks OpenEnv's protocol over WebSocket and HTTP, and every bad frame,
//! body, client or env gets a typed error without taking the server down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{Action, BoxEnv, Done, Env, EnvSpec, Observation, ResetOptions};
use sandgym_openenv::{EnvFactory, EnvServer, ServeConfig, ServeError};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Guess-number in `1..=8` that panics when asked to guess 13 (an env with a bug), and takes
/// a second to guess 12 (a slow call: [`SLOW_STARTED`], then [`SLOW_FINISHED`]).
struct Buggy(GuessNumber);

static SLOW_STARTED: AtomicBool = AtomicBool::new(false);
static SLOW_FINISHED: AtomicBool = AtomicBool::new(false);

impl Env for Buggy {
    fn spec(&self) -> &EnvSpec {
        self.0.spec()
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> sandgym_env_api::Result<Observation> {
        self.0.reset(seed, options)
    }
    fn observe(&self) -> Observation {
        self.0.observe()
    }
    fn step(&mut self, action: &Action) -> sandgym_env_api::Result<Observation> {
        let n = action.tool_call().and_then(|c| c.parameters.get("number"));
        assert!(n != Some(&json!(13)), "thirteen is unlucky");
        if n == Some(&json!(12)) {
            SLOW_STARTED.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_secs(1));
            SLOW_FINISHED.store(true, Ordering::SeqCst);
        }
        self.0.step(action)
    }
    fn reward(&self) -> f64 {
        self.0.reward()
    }
    fn done(&self) -> Done {
        self.0.done()
    }
}

fn factory() -> EnvFactory {
    Arc::new(|| Ok(Box::new(Buggy(GuessNumber::with_max(8))) as BoxEnv))
}

fn start(config: ServeConfig) -> EnvServer {
    EnvServer::start(
        factory(),
        ServeConfig {
            listen: "127.0.0.1:0".into(),
            ..config
        },
    )
    .expect("server starts")
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(server: &EnvServer) -> Ws {
    let url = format!("ws://{}/ws", server.addr());
    tokio_tungstenite::connect_async(url)
        .await
        .expect("connects")
        .0
}

async fn recv(ws: &mut Ws) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return Some(serde_json::from_str(&t).unwrap()),
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(_) => return None,
            Err(_) => panic!("no answer in 10 s"),
        }
    }
}

async fn ask(ws: &mut Ws, message: Value) -> Value {
    ws.send(Message::text(message.to_string())).await.unwrap();
    recv(ws).await.expect("an answer")
}

fn code(answer: &Value) -> &str {
    assert_eq!(answer["type"], "error", "{answer}");
    answer["data"]["code"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_session_plays_an_episode_to_its_end() {
    let server = start(ServeConfig::default());
    let mut ws = connect(&server).await;
    let first = ask(
        &mut ws,
        json!({"type": "reset", "data": {"seed": 5, "episode_id": "e1"}}),
    )
    .await;
    assert_eq!(first["type"], "observation", "{first}");
    assert!(
        first["data"]["observation"]["content"]
            .as_str()
            .unwrap()
            .contains("between 1 and 8")
    );
    assert_eq!(first["data"]["done"], false);
    assert!(first["data"]["reward"].is_null());
    // Binary search, alternating the three action forms.
    let (mut lo, mut hi) = (1, 8);
    let mut steps = 0;
    let last = loop {
        let n = (lo + hi) / 2;
        let action = match steps % 3 {
            0 => {
                json!({"thought": "halve", "action": {"tool_name": "guess", "parameters": {"number": n}}})
            }
            1 => json!({"tool_name": "guess", "parameters": {"number": n}}),
            _ => json!({"type": "call_tool", "tool_name": "guess", "arguments": {"number": n}}),
        };
        let answer = ask(&mut ws, json!({"type": "step", "data": action})).await;
        steps += 1;
        assert_eq!(answer["type"], "observation", "{answer}");
        let data = &answer["data"];
        assert_eq!(data["observation"]["step"], steps);
        assert_eq!(
            data["observation"]["record"]["action"]["tool_name"],
            "guess"
        );
        assert_eq!(data["observation"]["record"]["episode"], "e1");
        match data["observation"]["content"].as_str().unwrap() {
            "higher" => lo = n + 1,
            "lower" => hi = n - 1,
            "correct" => break answer,
            other => panic!("unexpected {other}"),
        }
        assert!(steps < 8, "binary search over 8 takes at most 4 guesses");
    };
    assert_eq!(last["data"]["reward"], 1.0);
    assert_eq!(last["data"]["done"], true);
    assert_eq!(last["data"]["observation"]["ended"], "terminated");
    let state = ask(&mut ws, json!({"type": "state"})).await;
    assert_eq!(state["type"], "state");
    assert_eq!(state["data"]["step_count"], steps);
    assert_eq!(state["data"]["episode_id"], "e1");
    assert_eq!(state["data"]["seed"], 5);
    assert_eq!(state["data"]["done"], true);
    // The episode is over until the next reset.
    let over = ask(
        &mut ws,
        json!({"type": "step", "data": {"tool_name": "guess", "parameters": {"number": 1}}}),
    )
    .await;
    assert_eq!(code(&over), "EXECUTION_ERROR");
    let again = ask(&mut ws, json!({"type": "reset"})).await;
    assert_eq!(again["type"], "observation", "{again}");
    ws.send(Message::text(json!({"type": "close"}).to_string()))
        .await
        .unwrap();
    assert!(
        recv(&mut ws).await.is_none(),
        "the server ends the session on close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_typed_errors_and_the_session_goes_on() {
    let server = start(ServeConfig::default());
    let mut ws = connect(&server).await;
    let send_text = |text: &'static str| Message::text(text);
    let cases: [(Message, &str); 9] = [
        (send_text("{"), "INVALID_JSON"),
        (Message::binary(vec![1u8, 2, 3]), "INVALID_JSON"),
        (send_text("[1, 2]"), "VALIDATION_ERROR"),
        (send_text(r#"{"type": "jump"}"#), "UNKNOWN_TYPE"),
        (send_text(r#"{"type": "step"}"#), "VALIDATION_ERROR"),
        (
            send_text(r#"{"type": "reset", "data": {"seed": -3}}"#),
            "VALIDATION_ERROR",
        ),
        (
            send_text(r#"{"type": "reset", "data": {"sead": 3}}"#),
            "VALIDATION_ERROR",
        ),
        (
            send_text(r#"{"type": "state", "extra": 1}"#),
            "VALIDATION_ERROR",
        ),
        // Stepping before any reset is the env's contract error.
        (
            send_text(
                r#"{"type": "step", "data": {"tool_name": "guess", "parameters": {"number": 2}}}"#,
            ),
            "EXECUTION_ERROR",
        ),
    ];
    for (message, expected) in cases {
        let shown = format!("{message:?}");
        ws.send(message).await.unwrap();
        let answer = recv(&mut ws).await.expect("an answer");
        assert_eq!(code(&answer), expected, "{shown}: {answer}");
        assert!(!answer["data"]["message"].as_str().unwrap().is_empty());
    }
    let reset = ask(&mut ws, json!({"type": "reset", "data": {"seed": 1}})).await;
    assert_eq!(reset["type"], "observation");
    // Actions the env rejects: an unknown tool, parameters outside the tool's schema.
    for bad in [
        json!({"tool_name": "fly"}),
        json!({"tool_name": "guess", "parameters": {"number": "x"}}),
    ] {
        let answer = ask(&mut ws, json!({"type": "step", "data": bad})).await;
        assert_eq!(code(&answer), "VALIDATION_ERROR", "{answer}");
    }
    // The episode was left as it was: a good guess still counts as the first step.
    let ok = ask(
        &mut ws,
        json!({"type": "step", "data": {"tool_name": "guess", "parameters": {"number": 4}}}),
    )
    .await;
    assert_eq!(ok["data"]["observation"]["step"], 1, "{ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_that_panics_fails_its_request_and_the_next_reset_gets_a_fresh_env() {
    let server = start(ServeConfig::default());
    let mut ws = connect(&server).await;
    ask(&mut ws, json!({"type": "reset", "data": {"seed": 2}})).await;
    let boom = ask(
        &mut ws,
        json!({"type": "step", "data": {"tool_name": "guess", "parameters": {"number": 13}}}),
    )
    .await;
    assert_eq!(code(&boom), "EXECUTION_ERROR");
    assert!(
        boom["data"]["message"]
            .as_str()
            .unwrap()
            .contains("panicked"),
        "{boom}"
    );
    let reset = ask(&mut ws, json!({"type": "reset", "data": {"seed": 2}})).await;
    assert_eq!(reset["type"], "observation", "{reset}");
    let step = ask(
        &mut ws,
        json!({"type": "step", "data": {"tool_name": "guess", "parameters": {"number": 4}}}),
    )
    .await;
    assert_eq!(step["type"], "observation", "{step}");
}

/// Env calls share a bounded pool of threads (`env_threads`): with one, a second session's
/// step waits for the first one's slow step; `/health` never waits for it (a busy pod is
/// not taken for a dead one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_calls_share_a_bounded_pool_and_health_does_not_wait_for_it() {
    let server = start(ServeConfig {
        env_threads: 1,
        ..ServeConfig::default()
    });
    let (mut slow, mut quick) = (connect(&server).await, connect(&server).await);
    for ws in [&mut slow, &mut quick] {
        let reset = ask(ws, json!({"type": "reset", "data": {"seed": 1}})).await;
        assert_eq!(reset["type"], "observation", "{reset}");
    }
    let guess = |n: u32| {
        json!({"type": "step", "data": {"tool_name": "guess", "parameters": {"number": n}}})
            .to_string()
    };
    slow.send(Message::text(guess(12))).await.unwrap();
    while !SLOW_STARTED.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let health = format!("http://{}/health", server.addr());
    let (status, _) = tokio::task::spawn_blocking(move || http("GET", &health, None))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        !SLOW_FINISHED.load(Ordering::SeqCst),
        "/health waited for an env call"
    );
    quick.send(Message::text(guess(4))).await.unwrap();
    let answer = recv(&mut quick).await.expect("an answer");
    assert_eq!(answer["type"], "observation", "{answer}");
    assert!(
        SLOW_FINISHED.load(Ordering::SeqCst),
        "a second env call ran beside the first with one env thread"
    );
    assert!(recv(&mut slow).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_the_limit_are_refused_until_one_leaves() {
    let server = start(ServeConfig {
        max_sessions: 2,
        ..ServeConfig::default()
    });
    let mut a = connect(&server).await;
    let mut b = connect(&server).await;
    for ws in [&mut a, &mut b] {
        assert_eq!(
            ask(ws, json!({"type": "reset"})).await["type"],
            "observation"
        );
    }
    let mut c = connect(&server).await;
    let refused = recv(&mut c).await.expect("an error frame");
    assert_eq!(code(&refused), "CAPACITY_REACHED");
    assert_eq!(refused["data"]["max_sessions"], 2);
    assert!(
        recv(&mut c).await.is_none(),
        "the refused connection is closed"
    );
    a.close(None).await.unwrap();
    drop(a);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.active_sessions() > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut d = connect(&server).await;
    assert_eq!(
        ask(&mut d, json!({"type": "reset"})).await["type"],
        "observation"
    );
    assert_eq!(ask(&mut b, json!({"type": "state"})).await["type"], "state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_and_oversized_messages_are_closed() {
    let server = start(ServeConfig {
        idle_timeout: Duration::from_millis(300),
        max_message_bytes: 4096,
        ..ServeConfig::default()
    });
    let mut idle = connect(&server).await;
    let ended = recv(&mut idle).await.expect("an error frame");
    assert_eq!(code(&ended), "SESSION_ERROR");
    assert!(recv(&mut idle).await.is_none());

    let mut big = connect(&server).await;
    let huge = json!({"type": "reset", "data": {"episode_id": "x".repeat(10_000)}}).to_string();
    let _ = big.send(Message::text(huge)).await;
    assert!(
        recv(&mut big).await.is_none(),
        "an oversized message ends its connection"
    );
    // Everyone else is still served.
    let mut fine = connect(&server).await;
    assert_eq!(
        ask(&mut fine, json!({"type": "reset"})).await["type"],
        "observation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_lists_and_calls_the_env_tools_over_the_websocket() {
    let server = start(ServeConfig::default());
    let mut ws = connect(&server).await;
    let rpc = |id: u32, method: &str, params: Value| json!({"type": "mcp", "data": {"jsonrpc": "2.0", "id": id, "method": method, "params": params}});
    let list = ask(&mut ws, rpc(1, "tools/list", json!({}))).await;
    assert_eq!(list["type"], "mcp");
    assert_eq!(list["data"]["id"], 1);
    assert_eq!(list["data"]["result"]["tools"][0]["name"], "guess");
    assert!(list["data"]["result"]["tools"][0]["inputSchema"]["properties"]["number"].is_object());
    ask(&mut ws, json!({"type": "reset", "data": {"seed": 3}})).await;
    let call = ask(
        &mut ws,
        rpc(
            2,
            "tools/call",
            json!({"name": "guess", "arguments": {"number": 4}}),
        ),
    )
    .await;
    let text = call["data"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(["higher", "lower", "correct"].contains(&text), "{call}");
    let bad = ask(&mut ws, rpc(3, "tools/call", json!({"name": "fly"}))).await;
    assert_eq!(bad["data"]["result"]["isError"], true, "{bad}");
    let shapeless = ask(
        &mut ws,
        rpc(6, "tools/call", json!({"name": "guess", "arguments": 7})),
    )
    .await;
    assert_eq!(shapeless["data"]["error"]["code"], -32602, "{shapeless}");
    let odd = json!({"type": "call_tool", "tool_name": "guess", "arguments": [1]});
    let answer = ask(&mut ws, json!({"type": "step", "data": odd})).await;
    assert_eq!(code(&answer), "VALIDATION_ERROR", "{answer}");
    let unknown = ask(&mut ws, rpc(4, "tools/dance", json!({}))).await;
    assert_eq!(unknown["data"]["error"]["code"], -32601);
    let malformed = ask(&mut ws, json!({"type": "mcp", "data": {"id": 5}})).await;
    assert_eq!(malformed["data"]["error"]["code"], -32600);
    let state = ask(&mut ws, json!({"type": "state"})).await;
    assert_eq!(
        state["data"]["step_count"], 1,
        "only the good call stepped the env"
    );
}

fn http(method: &str, url: &str, body: Option<&str>) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        (_, Some(b)) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(b),
        (_, None) => agent.post(url).send_empty(),
    }
    .expect("request sent");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn the_http_endpoints_answer_as_openenv_does() {
    let server = start(ServeConfig::default());
    let url = |path: &str| format!("{}{path}", server.url());
    assert_eq!(
        http("GET", &url("/health"), None),
        (200, json!({"status": "healthy"}))
    );
    assert_eq!(
        http("GET", &url("/sessions"), None),
        (
            200,
            json!({"active_sessions": 0, "max_sessions": ServeConfig::default().max_sessions})
        )
    );
    let (status, meta) = http("GET", &url("/metadata"), None);
    assert_eq!(
        (status, meta["name"].as_str()),
        (200, Some("guess-number-v0"))
    );
    let (_, schema) = http("GET", &url("/schema"), None);
    let branches = schema["action"]["oneOf"].as_array().unwrap();
    assert_eq!(
        branches.len(),
        2,
        "one branch per tool and one for the response"
    );
    assert_eq!(
        branches[0]["properties"]["action"]["properties"]["tool_name"]["const"],
        "guess"
    );
    assert!(schema["observation"]["properties"]["content"].is_object());
    assert!(schema["state"]["properties"]["step_count"].is_object());
    let (_, openapi) = http("GET", &url("/openapi.json"), None);
    assert!(openapi["info"]["version"].is_string());
    assert!(openapi["paths"]["/ws"].is_object());
    let (status, state) = http("GET", &url("/state"), None);
    assert_eq!((status, &state["step_count"]), (200, &json!(0)));

    let (status, reset) = http("POST", &url("/reset"), None);
    assert_eq!(status, 200, "{reset}");
    assert_eq!(reset["done"], false);
    let (status, reset) = http("POST", &url("/reset"), Some(r#"{"seed": 4}"#));
    assert_eq!(status, 200, "{reset}");
    let step = r#"{"action": {"tool_name": "guess", "parameters": {"number": 4}}, "seed": 4}"#;
    let (status, answer) = http("POST", &url("/step"), Some(step));
    assert_eq!(status, 200, "{answer}");
    assert!(answer["reward"].is_number());
    assert_eq!(answer["observation"]["step"], 1);

    for bad in [
        "{",
        "[1]",
        r#"{"seed": 1}"#,
        r#"{"action": {"tool_name": "fly"}}"#,
        r#"{"action": {"tool_name": "guess", "parameters": {"number": "four"}}}"#,
        r#"{"action": 7}"#,
        r#"{"action": {"tool_name": "guess"}, "sead": 1}"#,
    ] {
        let (status, answer) = http("POST", &url("/step"), Some(bad));
        assert_eq!(status, 422, "{bad}: {answer}");
        assert!(answer["detail"].is_string(), "{answer}");
    }
    let (status, _) = http("POST", &url("/reset"), Some(r#"{"split": "dev"}"#));
    assert_eq!(status, 422);
    let (status, answer) = http("GET", &url("/nowhere"), None);
    assert_eq!((status, &answer["detail"]), (404, &json!("Not Found")));
    // A body over the limit (small, so that the client finishes writing it before the
    // server answers).
    let small = start(ServeConfig {
        max_message_bytes: 4096,
        ..ServeConfig::default()
    });
    let too_big = format!("{{\"pad\": \"{}\"}}", "x".repeat(10_000));
    let (status, _) = http("POST", &format!("{}/reset", small.url()), Some(&too_big));
    assert_eq!(status, 413, "a body over the limit");

    let list = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#;
    let (status, answer) = http("POST", &url("/mcp"), Some(list));
    assert_eq!(
        (status, &answer["result"]["tools"][0]["name"]),
        (200, &json!("guess"))
    );
    let call = r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "guess", "arguments": {"number": 4}, "seed": 4}}"#;
    let (_, answer) = http("POST", &url("/mcp"), Some(call));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, answer) = http("POST", &url("/mcp"), Some("not json"));
    assert_eq!(answer["error"]["code"], -32700);
}

#[test]
fn absurd_settings_are_refused() {
    for config in [
        ServeConfig {
            max_sessions: 0,
            ..ServeConfig::default()
        },
        ServeConfig {
            max_message_bytes: 10,
            ..ServeConfig::default()
        },
        ServeConfig {
            idle_timeout: Duration::ZERO,
            ..ServeConfig::default()
        },
        ServeConfig {
            env_threads: 0,
            ..ServeConfig::default()
        },
    ] {
        let e = EnvServer::start(factory(), config).unwrap_err();
        assert!(matches!(e, ServeError::Config(_)), "{e}");
    }
    let failing: EnvFactory = Arc::new(|| {
        Err(sandgym_env_api::EnvError::InvalidConfig {
            reason: "no such database".into(),
        })
    });
    let e = EnvServer::start(failing, ServeConfig::default()).unwrap_err();
    assert!(e.to_string().contains("no such database"), "{e}");
}

#[test]
fn a_remote_env_keeps_the_env_contract_over_the_protocol() {
    use sandgym_env_api::{ErrorKind, check_env};
    use sandgym_openenv::RemoteEnv;
    let server = start(ServeConfig::default());
    let url = format!("ws://{}", server.addr());
    let mut env = RemoteEnv::connect(&url, Duration::from_secs(30)).expect("connects");
    assert_eq!(env.spec(), &GuessNumber::with_max(8).spec().clone());
    let report = check_env(&mut env);
    assert!(report.is_ok(), "{report:?}");
    // Errors keep their class across the wire.
    env.reset(1, &ResetOptions::default()).unwrap();
    let e = env.step(&Action::tool("fly", json!({}))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidAction, "{e}");
    // An episode plays as locally: the same observations and rewards for the same seed.
    let mut local = GuessNumber::with_max(8);
    for seed in [0, 5] {
        let a = env.reset(seed, &ResetOptions::default()).unwrap();
        let b = local.reset(seed, &ResetOptions::default()).unwrap();
        assert_eq!(a.content, b.content);
        for n in 1..=8 {
            let guess = Action::tool("guess", json!({"number": n}));
            let (a, b) = (env.step(&guess).unwrap(), local.step(&guess).unwrap());
            assert_eq!(
                (a.content, env.reward(), env.done()),
                (b.content, local.reward(), local.done())
            );
            if local.done().is_done() {
                break;
            }
        }
    }
    drop(server);
    let e = env.reset(0, &ResetOptions::default()).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::Episode,
        "a server that is gone fails the call: {e}"
    );
    assert!(RemoteEnv::connect("ws://127.0.0.1:1", Duration::from_secs(5)).is_err());
}

#[test]
fn a_remote_env_opens_a_new_session_when_the_server_ended_an_idle_one() {
    use sandgym_openenv::RemoteEnv;
    let server = start(ServeConfig {
        idle_timeout: Duration::from_millis(200),
        ..ServeConfig::default()
    });
    let url = format!("ws://{}", server.addr());
    let mut env = RemoteEnv::connect(&url, Duration::from_secs(30)).expect("connects");
    let first = env.reset(4, &ResetOptions::default()).unwrap();
    let start = std::time::Instant::now();
    while server.active_sessions() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the idle session stayed open"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The server has closed the idle session; a step cannot go on, a reset starts afresh.
    assert!(
        env.step(&Action::tool("guess", json!({"number": 4})))
            .is_err()
    );
    let again = env
        .reset(4, &ResetOptions::default())
        .expect("a new session");
    assert_eq!(first.content, again.content);
    env.step(&Action::tool("guess", json!({"number": 4})))
        .expect("the new session plays");
}
