//! A guest env that attacks its sandbox when asked: `attack {"kind": "..."}` loops forever,
//! allocates without bound, recurses, panics, returns a huge observation or error, blocks in
//! WASI (sleeps, clock subscriptions, stdin), floods stderr, leaks handles, returns a
//! non-finite reward, or tries to reach the filesystem, network, clock, environment and OS
//! randomness. `ping` answers normally. With the configuration `{"init": "spin"}` it never finishes
//! being made; with `{"spec": "absurd-bounds"}` its spec declares a tool whose parameters no host could build an example of. The sandbox's tests
//! drive it (see envs/sandbox/tests).

use std::hint::black_box;

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Observation, ResetOptions, Result,
    Schema, ToolSpec, validate_action,
};
use serde_json::{Map, Value};

const ATTACKS: &[&str] = &[
    "loop",
    "sleep",
    "sleep-loop",
    "clock-loop",
    "poll-duration",
    "poll-instant",
    "stdin",
    "chatter",
    "handles",
    "nan-reward",
    "inf-reward",
    "huge-error",
    "over-limit-output",
    "alloc",
    "recurse",
    "recurse-big-frames",
    "panic",
    "big-output",
    "open-file",
    "create-file",
    "socket",
    "clock",
    "env-vars",
    "random",
];

struct Hostile {
    spec: EnvSpec,
    last: Observation,
    pings: u64,
    done: Done,
    reward: f64,
}

fn new(config: &Map<String, Value>) -> Result<Hostile> {
    let mut spec = EnvSpec::new(EnvId::new("hostile", 0).expect("valid id"))
        .with_description("Misbehaves on request.")
        .with_tool(ToolSpec::new("ping", "Answer pong."))
        .with_tool(ToolSpec::new("attack", "Misbehave.").with_parameters(
            Schema::object().property(
                "kind",
                Schema::string().with_enum(ATTACKS.iter().copied()),
                true,
            ),
        ));
    if config.get("init").and_then(Value::as_str) == Some("spin") {
        // Never returns: making the instance must end at the sandbox's init budget.
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
    match config.get("spec").and_then(Value::as_str) {
        None => {}
        Some("absurd-bounds") => {
            let huge = Schema::object()
                .property(
                    "text",
                    Schema::string().with_length(1_000_000_000_000_000, u64::MAX),
                    true,
                )
                .property(
                    "rows",
                    Schema::array(
                        Schema::array(Schema::integer()).with_items_range(1 << 40, u64::MAX),
                    )
                    .with_items_range(1 << 40, u64::MAX),
                    true,
                );
            spec = spec.with_tool(
                ToolSpec::new("absurd", "Asks for 10^15 characters.").with_parameters(huge),
            );
        }
        Some(other) => {
            return Err(EnvError::InvalidConfig {
                reason: format!("unknown spec {other}"),
            });
        }
    }
    Ok(Hostile {
        spec,
        last: Observation::default(),
        pings: 0,
        done: Done::Running,
        reward: 0.0,
    })
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        1 + black_box(recurse(black_box(n - 1)))
    }
}

#[inline(never)]
fn recurse_big(n: u64) -> u64 {
    let frame = black_box([n as u8; 16 * 1024]);
    if n == 0 {
        frame[0] as u64
    } else {
        frame[1] as u64 + black_box(recurse_big(black_box(n - 1)))
    }
}

fn denied(what: &str, e: std::io::Error) -> EnvError {
    EnvError::ActionRejected {
        reason: format!("{what} denied: {:?}", e.kind()),
    }
}

