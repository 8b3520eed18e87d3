//! Hostile clients on loopback: idle and slow connections, unbounded heads, lying lengths and
//! malformed framing. Whatever they do, a normal request is answered promptly and every bad one
//! gets its own 4xx (SECURITY.md lists the limits).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sandgym_proxy::http::{self, HttpLimits, Server};
use sandgym_proxy::{PolicyServer, Proxy, ProxyConfig};
use serde_json::json;

use crate::common::{Canned, server_config, temp_dir, tiny_policy};

fn echo(limits: HttpLimits) -> Server {
    Server::start_with("127.0.0.1:0", limits, |request| {
        http::Response::json(
            200,
            &json!({"method": request.method, "path": request.path, "bytes": request.body.len()}),
        )
    })
    .expect("bind")
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Sends `raw` on a fresh connection and reads the answer; returns its status and text.
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
    let mut stream = connect(addr);
    stream.write_all(raw).unwrap();
    read_answer(&mut stream)
}

/// Reads until the server closes the connection or the answer's `Content-Length` is complete.
fn read_answer(stream: &mut TcpStream) -> (u16, String) {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&answer);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head.lines().find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .and_then(|v| v.trim().parse::<usize>().ok())
                    });
                    if length.is_some_and(|n| body.len() >= n) {
                        break;
                    }
                }
            }
            Err(e) => panic!(
                "no answer: {e} (so far: {:?})",
                String::from_utf8_lossy(&answer)
            ),
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    (status, text)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
    )
}

