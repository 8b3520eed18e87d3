//! A guest that answers every call of the env interface with arbitrary values — text that is
//! valid JSON and text that is not, deeply nested or past the host's output limit; rewards
//! made of random bits (NaN, infinities, subnormals); random statuses; errors of any kind
//! with garbage details; random snapshot bytes. Every choice is drawn from its configuration:
//! `{"seed": N}` seeds a generator, so a host test can replay a case
//! (envs/sandbox/tests/all/guests.rs, `garbage`); `{"tape": "<hex>"}` takes the choices from
//! those bytes, eight at a time, so that a coverage-guided fuzzer's mutations of the tape become
//! the guest's answers (fuzz/fuzz_targets/wit.rs); when the tape runs out, the generator seeded
//! by its length goes on. Either way it fuzzes the host side of the WIT boundary, which must
//! turn each answer into a value or a typed error. It implements the generated bindings
//! directly: `export_env!` would only ever send well-formed values.

use std::cell::{Cell, RefCell};

use sandgym_env_api::{EnvError, EnvId, EnvSpec, Observation, ToolSpec, WireError};
use sandgym_guest::{ErrorKind, StepResult, WitDone, WitError};

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0x9E37_79B9_7F4A_7C15) };
}

thread_local! {
    /// The configured tape's bytes not read yet (last byte first, so reading pops).
    static TAPE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The next choice: the tape's next eight bytes (little-endian, zero-padded at its end), or,
/// once the tape is empty, the next random number.
fn next() -> u64 {
    let taped = TAPE.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_empty() {
            return None;
        }
        let mut word = [0u8; 8];
        for byte in word.iter_mut() {
            match t.pop() {
                Some(b) => *byte = b,
                None => break,
            }
        }
        Some(u64::from_le_bytes(word))
    });
    taped.unwrap_or_else(splitmix)
}

/// The tape in `{"tape": "<hex>"}`: its bytes, or `None` where there is none or it is not hex.
fn tape(config: &serde_json::Value) -> Option<Vec<u8>> {
    let hex = config.get("tape")?.as_str()?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    hex.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// SplitMix64: the next random number.
fn splitmix() -> u64 {
    RNG.with(|s| {
        let z = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(z);
        let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

fn below(n: u64) -> u64 {
    next() % n.max(1)
}

fn bytes(max: u64) -> Vec<u8> {
    (0..below(max)).map(|_| next() as u8).collect()
}

/// A spec the host accepts: one tool `x` without parameters.
fn good_spec() -> String {
    let spec = EnvSpec::new(EnvId::new("garbage", 0).expect("valid id"))
        .with_description("Answers with arbitrary values.")
        .with_tool(ToolSpec::new("x", "Anything."));
    serde_json::to_string(&spec).expect("a spec serialises")
}

/// Arbitrary text for a JSON field: mostly broken, sometimes whole.
fn text() -> String {
    match below(12) {
        0 => String::new(),
        1 => String::from_utf8_lossy(&bytes(64)).into_owned(),
        2 => "[".repeat(below(20_000) as usize),
        3 => {
            let good = serde_json::to_string(&Observation::new("cut")).expect("serialises");
            good[..below(good.len() as u64) as usize].to_owned()
        }
        4 => [
            "null",
            "1e999",
            "\"\\ud800\"",
            "[]",
            "{}",
            "{\"content\": 5}",
            "true",
        ][below(7) as usize]
            .to_owned(),
        5 => "x".repeat(below(3 << 20) as usize),
        6 => {
            let mut o = Observation::new("odd info");
            o.info.insert("success".into(), serde_json::json!("yes"));
            o.info
                .insert("response_schema".into(), serde_json::json!(5));
            o.info
                .insert("reward_parts".into(), serde_json::json!([1, 2]));
            serde_json::to_string(&o).expect("serialises")
        }
        7 => format!(
            "{{\"content\": \"{}\"}}",
            "\u{FFFD}".repeat(below(100) as usize)
        ),
        _ => {
            serde_json::to_string(&Observation::new(format!("obs {}", next()))).expect("serialises")
        }
    }
}

fn error() -> WitError {
    let kind = [
        ErrorKind::InvalidAction,
        ErrorKind::Usage,
        ErrorKind::Episode,
        ErrorKind::Other,
    ][below(4) as usize];
    let detail = if below(2) == 0 {
        text()
    } else {
        WireError::from(&EnvError::InvalidOptions {
            reason: format!("garbage {}", next()),
        })
        .to_json()
    };
    WitError { kind, detail }
}

fn status() -> WitDone {
    [WitDone::Running, WitDone::Terminated, WitDone::Truncated][below(3) as usize]
}

fn number() -> f64 {
    match below(3) {
        0 => f64::from_bits(next()),
        1 => [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 2.0,
            -0.0,
        ][below(5) as usize],
        _ => (below(2001) as f64 - 1000.0) / 1000.0,
    }
}

#[cfg(target_family = "wasm")]
struct Garbage;

#[cfg(target_family = "wasm")]
impl sandgym_guest::Guest for Garbage {
    fn init(config: String) -> Result<(), WitError> {
        let config = serde_json::from_str::<serde_json::Value>(&config).unwrap_or_default();
        let seed = match tape(&config) {
            Some(mut bytes) => {
                let seed = bytes.len() as u64;
                bytes.reverse();
                TAPE.with(|t| *t.borrow_mut() = bytes);
                seed
            }
            None => config
                .get("seed")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
        };
        RNG.with(|s| s.set(seed));
        if below(10) == 0 { Err(error()) } else { Ok(()) }
    }
    fn spec() -> String {
        if below(4) == 0 { text() } else { good_spec() }
    }
    fn reset(_seed: u64, _options: String) -> Result<String, WitError> {
        if below(5) == 0 {
            Err(error())
        } else {
            Ok(text())
        }
    }
    fn observe() -> String {
        text()
    }
    fn step(_action: String) -> Result<StepResult, WitError> {
        if below(4) == 0 {
            return Err(error());
        }
        Ok(StepResult {
            observation: text(),
            reward: number(),
            status: status(),
        })
    }
    fn reward() -> f64 {
        number()
    }
    fn done() -> WitDone {
        status()
    }
    fn snapshot() -> Result<Vec<u8>, WitError> {
        if below(3) == 0 {
            Err(error())
        } else {
            Ok(bytes(4096))
        }
    }
    fn restore(_state: Vec<u8>) -> Result<(), WitError> {
        if below(2) == 0 { Err(error()) } else { Ok(()) }
    }
}

#[cfg(target_family = "wasm")]
sandgym_guest::bindings::__export_env_guest!(Garbage with_types_in sandgym_guest::bindings);
