//! guess-number-v0 (the toy env of sandgym-env-api) as a WebAssembly guest.

sandgym_guest::export_env!(sandgym_env_api::toy::GuessNumber::from_config);
