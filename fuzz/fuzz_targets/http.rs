//! What a client sends the policy server and the recording proxy, as bytes on a connection:
//! the input's first byte picks the server, the rest is written to a fresh connection to it
//! (request line, headers and body, however malformed).
//! Whatever arrives, the answer is an HTTP response or a closed connection — never a handler
//! panic (the server's "the handler failed" 500) — and afterwards both servers still answer a
//! well-formed request.
//!
//! The policy server serves the tiny Llama of the policy crate's parity fixtures; the proxy
//! forwards to it and records into a trace database in a temporary directory. Parts of the
//! stack catch panics by design (a handler's, in the HTTP layer), and the fuzzer's default
//! hook would abort on a caught one, so this target installs the standard hook and looks for
//! the 500 that a caught handler panic becomes.
#![no_main]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sandgym_policy::{Cpu, pretrained};
use sandgym_proxy::{PolicyServer, Proxy, ProxyConfig, ServerConfig};

#[path = "tiny_llama.rs"]
mod tiny_llama;

/// How long the fuzzer waits for the first byte of an answer, and between bytes, before it
/// drops the connection (a request still incomplete gets no answer until the server's own
/// head timeout, and a dropped connection is a client gone, which the servers also handle).
const WAIT: Duration = Duration::from_millis(300);

/// How long a well-formed request may take to be answered.
const ANSWER: Duration = Duration::from_secs(10);

/// What a handler panic becomes in the HTTP layer.
const HANDLER_FAILED: &str = "the handler failed";

struct Servers {
    policy: PolicyServer,
    proxy: Proxy,
}

fn servers() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        // libFuzzer's own `main` runs this target, not Rust's, which ignores SIGPIPE: a
        // server's vectored write (`writev`, which takes no MSG_NOSIGNAL) to a connection this
        // client already dropped would kill the process instead of failing with EPIPE, as it
        // does under `sandgym serve-policy` and `sandgym proxy`.
        // SAFETY: sets one signal's disposition to "ignore" before any server thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let _ = std::panic::take_hook();
        let root = std::env::temp_dir().join(format!("sandgym-fuzz-http-{}", std::process::id()));
        let hf = root.join("hf");
        tiny_llama::write_hf(&hf);
        let model =
            pretrained::load_hf::<Cpu>(&hf, &Default::default()).expect("the fixture loads");
        let config = ServerConfig {
            default_max_tokens: 16,
            ..ServerConfig::default()
        };
        let policy =
            PolicyServer::start(model.model, model.tokenizer, config).expect("the policy server");
        let proxy = Proxy::start(&ProxyConfig::new(policy.url()), &root.join("traces.db"))
            .expect("the proxy");
        Servers { policy, proxy }
    })
}

/// Whether `reply` holds a whole response: its head and as many body bytes as its
/// `content-length` says (the servers always send one).
fn complete(reply: &[u8]) -> bool {
    let Some(end) = reply.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&reply[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    reply.len() >= end + 4 + length
}

/// Writes `bytes` to a new connection to `addr` and reads the answer: until a whole response
/// has arrived, the server closes, or nothing has come for `wait`. Never half-closes: the
/// servers take a closed read side for a client gone.
fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Vec<u8> {
    let mut reply = Vec::new();
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, ANSWER) else {
        return reply;
    };
    let _ = stream.set_read_timeout(Some(wait));
    let _ = stream.set_write_timeout(Some(ANSWER));
    // A server that answers before reading everything (413, 431) may close mid-write.
    let _ = stream.write_all(bytes);
    let mut buf = [0u8; 4096];
    while !complete(&reply) {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
    reply
}

fn answers_models(addr: SocketAddr, who: &str) {
    let reply = exchange(
        addr,
        b"GET /v1/models HTTP/1.1\r\nhost: fuzz\r\nconnection: close\r\n\r\n",
        ANSWER,
    );
    assert!(
        reply.starts_with(b"HTTP/1.1 200"),
        "the {who} no longer answers: {}",
        String::from_utf8_lossy(&reply)
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let servers = servers();
    let (addr, who) = if pick % 2 == 0 {
        (servers.policy.addr(), "policy server")
    } else {
        (servers.proxy.addr(), "proxy")
    };
    let reply = exchange(addr, bytes, WAIT);
    let text = String::from_utf8_lossy(&reply);
    assert!(
        !text.contains(HANDLER_FAILED),
        "a request made the {who}'s handler panic: {text}"
    );
    answers_models(servers.policy.addr(), "policy server");
    answers_models(servers.proxy.addr(), "proxy");
});
