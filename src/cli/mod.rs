//! One module per subcommand.

pub mod bench;
pub mod check;
pub mod compare;
pub mod env_args;
pub mod envs;
pub mod eval;
pub mod learn;
pub mod model;
pub mod new;
pub mod proxy;
pub mod run;
pub mod serve;
pub mod serve_env;
pub mod sft;
pub mod train;
pub mod view;

/// `--prefix-cache-mib` in bytes; a count too large to address is refused.
pub fn prefix_cache_bytes(mib: usize) -> anyhow::Result<usize> {
    mib.checked_mul(1 << 20).ok_or_else(|| {
        anyhow::anyhow!("--prefix-cache-mib {mib} is more bytes than this machine can address")
    })
}
