//! Wrappers that add behaviour around any [`Env`](crate::Env) without changing it.

mod record_trajectory;
mod time_limit;

pub use record_trajectory::RecordTrajectory;
pub use time_limit::TimeLimit;
