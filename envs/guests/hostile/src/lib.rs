//! A guest env that attacks its sandbox when asked: `attack {"kind": "..."}` loops forever,
//! allocates without bound, recurses, panics, returns a huge observation, or tries to reach the
//! filesystem, network, clock, environment and OS randomness. `ping` answers normally.
//! The sandbox's tests drive it (see envs/sandbox/tests).

use std::hint::black_box;

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Observation, ResetOptions, Result,
    Schema, ToolSpec, validate_action,
};
use serde_json::{Map, Value};

const ATTACKS: [&str; 12] = [
    "loop",
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
}

fn new(_config: &Map<String, Value>) -> Result<Hostile> {
    let spec = EnvSpec::new(EnvId::new("hostile", 0).expect("valid id"))
        .with_description("Misbehaves on request.")
        .with_tool(ToolSpec::new("ping", "Answer pong."))
        .with_tool(
            ToolSpec::new("attack", "Misbehave.").with_parameters(
                Schema::object().property("kind", Schema::string().with_enum(ATTACKS), true),
            ),
        );
    Ok(Hostile {
        spec,
        last: Observation::default(),
        pings: 0,
        done: Done::Running,
    })
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == 0 { 0 } else { 1 + black_box(recurse(black_box(n - 1))) }
}

#[inline(never)]
fn recurse_big(n: u64) -> u64 {
    let frame = black_box([n as u8; 16 * 1024]);
    if n == 0 { frame[0] as u64 } else { frame[1] as u64 + black_box(recurse_big(black_box(n - 1))) }
}

fn denied(what: &str, e: std::io::Error) -> EnvError {
    EnvError::ActionRejected {
        reason: format!("{what} denied: {:?}", e.kind()),
    }
}

fn attack(kind: &str) -> Result<String> {
    match kind {
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
        "open-file" => std::fs::read_to_string("/etc/passwd")
            .map_err(|e| denied("open-file", e)),
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
            ActionBody::ToolCall(call) => attack(call.parameters["kind"].as_str().unwrap_or(""))?,
        };
        self.last = Observation::new(text);
        Ok(self.last.clone())
    }

    fn reward(&self) -> f64 {
        0.0
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
