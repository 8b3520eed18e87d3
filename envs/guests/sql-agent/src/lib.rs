//! sql-agent-v0 as a WebAssembly guest: GlueSQL runs inside the sandbox.

sandgym_guest::export_env!(sandgym_env_sql::SqlAgentEnv::from_config);
