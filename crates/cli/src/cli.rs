//! The command line: `streamsight` and its subcommands, as clap reads them.
//! `main` parses and dispatches; the tests here hold every flag to saying
//! what it does, and every command the docs show to parsing.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

use crate::commands;

/// Kafka lag that tells the truth: lag in messages and seconds, health, drops.
#[derive(Debug, Parser)]
#[command(name = "streamsight", version)]
pub struct Cli {
    /// TOML configuration file; embedded defaults when absent.
    #[arg(long, global = true, env = "STREAMSIGHT_CONFIG")]
    pub config: Option<PathBuf>,
    /// PEM file of CA certificates (or a collector's own self-signed
    /// certificate) to trust when a command talks to a collector over
    /// https, besides the public CAs and the system's bundle.
    #[arg(long, global = true, env = "STREAMSIGHT_CA_FILE", value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the collector: the Datadog-compatible Data Streams intake, the engine,
    /// durable storage, the HTTP API and Prometheus metrics.
    Serve(commands::serve::Args),
    /// Try streamsight: the mock cluster, the collector with its dashboard, and a
    /// pipeline written with the SDK (a producer whose sends fail every few
    /// minutes, a healthy group, a slow one, a stuck one, a DLQ filling up).
    Demo(commands::demo::Args),
    /// Start an in-process Kafka-protocol broker (librdkafka's mock cluster) on
    /// loopback for trying streamsight out; prints its bootstrap address.
    DevKafka(commands::dev_kafka::Args),
    /// Lag and health per group and partition, like `kafka-consumer-groups
    /// --describe` with lag seconds: from a running collector, or straight from a
    /// cluster with --bootstrap-server.
    Lag(commands::lag::Args),
    /// Act on a group: reset its committed offsets, with a dry run first
    /// (`groups reset`).
    #[command(subcommand)]
    Groups(commands::groups::Command),
    /// One record of a cluster: key, headers, timestamp and value decoded
    /// (JSON, text, schema-registry framing), masked and bounded; through a
    /// collector it needs a `payloads` key.
    Record(commands::record::Args),
    /// Run the end-to-end probe alone: sequenced records to every partition of a
    /// probe topic, read back by the probe's own group; prints round-trip and
    /// produce latency, losses, duplicates and errors per partition.
    Probe(commands::probe::Args),
    /// Dead-letter queues: list them with velocity and top reasons (from a
    /// collector), or tail one with its provenance decoded (from the cluster).
    #[command(subcommand)]
    Dlq(commands::dlq::Command),
    /// Feed a scenario (JSON Lines of timed events) through the engine on a
    /// simulated clock and print lag and health at sample times.
    Replay(commands::replay::Args),
    /// Write a generated scenario for `replay` to standard output.
    #[command(subcommand)]
    Scenario(commands::scenario::Command),
    /// The collector's store, readable.
    #[command(subcommand)]
    Store(commands::store::Command),
    /// API keys: create (printed once), list, revoke. A running collector reads
    /// the keys file again within seconds (or at once on SIGHUP).
    #[command(subcommand)]
    Keys(commands::keys::Command),
    /// A message's journey: its spans, log lines and dead letters in time order,
    /// then where it stopped for each group reading it.
    Journey(commands::journey::Args),
    /// A collector's alerts (firing, no data, pending, resolved), worst first;
    /// its rules and silences. Changes need an admin key (STREAMSIGHT_API_KEY).
    Alerts(commands::alerts::Args),
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every subcommand, with its path (`dlq tail`).
    fn commands() -> Vec<(String, clap::Command)> {
        fn walk(path: &str, c: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
            out.push((path.to_owned(), c.clone()));
            for sub in c.get_subcommands() {
                walk(&format!("{path} {}", sub.get_name()), sub, out);
            }
        }
        let mut out = Vec::new();
        walk("streamsight", &Cli::command(), &mut out);
        out
    }