/// Lets this process open the sockets the tests hold: both ends of every connection are
/// here, and the tests run in parallel (about 10,000 descriptors at most).
fn raise_descriptor_limit() {
    const NEEDED: libc::rlim_t = 16_384;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < NEEDED {
            limit.rlim_cur = NEEDED.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    assert!(
        limit.rlim_cur >= NEEDED,
        "these tests hold thousands of connections: raise the open-file limit (ulimit -Hn) to {NEEDED}"
    );
}

/// Opens `n` connections that send nothing, or half a request head when `slow`, then gives the
/// server a moment to take them off the kernel's accept queue (a request arriving while that
/// queue is full waits for the kernel's SYN retry, a second, whatever the server does).
fn hold(addr: SocketAddr, n: usize, slow: bool) -> Vec<TcpStream> {
    raise_descriptor_limit();
    let held = (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(addr).expect("connect");
            if slow {
                let _ = s.write_all(format!("POST /x{i} HTTP/1.1\r\nhost: x\r\n").as_bytes());
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    held
}

fn answered_within(limit: Duration, f: impl FnOnce() -> (u16, String)) -> (u16, String) {
    let start = Instant::now();
    let answer = f();
    assert!(
        start.elapsed() < limit,
        "answered after {:?}",
        start.elapsed()
    );
    answer
}

#[test]
fn two_thousand_idle_and_slow_connections_starve_no_one() {
    let server = echo(HttpLimits::default());
    let _idle = hold(server.addr(), 1000, false);
    let _slow = hold(server.addr(), 1000, true);
    let (status, text) = answered_within(Duration::from_secs(1), || get(server.addr(), "/ok"));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""path":"/ok""#), "{text}");
}

#[test]
fn both_servers_answer_beside_two_thousand_idle_connections() {
    let (model, tokenizer) = tiny_policy();
    let policy = PolicyServer::start(model, tokenizer, server_config(false)).unwrap();
    let upstream = Canned::start();
    let proxy = Proxy::start(
        &ProxyConfig::new(&upstream.url),
        &temp_dir("hostile-idle").join("t.db"),
    )
    .unwrap();
    for addr in [policy.addr(), proxy.addr()] {
        let _idle = hold(addr, 2000, false);
        let (status, text) = answered_within(Duration::from_secs(1), || get(addr, "/v1/models"));
        assert_eq!(status, 200, "{addr}: {text}");
    }
}

#[test]
fn idle_heads_and_slow_bodies_time_out() {
    let server = echo(HttpLimits {
        head_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        ..HttpLimits::default()
    });
    // A connection that never sends its head is closed.
    let mut idle = connect(server.addr());
    let mut buf = [0u8; 64];
    let started = Instant::now();
    assert!(matches!(idle.read(&mut buf), Ok(0) | Err(_)));
    assert!(started.elapsed() < Duration::from_secs(10));
    // A body shorter than its Content-Length gets a 408 instead of hanging the connection.
    let (status, text) = exchange(
        server.addr(),
        b"POST /short HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nonly this",
    );
    assert_eq!(status, 408, "{text}");
}

#[test]
fn an_endless_request_line_is_cut_off_at_the_head_limit() {
    let server = echo(HttpLimits::default());
    let mut stream = connect(server.addr());
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0usize;
    let _ = stream.write_all(b"GET /");
    // The server stops reading (answering 431 and closing) long before 16 MiB.
    while sent < (16 << 20) {
        if stream.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(sent < (16 << 20), "the server kept reading {sent} bytes");
}

#[test]
fn framing_errors_get_their_own_status() {
    let server = echo(HttpLimits::default());
    let addr = server.addr();
    let too_big = format!(
        "POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        http::MAX_BODY + 1
    );
    assert_eq!(exchange(addr, too_big.as_bytes()).0, 413);
    let many_headers: String = (0..80).map(|i| format!("x-h{i}: v\r\n")).collect();
    let raw = format!("GET /x HTTP/1.1\r\nhost: x\r\n{many_headers}\r\n");
    assert_eq!(exchange(addr, raw.as_bytes()).0, 431);
    for raw in [
        "POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: +2\r\n\r\nab",
        "GARBAGE\r\n\r\n",
    ] {
        assert_eq!(exchange(addr, raw.as_bytes()).0, 400, "{raw:?}");
    }
    // Bare LF line endings and chunked bodies are understood.
    let (status, text) = exchange(addr, b"GET /lf HTTP/1.1\nhost: x\nconnection: close\n\n");
    assert_eq!(status, 200, "{text}");
    let (status, text) = exchange(
        addr,
        b"POST /chunked HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""bytes":3"#), "{text}");
    // A HEAD answer carries no body.
    let (status, text) = exchange(
        addr,
        b"HEAD /h HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(text.ends_with("\r\n\r\n"), "{text:?}");
}

#[test]
fn bodies_held_at_once_are_bounded() {
    let server = echo(HttpLimits {
        max_buffered_bodies: 1 << 20,
        max_body: 1 << 20,
        ..HttpLimits::default()
    });
    // One client announces a 1 MiB body and sends it slowly: the server's budget is held ...
    let mut hoarder = connect(server.addr());
    hoarder
        .write_all(b"POST /hoard HTTP/1.1\r\nhost: x\r\ncontent-length: 1048576\r\n\r\nxx")
        .unwrap();
    // ... so another body is refused at once instead of adding to it (once the server has
    // read the hoarder's head: asked again for up to 10 s),
    let raw = b"POST /more HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\nconnection: close\r\n\r\n0123456789";
    let started = Instant::now();
    let mut status = exchange(server.addr(), raw).0;
    while status != 503 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        status = exchange(server.addr(), raw).0;
    }
    assert_eq!(status, 503);
    // while a request without a body is still served.
    assert_eq!(get(server.addr(), "/ok").0, 200);
}

#[test]
fn a_handler_learns_that_its_client_has_gone() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (started_tx, started) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let started_tx = std::sync::Mutex::new(started_tx);
    let server = Server::start("127.0.0.1:0", move |request| {
        let _ = started_tx.lock().unwrap().send(());
        // Work until the client goes (at most 10 s), then say whether it went.
        let start = Instant::now();
        while !request.gone.is_set() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = tx.lock().unwrap().send(request.gone.is_set());
        http::Response::json(200, &json!({}))
    })
    .expect("bind");
    let mut client = connect(server.addr());
    client
        .write_all(b"POST /slow HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        .unwrap();
    started
        .recv_timeout(Duration::from_secs(20))
        .expect("the handler started");
    drop(client);
    let noticed = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the handler finished");
    assert!(noticed, "the handler worked on for a client that had gone");
}
