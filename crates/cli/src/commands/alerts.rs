//! `streamsight alerts`.

use crate::alerts::Change;
use crate::output::{self, Format};
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// The collector's API (STREAMSIGHT_API_KEY is sent as its key: changes
    /// need an admin key).
    #[arg(
        long,
        global = true,
        env = "STREAMSIGHT_API_URL",
        default_value = "http://127.0.0.1:7411"
    )]
    pub collector: String,
    /// A table, or the collector's answer as JSON.
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
        /// The rule's name (one of the configuration's replaces it).
        name: String,
        /// A TOML file of the rule's fields.
        #[arg(long)]
        file: PathBuf,
    },
    /// Removes a rule made with set-rule: its alerts resolve.
    RemoveRule {
        /// The rule's name.
        name: String,
    },
    /// Silences matching alerts: `--match label=glob` (alertname is the rule).
    Silence {
        /// `label=glob`, repeatable: an alert matching them all is silenced.
        #[arg(long = "match", required = true)]
        matchers: Vec<String>,
        /// How long the silence lasts.
        #[arg(long = "for", default_value = "2h")]
        duration: String,
        /// Why, for whoever reads the silence.
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Ends a silence now.
    EndSilence {
        /// The silence's id (`alerts` lists them).
        id: String,
    },
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
