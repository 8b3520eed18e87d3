//! customer-service-v0 as a WebAssembly guest.

sandgym_guest::export_env!(sandgym_env_support::SupportEnv::from_config);
