//! Notifications: one task per notifier, fed through a bounded queue so that a
//! slow or dead receiver never delays evaluation (a full queue drops and counts).
//! Each delivery is retried with backoff; what finally fails is counted
//! (`streamsight_notifications_failed_total`) and its last error kept.

use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use streamsight_core::alerts::{AlertState, Labels, SharedLabels};
use streamsight_node::config::alerts::{Format, NotifierConfig};

/// Notifications waiting per notifier at most.
const QUEUE: usize = 1_000;
const ATTEMPTS: u32 = 4;

/// What a notifier is told: one alert's new state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Notification {
    pub rule: String,
    pub labels: SharedLabels,
    pub state: AlertState,
    pub value: Option<f64>,
    pub summary: String,
    pub since_ms: i64,
    /// Where to see it (the dashboard's page for the alert's group or topic).
    pub url: String,
}

#[derive(Debug, Default)]
pub struct NotifierStats {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

#[derive(Debug)]
pub struct Notifier {
    pub config: NotifierConfig,
    pub stats: std::sync::Arc<NotifierStats>,
    queue: tokio::sync::mpsc::Sender<(Notification, tokio::sync::oneshot::Sender<bool>)>,
}

impl Notifier {
    /// Starts the notifier's task on the current runtime.
    pub(crate) fn start(config: NotifierConfig) -> Self {
        let (queue, mut rx) = tokio::sync::mpsc::channel::<(Notification, tokio::sync::oneshot::Sender<bool>)>(QUEUE);
        let stats = std::sync::Arc::new(NotifierStats::default());
        let (c, s) = (config.clone(), stats.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default();
            while let Some((n, done)) = rx.recv().await {
                let ok = deliver(&client, &c, &n, &s).await;
                let _ = done.send(ok);
            }
        });
        Self { config, stats, queue }
    }

    /// Queues `n`; the receiver says whether it was delivered. A full queue
    /// drops it at once (counted): evaluation never waits for a receiver.
    pub(crate) fn send(&self, n: Notification) -> Option<tokio::sync::oneshot::Receiver<bool>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        match self.queue.try_send((n, tx)) {
            Ok(()) => Some(rx),
            Err(_) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

async fn deliver(client: &reqwest::Client, c: &NotifierConfig, n: &Notification, stats: &NotifierStats) -> bool {
    let body = serde_json::to_vec(&body(c, n)).unwrap_or_default();
    let mut backoff = Duration::from_millis(500);
    let mut last = String::new();
    let host = c.shown_url();
    for attempt in 1..=ATTEMPTS {
        let mut req = client
            .post(&c.url)
            .header("Content-Type", "application/json")
            .body(body.clone());
        if c.format == Format::Generic && !c.secret.is_empty() {
            let mac = streamsight_node::secrets::hex(&hmac_sha256(c.secret.as_bytes(), &body));
            req = req.header("X-Streamsight-Signature", format!("sha256={mac}"));
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => {
                stats.sent.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            Ok(r) => last = format!("{host} answered {}", r.status()),
            Err(e) => last = format!("{host}: {}", e.without_url()),
        }
        // Each attempt at debug; the last one's failure is a typed event of the round's.
        tracing::debug!(attempt, error = %last, "notification attempt failed");
        if attempt < ATTEMPTS {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    stats.failed.fetch_add(1, Ordering::Relaxed);
    *streamsight_node::sync::lock(&stats.last_error) = Some(last);
    false
}

/// The body each receiver expects.
pub fn body(c: &NotifierConfig, n: &Notification) -> Value {
    let firing = n.state != AlertState::Resolved;
    let title = format!("[{}] {}: {}", n.state.as_str().to_uppercase(), n.rule, n.summary);
    match c.format {
        Format::Generic => json!({ "version": 1, "alert": n }),
        Format::Slack => json!({ "text": format!("{title} <{}|open>", n.url) }),
        Format::Pagerduty => json!({
            "routing_key": c.routing_key,
            "event_action": if firing { "trigger" } else { "resolve" },
            "dedup_key": dedup_key(&n.rule, &n.labels),
            "payload": {
                "summary": title,
                "source": "streamsight",
                "severity": n.labels.get("severity").map_or("error", String::as_str),
                "custom_details": { "labels": n.labels, "value": n.value, "state": n.state },
            },
            "links": [{ "href": n.url, "text": "streamsight" }],
        }),
        Format::Alertmanager => {
            let mut labels: Labels = (*n.labels).clone();
            labels.insert("alertname".into(), n.rule.clone());
            let mut alert = json!({
                "labels": labels,
                "annotations": { "summary": n.summary, "state": n.state.as_str() },
                "generatorURL": n.url,
                "startsAt": rfc3339(n.since_ms),
            });
            if !firing {
                alert["endsAt"] = json!(rfc3339(n.since_ms));
            }
            json!([alert])
        }
    }
}

/// One key per alert, stable across restarts.
pub fn dedup_key(rule: &str, labels: &Labels) -> String {
    let mut s = rule.to_owned();
    for (k, v) in labels {
        s.push_str(&format!(",{k}={v}"));
    }
    s
}

fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
    outer.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        let hex = streamsight_node::secrets::hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?"));
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let hex = streamsight_node::secrets::hex(&hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        ));
        assert_eq!(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn times_are_rfc_3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_122_837_002), "2026-12-01T11:00:37.002Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn each_receiver_gets_its_shape() {
        let n = Notification {
            rule: "producer_failing".into(),
            labels: SharedLabels::new([("topic".to_owned(), "orders".to_owned())].into()),
            state: AlertState::Resolved,
            value: Some(0.0),
            summary: "sends to orders are failing".into(),
            since_ms: 0,
            url: "http://x/topics/c/orders".into(),
        };
        let c = |format| NotifierConfig {
            url: String::new(),
            format,
            secret: String::new(),
            routing_key: "rk".into(),
        };
        assert_eq!(body(&c(Format::Pagerduty), &n)["event_action"], "resolve");
        assert_eq!(
            body(&c(Format::Alertmanager), &n)[0]["labels"]["alertname"],
            "producer_failing"
        );
        assert!(body(&c(Format::Alertmanager), &n)[0]["endsAt"].is_string());
        assert!(
            body(&c(Format::Slack), &n)["text"]
                .as_str()
                .unwrap()
                .starts_with("[RESOLVED] producer_failing")
        );
        assert_eq!(body(&c(Format::Generic), &n)["alert"]["state"], "resolved");
    }
}