    #[test]
    fn every_flag_and_command_says_what_it_does() {
        let mut silent = Vec::new();
        for (path, c) in commands() {
            if c.get_about().is_none() && path != "streamsight" {
                silent.push(path.clone());
            }
            for arg in c.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                let said = arg.get_help().or(arg.get_long_help()).map(|h| h.to_string());
                if said.is_none_or(|h| h.trim().is_empty()) {
                    silent.push(format!("{path} --{id}"));
                }
            }
        }
        assert!(silent.is_empty(), "no help: {silent:#?}");
    }

    /// The `streamsight …` command lines in the fenced blocks of the README
    /// and docs/, continuation lines joined: (file, line).
    fn documented_commands() -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, text) in docs() {
            let (mut fenced, mut pending) = (false, String::new());
            for line in text.lines() {
                if line.trim_start().starts_with("```") {
                    fenced = !fenced;
                    continue;
                }
                if !fenced {
                    continue;
                }
                let line = line.trim();
                let joined = format!("{pending}{}", line.trim_end_matches('\\'));
                if line.ends_with('\\') {
                    pending = format!("{joined} ");
                    continue;
                }
                pending.clear();
                // `cargo run … -p streamsight -- ARGS` runs the same binary.
                let command = match joined.split_once(" -p streamsight -- ") {
                    Some((cargo, args)) if cargo.starts_with("cargo run") => format!("streamsight {args}"),
                    _ => joined,
                };
                if command.starts_with("streamsight ") {
                    out.push((name.clone(), command));
                }
            }
        }
        out
    }

    /// What a documented command line names that the binary does not have:
    /// a subcommand, or a flag of it.
    fn unknown_in(line: &str) -> Vec<String> {
        let root = Cli::command();
        let mut path: Vec<&clap::Command> = vec![&root];
        let mut unknown = Vec::new();
        let (mut positional, mut value_next) = (false, false);
        for word in line.split_whitespace().skip(1) {
            if matches!(word, "|" | "&&" | ">" | "#" | "2>&1") || word.starts_with('#') {
                break;
            }
            // A flag's value, whatever it looks like.
            if std::mem::take(&mut value_next) {
                continue;
            }
            for token in word.split('|') {
                let token = token.trim_matches(|c| matches!(c, '[' | ']' | '(' | ')'));
                let current = *path.last().unwrap();
                if let Some(flag) = token.strip_prefix("--") {
                    let (flag, inline) = match flag.split_once('=') {
                        Some((flag, _)) => (flag, true),
                        None => (flag, false),
                    };
                    let arg = path.iter().rev().find_map(|c| {
                        c.get_arguments().find(|a| {
                            a.get_long() == Some(flag) || a.get_all_aliases().into_iter().flatten().any(|x| x == flag)
                        })
                    });
                    match arg {
                        Some(a) => value_next = !inline && a.get_action().takes_values(),
                        None if flag == "help" => {}
                        None => unknown.push(format!("--{flag} of `{}`", current.get_name())),
                    }
                } else if !positional && !token.starts_with('-') && !token.is_empty() {
                    match current.find_subcommand(token) {
                        Some(sub) => path.push(sub),
                        None if current.has_subcommands() && current.get_positionals().next().is_none() => {
                            unknown.push(format!("subcommand {token:?} of `{}`", current.get_name()));
                            positional = true;
                        }
                        None => positional = true,
                    }
                }
            }
        }
        unknown
    }

    #[test]
    fn every_command_the_docs_show_names_flags_the_binary_has() {
        let commands = documented_commands();
        assert!(commands.len() >= 20, "too few found: {commands:#?}");
        let wrong: Vec<String> = commands
            .iter()
            .flat_map(|(file, line)| {
                unknown_in(line)
                    .into_iter()
                    .map(move |u| format!("{file}: {u}: {line}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_flag_the_binary_lacks_is_caught() {
        assert!(unknown_in("streamsight lag --group g").is_empty());
        assert!(
            unknown_in("streamsight [--config FILE] replay FILE [--sample-every S] [--format json|table]").is_empty()
        );
        assert_eq!(unknown_in("streamsight lag --grop g"), ["--grop of `lag`"]);
        assert_eq!(unknown_in("streamsight lgs"), ["subcommand \"lgs\" of `streamsight`"]);
    }

    /// docs/collector.md names every flag and environment variable of `serve`.
    #[test]
    fn the_collector_doc_names_every_flag_and_variable_of_serve() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let doc = std::fs::read_to_string(root.join("docs/collector.md")).unwrap();
        let cli = Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        let mut missing = Vec::new();
        for arg in serve.get_arguments().chain(cli.get_arguments()) {
            if let Some(long) = arg.get_long().filter(|l| *l != "help") {
                if !doc.contains(&format!("--{long}")) {
                    missing.push(format!("--{long}"));
                }
            }
            if let Some(env) = arg.get_env() {
                let env = env.to_string_lossy();
                if !doc.contains(env.as_ref()) {
                    missing.push(env.into_owned());
                }
            }
        }
        assert!(missing.is_empty(), "docs/collector.md does not name {missing:?}");
    }

    /// The README's and docs/' text, by file name.
    fn docs() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
        files
            .into_iter()
            .map(|f| {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&f).unwrap())
            })
            .collect()
    }

    /// Every long flag of every command.
    fn all_flags() -> std::collections::BTreeSet<String> {
        commands()
            .iter()
            .flat_map(|(_, c)| {
                c.get_arguments()
                    .filter_map(|a| a.get_long())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Code that runs another program (cargo, Kafka's tools, tansu): its
    /// flags are that program's.
    fn another_programs(code: &str) -> bool {
        ["cargo ", "kafka-", "tansu ", "promtool", "helm ", "scripts/"]
            .iter()
            .any(|p| code.contains(p))
    }

    /// A flag written in the prose's inline code (`--flag`) is one the
    /// binary has: docs/act.md once named an `--all-topics` nothing took.
    #[test]
    fn every_flag_the_prose_names_is_one_the_binary_has() {
        let flags = all_flags();
        let mut unknown = Vec::new();
        for (file, text) in docs() {
            for code in text.split('`').skip(1).step_by(2).filter(|c| !another_programs(c)) {
                for word in code.split_whitespace() {
                    let Some(flag) = word.strip_prefix("--") else { continue };
                    let flag: String = flag
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    if flag.is_empty() || flags.contains(&flag) {
                        continue;
                    }
                    unknown.push(format!("{file}: --{flag} in `{code}`"));
                }
            }
        }
        assert!(unknown.is_empty(), "{unknown:#?}");
    }

    /// Every flag of every subcommand is named somewhere in the README or docs/.
    #[test]
    fn every_flag_of_every_subcommand_is_in_the_docs() {
        let all: String = docs().into_iter().map(|(_, t)| t).collect();
        let mut missing = Vec::new();
        for (path, c) in commands() {
            for arg in c.get_arguments() {
                if let Some(long) = arg.get_long().filter(|l| !matches!(*l, "help" | "version"))
                    && !all.contains(&format!("--{long}"))
                {
                    missing.push(format!("{path} --{long}"));
                }
            }
        }
        assert!(missing.is_empty(), "not in README.md or docs/: {missing:#?}");
    }
}
