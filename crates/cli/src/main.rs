use clap::Parser;
use streamsight::cli::{Cli, Command};
use streamsight::commands;
use streamsight::config::Config;

/// The collector allocates per point; the intake benchmark runs faster with
/// mimalloc than with the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    private_files();
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`| head`): what it wanted it has.
        Err(e) if streamsight::output::broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", streamsight::output::causes(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// mimalloc's arenas are given transparent huge pages, and a 2 MB page stays
/// resident while any 4 KB of it is in use, so RSS grows while what is held
/// does not. Measured under the soak's mix (RELIABILITY.md, "Huge pages"): on
/// this machine's `madvise` setting 32-42 MB of RSS were huge pages; with the
/// host at `always`, RSS went 76 → 100 MB in 6 minutes against 50 → 58 MB
/// with them off. Off for the whole process, whatever the host's setting.
/// Where the kernel refuses, the collector runs as before.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

/// What the collector writes (stores, keys, tenants' logs) is its teams'
/// data: readable by its own user only, whatever umask it was started with.
fn private_files() {
    #[cfg(target_os = "linux")]
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STREAMSIGHT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::load(cli.config.as_deref())?;
    streamsight::collector_client::trust(cli.ca_file.as_deref()).map_err(anyhow::Error::msg)?;
    match cli.command {
        Command::Serve(args) => commands::serve::run(config, args),
        Command::Demo(args) => commands::demo::run(args),
        Command::DevKafka(args) => commands::dev_kafka::run(args),
        Command::Lag(args) => commands::lag::run(args),
        Command::Groups(command) => commands::groups::run(command),
        Command::Record(args) => commands::record::run(args),
        Command::Probe(args) => commands::probe::run(args),
        Command::Dlq(command) => commands::dlq::run(command),
        Command::Replay(args) => commands::replay::run(args, config.engine),
        Command::Scenario(command) => commands::scenario::run(command),
        Command::Store(command) => commands::store::run(command, &config.serve.storage),
        Command::Keys(command) => commands::keys::run(command, &config.serve),
        Command::Journey(args) => commands::journey::run(args),
        Command::Alerts(args) => commands::alerts::run(args),
    }
}
