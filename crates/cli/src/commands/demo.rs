//! `streamsight demo`.

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dashboard and API.
    #[arg(long, default_value = "127.0.0.1:7411")]
    pub api_listen: std::net::SocketAddr,
    /// The first producer incident starts after this long.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    pub first_incident_after: std::time::Duration,
    /// A producer incident starts this often after the first.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "3m")]
    pub incident_every: std::time::Duration,
    /// How long each incident lasts (the broker rejects every produce).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    pub incident_for: std::time::Duration,
    /// Stop after this long (default: until interrupted).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    crate::demo::run(crate::demo::DemoOptions {
        api_listen: args.api_listen,
        first_incident_after: args.first_incident_after,
        incident_every: args.incident_every,
        incident_for: args.incident_for,
        duration: args.duration,
        ..Default::default()
    })
}
