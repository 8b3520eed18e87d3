//! The WebAssembly guests of `envs/guests`, built for `wasm32-wasip2` by this crate's build
//! script and embedded as bytes, so binaries and tests carry their guests with them.
//!
//! ```
//! let guest = sandgym_guest_artifacts::GUESS_NUMBER;
//! assert_eq!(guest.name, "guess-number");
//! assert_eq!(&guest.wasm[..4], b"\0asm");
//! ```
#![deny(missing_docs)]

/// One embedded guest component.
#[derive(Clone, Copy, Debug)]
pub struct Guest {
    /// The guest crate's folder name in `envs/guests`.
    pub name: &'static str,
    /// The component's bytes.
    pub wasm: &'static [u8],
}

impl Guest {
    /// The guest called `name`.
    pub fn find(name: &str) -> Option<Guest> {
        ALL.iter().copied().find(|g| g.name == name)
    }

    /// Whether the guest is a reward plugin ([`REWARDS`]) rather than an env.
    pub fn is_reward_plugin(&self) -> bool {
        REWARDS.iter().any(|g| g.name == self.name)
    }
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
