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
    /// A table, the collector's answer as JSON, or (for `rules`) a
    /// Prometheus rule file of the same rules.
    #[arg(long, global = true, value_enum, default_value = "table")]
    pub format: AlertsFormat,
}

/// `--format` of `streamsight alerts`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AlertsFormat {
    /// A table, for people.
    Table,
    /// JSON, for programs.
    Json,
    /// `rules` only: Prometheus alerting rules paging on the same conditions
    /// (of `--config`'s rules, else the collector's).
    Prometheus,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Every rule, disabled ones included, and where it comes from.
    Rules {
        /// With `--format prometheus`: the rules of this configuration (the
        /// defaults, replaced and added to by its `[[serve.alerts.rules]]`)
        /// instead of the collector's.
        #[arg(long, conflicts_with = "defaults")]
        config: Option<PathBuf>,
        /// With `--format prometheus`: streamsight's default rules, as
        /// `deploy/prometheus/alerts.yml` ships them.
        #[arg(long)]
        defaults: bool,
    },
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
    if let Some(Action::Rules { config, defaults }) = &args.action
        && args.format == AlertsFormat::Prometheus
    {
        let text = match config {
            None if *defaults => {
                let rules = streamsight_alerts::rules::default_rules();
                streamsight_alerts::prometheus::rules_file(&rules, "streamsight's default rules")
            }
            Some(path) => {
                let config = crate::config::Config::load(Some(path))?;
                config.serve.alerts.validate().map_err(anyhow::Error::msg)?;
                let source = format!("the rules of {}", path.display());
                streamsight_alerts::prometheus::rules_file(&config.serve.alerts.base_rules(), &source)
            }
            None => {
                let body = runtime
                    .block_on(crate::alerts::rules(url))
                    .map_err(anyhow::Error::msg)?;
                let rules = crate::alerts::parse_rules(&body).map_err(anyhow::Error::msg)?;
                streamsight_alerts::prometheus::rules_file(&rules, &format!("the rules of the collector at {url}"))
            }
        };
        print!("{text}");
        return Ok(());
    }
    if args.format == AlertsFormat::Prometheus {
        anyhow::bail!("--format prometheus is for `streamsight alerts rules` only");
    }
    if let Some(Action::Rules { config, defaults }) = &args.action
        && (config.is_some() || *defaults)
    {
        anyhow::bail!(
            "--config and --defaults are read with --format prometheus only: the table and JSON are the collector's rules"
        );
    }
    let format = if args.format == AlertsFormat::Json {
        Format::Json
    } else {
        Format::Table
    };
    let change = match args.action {
        None => {
            let body = runtime.block_on(crate::alerts::list(url)).map_err(anyhow::Error::msg)?;
            return output::emit(format, &body, |mut out, body| {
                crate::alerts::write_table(&mut out, body)
            });
        }
        Some(Action::Rules { .. }) => {
            let body = runtime
                .block_on(crate::alerts::rules(url))
                .map_err(anyhow::Error::msg)?;
            return output::emit(format, &body, |mut out, body| {
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
