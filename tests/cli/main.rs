//! The `sandgym` binary, run as a user runs it: one module per command or concern.

mod common;
mod deploy;
mod envs;
mod models;
mod new_env;
mod online;
mod openenv;
mod own_data;
mod proxy;
mod rewards;
mod train;