fn attack(env: &mut Hostile, kind: &str) -> Result<String> {
    use wasip2::clocks::monotonic_clock;
    const HOUR_NS: u64 = 3_600_000_000_000;
    match kind {
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(3600));
            Ok("slept".into())
        }
        "sleep-loop" => loop {
            std::thread::sleep(std::time::Duration::from_millis(1));
        },
        "clock-loop" => loop {
            black_box(std::time::Instant::now());
        },
        "poll-duration" => {
            monotonic_clock::subscribe_duration(HOUR_NS).block();
            Ok("polled".into())
        }
        "poll-instant" => {
            monotonic_clock::subscribe_instant(u64::MAX).block();
            Ok("polled".into())
        }
        "stdin" => {
            use std::io::Read;
            let mut buf = [0u8; 16];
            let n = std::io::stdin().read(&mut buf).unwrap_or(0);
            Ok(format!("stdin {n}"))
        }
        "chatter" => {
            eprintln!("{}", "chatter ".repeat(62));
            Ok("chatted".into())
        }
        "handles" => loop {
            std::mem::forget(monotonic_clock::subscribe_duration(0));
        },
        "nan-reward" => {
            env.reward = f64::NAN;
            Ok("nan".into())
        }
        "inf-reward" => {
            env.reward = f64::INFINITY;
            Ok("inf".into())
        }
        "huge-error" => Err(EnvError::ActionRejected {
            reason: "x".repeat(8 << 20),
        }),
        "over-limit-output" => Ok("y".repeat((1 << 20) + 1000)),
        "loop" => {
            let mut x = 0u64;
            loop {
                x = black_box(x.wrapping_add(1));
            }
        }
        "alloc" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                black_box(&hoard);
            }
        }
        "recurse" => Ok(recurse(u64::MAX).to_string()),
        "recurse-big-frames" => Ok(recurse_big(u64::MAX).to_string()),
        "panic" => panic!("hostile guest panics on purpose"),
        "big-output" => Ok("x".repeat(8 << 20)),
        "open-file" => std::fs::read_to_string("/etc/passwd").map_err(|e| denied("open-file", e)),
        "create-file" => std::fs::write("escape.txt", b"out")
            .map(|_| "created".into())
            .map_err(|e| denied("create-file", e)),
        "socket" => std::net::TcpStream::connect("127.0.0.1:80")
            .map(|_| "connected".into())
            .map_err(|e| denied("socket", e)),
        "clock" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            Ok(format!("clock {now}"))
        }
        "env-vars" => Ok(format!("env {:?}", std::env::vars().collect::<Vec<_>>())),
        "random" => {
            use std::collections::hash_map::RandomState;
            use std::hash::BuildHasher;
            Ok(format!("random {}", RandomState::new().hash_one(1u8)))
        }
        other => Err(EnvError::ActionRejected {
            reason: format!("unknown attack {other}"),
        }),
    }
}

impl Env for Hostile {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, _seed: u64, _options: &ResetOptions) -> Result<Observation> {
        self.pings = 0;
        self.reward = 0.0;
        self.done = Done::Running;
        self.last = Observation::new("Misbehave with `attack`, or `ping`.");
        Ok(self.last.clone())
    }

    fn observe(&self) -> Observation {
        self.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        if self.done.is_done() {
            return Err(EnvError::EpisodeOver { done: self.done });
        }
        validate_action(&self.spec.tools, action)?;
        let text = match &action.body {
            ActionBody::Response(_) => {
                self.done = Done::Terminated;
                "bye".to_owned()
            }
            ActionBody::ToolCall(call) if call.tool_name == "ping" => {
                self.pings += 1;
                format!("pong {}", self.pings)
            }
            ActionBody::ToolCall(call) if call.tool_name == "absurd" => "absurd".to_owned(),
            ActionBody::ToolCall(call) => {
                let kind = call.parameters["kind"].as_str().unwrap_or("").to_owned();
                attack(self, &kind)?
            }
        };
        self.last = Observation::new(text);
        Ok(self.last.clone())
    }

    fn reward(&self) -> f64 {
        self.reward
    }

    fn done(&self) -> Done {
        self.done
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&(self.pings, self.done, &self.last)).expect("serialisable"))
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        (self.pings, self.done, self.last) =
            serde_json::from_slice(snapshot).map_err(|e| EnvError::Snapshot {
                reason: format!("not a hostile-v0 snapshot: {e}"),
            })?;
        Ok(())
    }
}

sandgym_guest::export_env!(new);
