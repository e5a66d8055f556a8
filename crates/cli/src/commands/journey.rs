//! `streamsight journey`.

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A W3C trace id (32 hex digits) or a Datadog 64-bit id.
    pub trace_id: String,
    /// The collector's API (STREAMSIGHT_API_KEY is sent as its key when set).
    #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
    pub collector: String,
    /// The steps and verdicts as a table, or the journey as JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let body = output::runtime()?
        .block_on(crate::journey::get(&args.collector, &args.trace_id))
        .map_err(anyhow::Error::msg)?;
    output::emit(args.format, &body, |mut out, body| {
        crate::journey::write_timeline(&mut out, body)
    })
}
