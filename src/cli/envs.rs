//! `sandgym envs`: what is registered.

use std::process::ExitCode;

use anyhow::Context;
use sandgym::env_api::{self, EnvSpec};
use serde_json::Value;

/// Options of `sandgym envs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON array of env specs (id, description, tools with parameter schemas,
    /// reward range, step budget) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut specs: Vec<EnvSpec> = Vec::new();
    for registration in env_api::registered() {
        let env = registration
            .make(&Default::default())
            .with_context(|| format!("building {}", registration.id))?;
        specs.push(env.spec().clone());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&specs)?);
        return Ok(ExitCode::SUCCESS);
    }
    for spec in &specs {
        println!("{}  (version {})", spec.id, spec.id.version);
        if !spec.description.is_empty() {
            println!("  {}", spec.description);
        }
        let steps = spec
            .max_episode_steps
            .map_or("none".to_owned(), |s| s.to_string());
        println!(
            "  rewards in [{}, {}], step budget {steps}",
            spec.reward_range.0, spec.reward_range.1
        );
        for tool in &spec.tools {
            println!(
                "  - {}({})",
                tool.name,
                signature(&tool.parameters.to_value())
            );
            println!("      {}", tool.description);
        }
        println!();
    }
    println!("{} env(s) registered", specs.len());
    Ok(ExitCode::SUCCESS)
}

/// `name: type` pairs of an object schema, optional ones marked with `?`.
fn signature(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let ty = s["type"].as_str().unwrap_or("any");
                    let opt = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{opt}: {ty}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}
