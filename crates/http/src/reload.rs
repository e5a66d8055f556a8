//! What is read from files while serving (TLS certificates, API keys) is read
//! again on SIGHUP and, between signals, whenever the files change.

use std::sync::Arc;
use std::time::Duration;
use streamsight_node::telemetry::Failure;

/// Where reloads report what administrators changed: the tenant it concerns,
/// and the event (stored in that tenant's log).
type Report = dyn Fn(&str, streamsight_core::AuditEvent) + Send + Sync;

/// Where a reload that failed is said and counted (the old files stay in use).
type Failed = dyn Fn(Failure, &str) + Send + Sync;

/// Where a listener's served certificate's end is kept (unix seconds).
type Certificate = dyn Fn(&'static str, i64) + Send + Sync;

#[derive(Clone)]
pub struct AuditSink(Arc<Report>, Arc<Failed>, Arc<Certificate>);

impl AuditSink {
    pub fn new(
        report: impl Fn(&str, streamsight_core::AuditEvent) + Send + Sync + 'static,
        failed: impl Fn(Failure, &str) + Send + Sync + 'static,
        certificate: impl Fn(&'static str, i64) + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(report), Arc::new(failed), Arc::new(certificate))
    }

    /// The certificate `listener` serves ends at `not_after_s`.
    pub fn certificate(&self, listener: &'static str, not_after_s: i64) {
        (self.2)(listener, not_after_s);
    }

    pub fn report(&self, tenant: &str, event: streamsight_core::AuditEvent) {
        (self.0)(tenant, event);
    }

    /// A reload that failed: a [`Failure`] event of the collector's.
    pub fn failed(&self, failure: Failure, why: &str) {
        (self.1)(failure, why);
    }
}

/// The last reload failure said: the same one is not said again at every
/// check until something else happens (a file fixed, another failure).
#[derive(Debug, Default)]
pub struct SaidOnce(std::sync::Mutex<Option<String>>);

impl SaidOnce {
    /// Says `why` as [`reload_failed`] does, unless it was the last said.
    pub fn failed(&self, sink: Option<&AuditSink>, failure: Failure, why: String) {
        let mut last = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.as_deref() != Some(why.as_str()) {
            reload_failed(sink, failure, &why);
            *last = Some(why);
        }
    }

    /// The files read well again: the next failure is said whatever it is.
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The last failure said, if none was cleared since.
    pub fn last(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Says a failed reload where it can be counted, or in the log alone
/// before the collector has said where.
pub fn reload_failed(sink: Option<&AuditSink>, failure: Failure, why: &str) {
    match sink {
        Some(sink) => sink.failed(failure, why),
        None => tracing::error!(
            failure = failure.as_str(),
            why,
            "reload failed; keeping what was loaded"
        ),
    }
}

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditSink")
    }
}

/// Something built from files that can be rebuilt while serving.
pub trait Reload: Send + Sync + std::fmt::Debug {
    /// Reads the files again and swaps in what they now say when it differs and
    /// is usable; true when it did. What cannot be used is logged, and the
    /// previous state stays.
    fn reload_if_changed(&self) -> bool;
}

/// Reloads `items` on SIGHUP and every `every`.
pub async fn watch(items: Vec<Arc<dyn Reload>>, every: Duration) {
    if items.is_empty() {
        return std::future::pending().await;
    }
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(every);
    loop {
        let signalled = async {
            match hangup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = signalled => tracing::info!("SIGHUP: reading TLS and key files again"),
            _ = tick.tick() => {}
        }
        for item in &items {
            let item = item.clone();
            // File reads and parsing: a blocking thread's work.
            let _ = tokio::task::spawn_blocking(move || item.reload_if_changed()).await;
        }
    }
}
