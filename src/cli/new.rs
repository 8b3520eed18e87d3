//! `sandgym new env NAME`: a crate of one's own with an env in it, its WebAssembly export and
//! its tests, that builds and passes `sandgym check` as it is.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

/// Options of `sandgym new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// A crate with a new env: `NAME/Cargo.toml` (a `cdylib` for the sandbox and an `rlib`
    /// for tests), `NAME/src/lib.rs` (the env, `export_env!`, a `check_env` test).
    Env {
        /// The env's name: lowercase letters, digits and `-`, starting with a letter (its id
        /// is `NAME-v0`, its crate `NAME`).
        name: String,
        /// Where to make the crate's directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The sandgym checkout whose `env-api` and `envs/guest` the crate depends on
        /// (default: the one this binary was built from).
        #[arg(long)]
        sandgym: Option<PathBuf>,
    },
}

const CARGO_TOML: &str = include_str!("../../templates/env/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../../templates/env/src/lib.rs.tmpl");
const GITIGNORE: &str = include_str!("../../templates/env/gitignore.tmpl");
/// The guests' lock file: a new crate starts from the dependency versions sandgym's own
/// guests are built and tested with.
const CARGO_LOCK: &str = include_str!("../../envs/guests/Cargo.lock");

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let What::Env { name, dir, sandgym } = &args.what;
    check_name(name)?;
    let sandgym = match sandgym {
        Some(path) => path.clone(),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    };
    anyhow::ensure!(
        sandgym.join("env-api/Cargo.toml").is_file()
            && sandgym.join("envs/guest/Cargo.toml").is_file(),
        "{} is not a sandgym checkout (no env-api/ and envs/guest/); give --sandgym PATH",
        sandgym.display()
    );
    let sandgym = sandgym
        .canonicalize()
        .with_context(|| format!("resolving {}", sandgym.display()))?;
    let root = dir.join(name);
    anyhow::ensure!(
        !root.exists(),
        "{} already exists; choose another name or --dir",
        root.display()
    );
    let crate_name = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{Struct}}", &struct_name(name))
            .replace("{{sandgym}}", &toml_path(&sandgym))
    };
    write(&root.join("Cargo.toml"), &fill(CARGO_TOML))?;
    write(&root.join("src/lib.rs"), &fill(LIB_RS))?;
    write(&root.join(".gitignore"), GITIGNORE)?;
    write(&root.join("Cargo.lock"), CARGO_LOCK)?;
    println!("made {} ({name}-v0). Next:", root.display());
    println!("  cd {}", root.display());
    println!("  cargo test");
    println!("  rustup target add wasm32-wasip2");
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  sandgym check target/wasm32-wasip2/release/{crate_name}.wasm");
    Ok(ExitCode::SUCCESS)
}

/// An env name that is also a crate name and an id: `[a-z][a-z0-9-]*`, no `--`, no trailing
/// `-`, at most 40 characters, and no version suffix (the id adds `-v0`).
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--");
    anyhow::ensure!(
        ok,
        "{name:?} is not an env name: lowercase letters, digits and single `-`, starting with a letter, at most 40 characters"
    );
    anyhow::ensure!(
        name.parse::<sandgym::env_api::EnvId>().is_err(),
        "{name:?} ends in a version; give the name alone (the id is NAME-v0)"
    );
    Ok(())
}

/// `word-length` → `WordLength`.
fn struct_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// A path as a TOML basic string's contents.
fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_ids_crates_and_types() {
        assert_eq!(struct_name("word-length"), "WordLength");
        assert_eq!(struct_name("env2"), "Env2");
        for good in ["my-env", "a", "x1-y2"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "My-env",
            "1env",
            "my_env",
            "my--env",
            "env-",
            "my-env-v0",
            "é",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
