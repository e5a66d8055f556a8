//! `streamsight journey ID`: a message's path in time order, then each
//! group's verdict, as a collector's `/api/v1/journeys/{trace_id}` says.

use std::io::Write;

pub async fn get(url: &str, trace_id: &str) -> Result<serde_json::Value, String> {
    let id = crate::collector_client::segment(trace_id.trim());
    crate::collector_client::get_json(url, &format!("/api/v1/journeys/{id}"))
        .await
        .map_err(|e| format!("collector at {url}: {e}"))
}

/// One line per step: when (relative to the first), what, where, which service.
pub fn write_timeline(out: &mut impl Write, body: &serde_json::Value) -> std::io::Result<()> {
    writeln!(out, "trace {}", body["trace_id"].as_str().unwrap_or("?"))?;
    if let Some(m) = body["message"].as_object() {
        writeln!(
            out,
            "message {}/{}[{}] offset {}",
            m["cluster"].as_str().unwrap_or(""),
            m["topic"].as_str().unwrap_or("?"),
            m["partition"],
            m["offset"]
        )?;
    }
    let steps = body["steps"].as_array().cloned().unwrap_or_default();
    let when = |s: &serde_json::Value| match s["kind"].as_str() {
        Some("span") => s["start_ns"].as_i64().map(|n| n.div_euclid(1_000_000)),
        _ => s["at_ms"].as_i64(),
    };
    let first = steps.iter().filter_map(when).min().unwrap_or(0);
    writeln!(out, "{:>9}  {:<11} {:<18} WHAT", "AT", "KIND", "SERVICE")?;
    for s in &steps {
        let at = when(s).map_or_else(|| "?".to_owned(), |t| format!("+{} ms", t - first));
        let kind = s["kind"].as_str().unwrap_or("?");
        let (service, what) = match kind {
            "span" => {
                let m = &s["messaging"];
                let place = if m.is_object() {
                    format!(
                        " {}[{}]@{}{}",
                        m["topic"].as_str().unwrap_or("?"),
                        m["partition"],
                        m["offset"],
                        m["group"].as_str().map(|g| format!(" group {g}")).unwrap_or_default()
                    )
                } else {
                    String::new()
                };
                let error = s["error"].as_str().map(|e| format!("  ERROR {e}")).unwrap_or_default();
                (
                    s["service"].as_str().unwrap_or("").to_owned(),
                    format!(
                        "{} ({}){place}{error}",
                        s["name"].as_str().unwrap_or("?"),
                        s["source"].as_str().unwrap_or("")
                    ),
                )
            }
            "log" => (
                s["service"].as_str().unwrap_or("").to_owned(),
                format!(
                    "{} {}",
                    s["severity"].as_str().unwrap_or(""),
                    s["body"].as_str().unwrap_or("")
                ),
            ),
            _ => (
                String::new(),
                format!(
                    "dead-lettered to {}@{} at stage {} ({})",
                    s["dlq_topic"].as_str().unwrap_or("?"),
                    s["dlq_offset"],
                    s["stage"].as_str().unwrap_or("?"),
                    s["error_class"].as_str().unwrap_or("?")
                ),
            ),
        };
        writeln!(out, "{at:>9}  {kind:<11} {service:<18} {what}")?;
    }
    if let Some(f) = body["failed_send"].as_object() {
        writeln!(
            out,
            "failed send to {}: {}",
            f["topic"].as_str().unwrap_or("?"),
            f["errors"]
        )?;
    }
    for v in body["verdicts"].as_array().into_iter().flatten() {
        let detail: Vec<String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "group" && *k != "verdict")
            .map(|(k, x)| format!("{k}={x}"))
            .collect();
        writeln!(
            out,
            "group {}: {} {}",
            v["group"].as_str().unwrap_or("?"),
            v["verdict"].as_str().unwrap_or("?").replace('_', " "),
            detail.join(" ")
        )?;
    }
    for n in body["notes"].as_array().into_iter().flatten() {
        writeln!(out, "note: {}", n.as_str().unwrap_or(""))?;
    }
    Ok(())
}
