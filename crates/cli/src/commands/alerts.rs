//! `streamsight alerts`.

use crate::alerts::Change;
use crate::output::{self, Format};
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    #[arg(
        long,
        global = true,
        env = "STREAMSIGHT_API_URL",
        default_value = "http://127.0.0.1:7411"
    )]
    pub collector: String,
    #[arg(long, global = true, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Every rule, disabled ones included, and where it comes from.
    Rules,
    /// Makes or replaces a rule from a TOML file (the fields of
    /// `[[serve.alerts.rules]]`); over the configuration's of the same name.
    SetRule {
        name: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Removes a rule made with set-rule: its alerts resolve.
    RemoveRule { name: String },
    /// Silences matching alerts: `--match label=glob` (alertname is the rule).
    Silence {
        #[arg(long = "match", required = true)]
        matchers: Vec<String>,
        #[arg(long = "for", default_value = "2h")]
        duration: String,
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Ends a silence now.
    EndSilence { id: String },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let runtime = output::runtime()?;
    let url = &args.collector;
    let change = match args.action {
        None => {
            let body = runtime.block_on(crate::alerts::list(url)).map_err(anyhow::Error::msg)?;
            return output::emit(args.format, &body, |mut out, body| {
                crate::alerts::write_table(&mut out, body)
            });
        }
        Some(Action::Rules) => {
            let body = runtime
                .block_on(crate::alerts::rules(url))
                .map_err(anyhow::Error::msg)?;
            return output::emit(args.format, &body, |mut out, body| {
                crate::alerts::write_rules(&mut out, body)
            });
        }
        Some(Action::SetRule { name, file }) => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            Change::SetRule { name, toml: text }
        }
        Some(Action::RemoveRule { name }) => Change::RemoveRule { name },
        Some(Action::Silence {
            matchers,
            duration,
            comment,
        }) => Change::Silence {
            matchers,
            duration,
            comment,
        },
        Some(Action::EndSilence { id }) => Change::EndSilence { id },
    };
    let body = runtime
        .block_on(crate::alerts::change(url, change))
        .map_err(anyhow::Error::msg)?;
    println!("{body}");
    Ok(())
}
