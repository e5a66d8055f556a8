//! TLS for the listeners (rustls): a certificate and key from PEM files, and
//! optionally client certificates signed by a CA (mutual TLS for the intake).
//! The files are read again on SIGHUP and when they change ([`crate::reload`]),
//! so a renewed certificate is served without a restart; a bad renewal keeps
//! the old one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
pub use streamsight_node::config::tls::ListenerTls;
use streamsight_node::telemetry::Failure;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Never the file's content: it may be a key.
    #[error("TLS of listener {listener}: {what} {}: {why}", path.display())]
    File {
        listener: String,
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("TLS of listener {listener}: cert_file {} and key_file {} do not make a TLS configuration: {why}", cert.display(), key.display())]
    Config {
        listener: String,
        cert: PathBuf,
        key: PathBuf,
        why: String,
    },
}

/// A certificate this close to its end is warned of.
pub const EXPIRY_WARNING_S: i64 = 14 * 24 * 3600;

/// A listener's TLS settings and the configuration built from them, swapped
/// whole when the files change.
#[derive(Debug)]
pub struct Reloading {
    settings: ListenerTls,
    /// The listeners it serves, as errors and metrics name them.
    listeners: Vec<&'static str>,
    current: RwLock<Loaded>,
    audit: std::sync::OnceLock<(String, crate::reload::AuditSink)>,
    /// The last reload failure said: a bad renewal is said once, not at
    /// every check until it is fixed.
    last_failure: crate::reload::SaidOnce,
    /// Whether the served certificate's coming end (or its end) was said.
    expiry_said: std::sync::Mutex<Option<ExpirySaid>>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ExpirySaid {
    Soon,
    Expired,
}

#[derive(Debug)]
struct Loaded {
    config: Arc<ServerConfig>,
    /// The files' bytes it was built from: a change is a difference in them.
    files: Vec<Vec<u8>>,
    /// When the served certificate stops being valid (unix seconds).
    not_after_s: i64,
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Reloading {
    /// The certificate of `listeners` (as they are named in errors and
    /// metrics), refused unless it is valid now.
    pub fn new(listeners: &[&'static str], settings: ListenerTls) -> Result<Self, TlsError> {
        Self::new_at(listeners, settings, now_s())
    }

    fn new_at(listeners: &[&'static str], settings: ListenerTls, now_s: i64) -> Result<Self, TlsError> {
        let name = listeners.join(", ");
        let loaded = load(&name, &settings, read_all(&name, &settings)?, now_s)?;
        let reloading = Self {
            settings,
            listeners: listeners.to_vec(),
            current: RwLock::new(loaded),
            audit: std::sync::OnceLock::new(),
            last_failure: crate::reload::SaidOnce::default(),
            expiry_said: std::sync::Mutex::new(None),
        };
        reloading.say_expiry(now_s);
        Ok(reloading)
    }

    fn name(&self) -> String {
        self.listeners.join(", ")
    }

    /// From now on, a replaced certificate of `listener` is reported to
    /// `sink`, and each one's end (now, for the one served).
    pub fn audit_to(&self, listener: &str, sink: crate::reload::AuditSink) {
        let not_after = self.not_after_s();
        for l in &self.listeners {
            sink.certificate(l, not_after);
        }
        let _ = self.audit.set((listener.to_owned(), sink));
    }

    /// When the served certificate stops being valid (unix seconds).
    pub fn not_after_s(&self) -> i64 {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .not_after_s
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        let current = self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        TlsAcceptor::from(current.config.clone())
    }

    /// Reads the files again; when they differ from what is served, builds and
    /// swaps in the new configuration. True when it did. A configuration that
    /// cannot be built, or a certificate not valid now, is said once, and the
    /// old one stays.
    pub fn reload_if_changed(&self) -> bool {
        self.reload_at(now_s())
    }

    fn reload_at(&self, now_s: i64) -> bool {
        let name = self.name();
        let files = match read_all(&name, &self.settings) {
            Ok(files) => files,
            Err(e) => {
                self.failed(format!("TLS files unreadable; serving the previous certificate: {e}"));
                return false;
            }
        };
        {
            let current = self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if current.files == files {
                drop(current);
                self.last_failure.clear();
                self.say_expiry(now_s);
                return false;
            }
        }
        match load(&name, &self.settings, files, now_s) {
            Ok(loaded) => {
                let not_after = loaded.not_after_s;
                *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = loaded;
                self.last_failure.clear();
                *self
                    .expiry_said
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                tracing::info!(listener = %name, cert = %self.settings.cert_file.display(), not_after_s = not_after, "TLS certificate reloaded");
                if let Some((listener, sink)) = self.audit.get() {
                    for l in &self.listeners {
                        sink.certificate(l, not_after);
                    }
                    let event = streamsight_core::AuditEvent::TlsReloaded {
                        listener: listener.clone(),
                    };
                    sink.report(streamsight_node::config::DEFAULT_TENANT, event);
                }
                self.say_expiry(now_s);
                true
            }
            Err(e) => {
                self.failed(format!("TLS reload failed; serving the previous certificate: {e}"));
                false
            }
        }
    }

    /// A reload that failed, said when it differs from the last one said.
    fn failed(&self, why: String) {
        let sink = self.audit.get().map(|(_, sink)| sink);
        self.last_failure.failed(sink, Failure::TlsReload, why);
    }

    /// Warns once when the served certificate has under 14 days left, and
    /// says once at error level when it has ended while served (nothing
    /// better to serve: clients now refuse it).
    fn say_expiry(&self, now_s: i64) {
        let not_after = self.not_after_s();
        let left = not_after.saturating_sub(now_s);
        let due = if left <= 0 {
            Some(ExpirySaid::Expired)
        } else if left <= EXPIRY_WARNING_S {
            Some(ExpirySaid::Soon)
        } else {
            None
        };
        let mut said = self
            .expiry_said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if due.is_none() || *said == due {
            return;
        }
        *said = due;
        let (listener, cert) = (self.name(), self.settings.cert_file.display().to_string());
        if due == Some(ExpirySaid::Expired) {
            tracing::error!(%listener, %cert, not_after_s = not_after, "the served TLS certificate has expired: clients refuse it until a renewed one is in cert_file");
        } else {
            tracing::warn!(%listener, %cert, not_after_s = not_after, days_left = left / 86_400, "the served TLS certificate expires within 14 days: renew it (it is read again when the file changes)");
        }
    }
}

fn read(listener: &str, what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        listener: listener.to_owned(),
        what,
        path: path.to_owned(),
        why: e.to_string(),
    })
}

fn read_all(listener: &str, s: &ListenerTls) -> Result<Vec<Vec<u8>>, TlsError> {
    let mut files = vec![
        read(listener, "cert_file", &s.cert_file)?,
        read(listener, "key_file", &s.key_file)?,
    ];
    if let Some(ca) = &s.client_ca_file {
        files.push(read(listener, "client_ca_file", ca)?);
    }
    Ok(files)
}

/// Renders a unix time as ISO-8601 UTC (`2020-01-01T00:00:00Z`).
fn iso(unix_s: i64) -> String {
    let s = u64::try_from(unix_s).unwrap_or(0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)).to_string()
}

/// The leaf certificate's end (unix seconds), or why it must not be served
/// at `now_s`: not X.509 v3, not yet valid, or expired.
fn check_leaf(cert: &CertificateDer<'_>, now_s: i64) -> Result<i64, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("the first certificate does not parse as X.509: {e}"))?;
    if parsed.version() != x509_parser::x509::X509Version::V3 {
        return Err(format!(
            "the certificate is X.509 v{}; TLS here needs a v3 certificate (with extensions: subjectAltName)",
            parsed.version().0 + 1
        ));
    }
    let validity = parsed.validity();
    let (not_before, not_after) = (validity.not_before.timestamp(), validity.not_after.timestamp());
    if now_s < not_before {
        return Err(format!("the certificate is not valid before {}", iso(not_before)));
    }
    if now_s > not_after {
        return Err(format!("the certificate expired at {}", iso(not_after)));
    }
    Ok(not_after)
}

/// What rustls' refusal of a certificate and key means, in words.
fn config_error(e: &tokio_rustls::rustls::Error) -> String {
    let raw = e.to_string();
    if raw.contains("KeyMismatch") {
        format!("the private key is not the certificate's ({raw})")
    } else {
        raw
    }
}

/// Builds the configuration from the files' bytes (as [`read_all`] read them),
/// refusing a certificate not valid at `now_s`.
fn load(listener: &str, s: &ListenerTls, files: Vec<Vec<u8>>, now_s: i64) -> Result<Loaded, TlsError> {
    let bad = |what: &'static str, path: &Path, why: String| TlsError::File {
        listener: listener.to_owned(),
        what,
        path: path.to_owned(),
        why,
    };
    let config_err = |why: String| TlsError::Config {
        listener: listener.to_owned(),
        cert: s.cert_file.clone(),
        key: s.key_file.clone(),
        why,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&files[0])
        .collect::<Result<_, _>>()
        .map_err(|e| bad("cert_file", &s.cert_file, e.to_string()))?;
    let Some(leaf) = certs.first() else {
        return Err(bad("cert_file", &s.cert_file, "no certificate in it".into()));
    };
    let not_after_s = check_leaf(leaf, now_s).map_err(|why| bad("cert_file", &s.cert_file, why))?;
    // The error says what is wrong with the key, never what it holds.
    let key = PrivateKeyDer::from_pem_slice(&files[1])
        .map_err(|_| bad("key_file", &s.key_file, "no PEM private key in it".into()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_err(config_error(&e)))?;
    let builder = match (&s.client_ca_file, files.get(2)) {
        (Some(path), Some(pem)) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| bad("client_ca_file", path, e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| bad("client_ca_file", path, e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("client_ca_file", path, "no certificate in it".into()));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad("client_ca_file", path, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| config_err(config_error(&e)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Loaded {
        config: Arc::new(config),
        files,
        not_after_s,
    })
}

impl crate::reload::Reload for Reloading {
    fn reload_if_changed(&self) -> bool {
        Reloading::reload_if_changed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A certificate for localhost valid from `from` to `to` (unix seconds).
    fn issue_valid(from: i64, to: i64) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(from.try_into().unwrap());
        params.not_after = rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(to.try_into().unwrap());
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    fn files(dir: &Path, (cert, key): &(String, String)) -> ListenerTls {
        std::fs::create_dir_all(dir).unwrap();
        let settings = ListenerTls {
            cert_file: dir.join("c.pem"),
            key_file: dir.join("k.pem"),
            client_ca_file: None,
        };
        std::fs::write(&settings.cert_file, cert).unwrap();
        std::fs::write(&settings.key_file, key).unwrap();
        settings
    }

    const JAN_2020: i64 = 1_577_836_800;
    const DAY: i64 = 86_400;

    #[test]
    fn a_certificate_not_valid_now_is_refused_with_its_listener_file_and_dates() {
        let dir = std::env::temp_dir().join(format!("streamsight-tls-dates-{}", std::process::id()));
        let expired = files(&dir, &issue_valid(JAN_2020 - 365 * DAY, JAN_2020));
        let err = Reloading::new_at(&["api"], expired, JAN_2020 + DAY)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("listener api") && err.contains("c.pem") && err.contains("expired at 2020-01-01T00:00:00Z"),
            "{err}"
        );
        let early = files(&dir, &issue_valid(JAN_2020, JAN_2020 + 365 * DAY));
        let err = Reloading::new_at(&["intake", "otlp"], early, JAN_2020 - DAY)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("listener intake, otlp") && err.contains("not valid before 2020-01-01T00:00:00Z"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_expired_renewal_keeps_the_served_certificate_and_is_said_once() {
        let dir = std::env::temp_dir().join(format!("streamsight-tls-renewal-{}", std::process::id()));
        let settings = files(&dir, &issue_valid(JAN_2020, JAN_2020 + 90 * DAY));
        let now = JAN_2020 + DAY;
        let tls = Reloading::new_at(&["api"], settings.clone(), now).unwrap();
        assert_eq!(tls.not_after_s(), JAN_2020 + 90 * DAY);
        files(&dir, &issue_valid(JAN_2020 - 365 * DAY, JAN_2020));
        assert!(!tls.reload_at(now), "an expired renewal is not served");
        assert_eq!(tls.not_after_s(), JAN_2020 + 90 * DAY, "the served one stays");
        let said = tls.last_failure.last().unwrap();
        assert!(said.contains("expired at") && said.contains("listener api"), "{said}");
        assert!(!tls.reload_at(now));
        // 14 days before the end, once; at the end, once more.
        assert_eq!(*tls.expiry_said.lock().unwrap(), None);
        files(&dir, &issue_valid(JAN_2020, JAN_2020 + 90 * DAY));
        let fixed = std::fs::read(&settings.cert_file).unwrap();
        assert!(tls.reload_at(now), "{}", fixed.len());
        let end = tls.not_after_s();
        assert!(!tls.reload_at(end - 15 * DAY));
        assert_eq!(*tls.expiry_said.lock().unwrap(), None);
        assert!(!tls.reload_at(end - 13 * DAY));
        assert_eq!(*tls.expiry_said.lock().unwrap(), Some(ExpirySaid::Soon));
        assert!(!tls.reload_at(end + 1));
        assert_eq!(*tls.expiry_said.lock().unwrap(), Some(ExpirySaid::Expired));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_key_of_another_certificate_and_a_v1_certificate_are_named_as_such() {
        let dir = std::env::temp_dir().join(format!("streamsight-tls-mismatch-{}", std::process::id()));
        let (cert, _) = issue();
        let (_, other_key) = issue();
        let mismatched = files(&dir, &(cert, other_key));
        let err = Reloading::new(&["api"], mismatched).unwrap_err().to_string();
        assert!(
            err.contains("listener api")
                && err.contains("c.pem")
                && err.contains("k.pem")
                && err.contains("the private key is not the certificate's"),
            "{err}"
        );
        // Made by `openssl x509 -req` without extensions: version 1.
        let v1 = (
            include_str!("../tests/fixtures/v1-cert.pem").to_owned(),
            include_str!("../tests/fixtures/v1-key.pem").to_owned(),
        );
        let err = Reloading::new(&["api"], files(&dir, &v1)).unwrap_err().to_string();
        assert!(err.contains("X.509 v1") && err.contains("c.pem"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_broken_renewal_keeps_the_served_certificate_and_a_good_one_replaces_it() {
        let dir = std::env::temp_dir().join(format!("streamsight-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = issue();
        let settings = ListenerTls {
            cert_file: dir.join("c.pem"),
            key_file: dir.join("k.pem"),
            client_ca_file: None,
        };
        std::fs::write(&settings.cert_file, &cert).unwrap();
        std::fs::write(&settings.key_file, &key).unwrap();
        let tls = Reloading::new(&["api"], settings.clone()).unwrap();
        let served = |tls: &Reloading| Arc::as_ptr(&tls.current.read().unwrap().config);
        let first = served(&tls);
        assert!(!tls.reload_if_changed(), "nothing changed");
        std::fs::write(&settings.key_file, "not a key").unwrap();
        assert!(!tls.reload_if_changed());
        assert_eq!(served(&tls), first, "the working configuration stays");
        std::fs::remove_file(&settings.cert_file).unwrap();
        assert!(!tls.reload_if_changed(), "a missing file is not a reload");
        let (cert, key) = issue();
        std::fs::write(&settings.cert_file, &cert).unwrap();
        std::fs::write(&settings.key_file, &key).unwrap();
        assert!(tls.reload_if_changed());
        assert_ne!(served(&tls), first);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
