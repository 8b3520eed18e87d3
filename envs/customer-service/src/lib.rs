//! `customer-service-v0`: an e-commerce support agent as a gymnasium-style environment.
//!
//! The agent resolves a customer's request (order status, late delivery, cancellation,
//! return, address change, refund question) with whitelisted tools over an orders database and
//! a knowledge base, following the written policy in its instruction. A deterministic simulated
//! customer states the problem and gives the order number and e-mail only when asked. As in
//! tau-bench, an episode succeeds when the final database matches the expected one and the
//! replies carry the required facts; policy violations cost reward ([`SupportReward`]).
//!
//! ```
//! use sandgym_env_api::{Agent, Env, ResetOptions, Split};
//! use sandgym_env_support::{SupportBaseline, SupportEnv};
//!
//! let mut env = SupportEnv::new();
//! let mut agent = SupportBaseline::default();
//! let mut obs = env.reset(7, &ResetOptions::split(Split::Test))?;
//! while !env.done().is_done() {
//!     obs = env.step(&agent.act(&obs))?;
//! }
//! assert!(obs.info.contains_key("success"));
//! # Ok::<(), sandgym_env_api::EnvError>(())
//! ```
#![deny(missing_docs)]

mod baseline;
mod customer;
mod env;
mod gold;
mod narrowing;
mod package;
mod tasks;
mod wordings;
mod world;

pub use baseline::SupportBaseline;
pub use env::{SupportConfig, SupportEnv, SupportReward};
pub use gold::SupportGold;
pub use narrowing::quoted_spans;
pub use package::PACKAGE;
pub use tasks::{
    BUNDLED_TASKS, Intent, Task, bundled as bundled_tasks, bundled_with as bundled_tasks_with,
    generate, generate_with,
};
pub use wordings::{TRAIN_WORDINGS, TrainWordings};
pub use world::{Customer, Email, KNOWLEDGE_BASE, Order, OrderStatus, POLICY, Return, World};
