//! A reward plugin that misbehaves as its configuration says, on the step given by `"at"`
//! (the episode's length, default 1): `{"attack": "loop"}` spins forever, `"alloc"` allocates
//! without bound, `"panic"` panics, `"nan"` / `"inf"` return a non-finite reward, `"range"`
//! returns a reward outside its declared range, `"error"` returns an error, `"huge-parts"`
//! returns a breakdown past any output limit, `"init-error"` refuses to be made. Other steps
//! score 0.5 with one part. The sandbox's tests drive it.

use std::hint::black_box;

use sandgym_reward_guest::{RewardPlugin, Score, StepRecord};
use serde_json::{Map, Value};

struct Hostile {
    attack: String,
    at: usize,
}

fn new(config: &Map<String, Value>) -> Result<Hostile, String> {
    let attack = config
        .get("attack")
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_owned();
    if attack == "init-error" {
        return Err("this plugin refuses to be made".into());
    }
    let at = config.get("at").and_then(Value::as_u64).unwrap_or(1) as usize;
    Ok(Hostile { attack, at })
}

impl RewardPlugin for Hostile {
    fn name(&self) -> String {
        "hostile".into()
    }

    fn range(&self) -> (f64, f64) {
        (0.0, 1.0)
    }

    fn score(&mut self, episode: &[StepRecord], _: &Map<String, Value>) -> Result<Score, String> {
        if episode.len() != self.at {
            return Ok(Score::new(0.5).with_part("steady", 0.5));
        }
        Ok(match self.attack.as_str() {
            "loop" => {
                let mut n = 0u64;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("the hostile reward plugin panics on purpose"),
            "nan" => Score::new(f64::NAN),
            "inf" => Score::new(f64::INFINITY),
            "range" => Score::new(7.0),
            "error" => return Err("the hostile reward plugin fails on purpose".into()),
            "huge-parts" => {
                let mut score = Score::new(0.5);
                for i in 0..200_000 {
                    score = score.with_part(format!("part-{i:08}-{}", "x".repeat(64)), 0.0);
                }
                score
            }
            _ => Score::new(0.5).with_part("steady", 0.5),
        })
    }
}

sandgym_reward_guest::export_reward!(new);
