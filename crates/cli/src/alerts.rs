//! `streamsight alerts`: a collector's alerts, worst first.

use std::io::Write;

/// The collector's `/api/v1/alerts`, as is.
pub async fn list(url: &str) -> Result<serde_json::Value, String> {
    crate::collector_client::get_json(url, "/api/v1/alerts")
        .await
        .map_err(|e| format!("collector at {url}: {e}"))
}

pub fn write_table(out: &mut impl Write, body: &serde_json::Value) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<9} {:<22} {:<10} {:>10}  SUMMARY",
        "STATE", "RULE", "SINCE", "VALUE"
    )?;
    let now = body["now_ms"].as_i64().unwrap_or(0);
    for a in body["alerts"].as_array().into_iter().flatten() {
        let since = a["since_ms"].as_i64().map_or_else(String::new, |t| {
            streamsight_core::explain::duration(now.saturating_sub(t)).replace(' ', "")
        });
        let value = a["value"]
            .as_f64()
            .map_or_else(|| "unknown".to_owned(), |v| format!("{v:.2}"));
        let silenced = if a["silenced"] == true { " (silenced)" } else { "" };
        writeln!(
            out,
            "{:<9} {:<22} {:<10} {:>10}  {}{silenced}",
            a["state"].as_str().unwrap_or("?").to_uppercase(),
            a["rule"].as_str().unwrap_or("?"),
            since,
            value,
            a["summary"].as_str().unwrap_or(""),
        )?;
    }
    Ok(())
}
