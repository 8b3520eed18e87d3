//! The options every command that makes envs shares: `--env`, `--env-config`, `--env-hosts`,
//! and the help of `--reward`.

use sandgym::EnvTarget;
use sandgym::env_api;

/// The options that name an env on the command line: `--env ID|PATH.wasm|URL` and
/// `--env-config CONFIG` (flattened into every command that makes envs from them).
#[derive(Clone, Debug, clap::Args)]
pub struct EnvArgs {
    /// The env: a registered id (`sql-agent-v0`), the path of a guest component (`.wasm`),
    /// or a served env's URL (`ws://host:port`).
    #[arg(long)]
    pub env: String,
    /// The env's configuration: a JSON object, inline or in a file; `"@PATH"` strings in it
    /// are replaced by that file's contents (e.g. `{"tasks_jsonl": "@tasks.jsonl"}`).
    #[arg(long)]
    pub env_config: Option<String>,
    /// Servers of the env (`URL,URL,…`, OpenEnv's protocol, e.g. `sandgym serve-env` on other
    /// machines): a batch of envs is spread over them, one session each in turn; `--env` is
    /// then the id they serve. A host that fails ends only its own sessions' episodes.
    #[arg(long, value_delimiter = ',')]
    pub env_hosts: Vec<String>,
}

impl EnvArgs {
    /// The target they name.
    pub fn target(&self) -> env_api::Result<EnvTarget> {
        EnvTarget::parse(&self.env, self.env_config.as_deref())?.with_hosts(self.env_hosts.clone())
    }
}

/// The long help of `--reward` on `run`, `eval`, `train` and `check` (one text for all).
pub const REWARD_HELP: &str = "A reward composed around the env's own: a JSON list of terms \
(env, success, length, tool_budget, forbidden, format, info, final, plugin; each with a \
weight), or an object with the terms and a clip range; inline or in a file. A reward plugin \
alone is PATH.wasm or a bundled plugin's name (rubric). Each step's terms are shown in its \
observation's info.reward_terms (a plugin's parts in info.reward_parts). A training run \
records it (with each plugin's SHA-256): resume, eval --checkpoint and the closing table use \
it too.";
