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
    #[error("{what} {}: {why}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// A listener's TLS settings and the configuration built from them, swapped
/// whole when the files change.
#[derive(Debug)]
pub struct Reloading {
    settings: ListenerTls,
    current: RwLock<Loaded>,
    audit: std::sync::OnceLock<(String, crate::reload::AuditSink)>,
}

#[derive(Debug)]
struct Loaded {
    config: Arc<ServerConfig>,
    /// The files' bytes it was built from: a change is a difference in them.
    files: Vec<Vec<u8>>,
}

impl Reloading {
    pub fn new(settings: ListenerTls) -> Result<Self, TlsError> {
        let loaded = load(&settings, read_all(&settings)?)?;
        Ok(Self {
            settings,
            current: RwLock::new(loaded),
            audit: std::sync::OnceLock::new(),
        })
    }

    /// From now on, a replaced certificate of `listener` is reported to `sink`.
    pub fn audit_to(&self, listener: &str, sink: crate::reload::AuditSink) {
        let _ = self.audit.set((listener.to_owned(), sink));
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        let current = self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        TlsAcceptor::from(current.config.clone())
    }

    /// Reads the files again; when they differ from what is served, builds and
    /// swaps in the new configuration. True when it did. A configuration that
    /// cannot be built is logged, and the old one stays.
    pub fn reload_if_changed(&self) -> bool {
        let files = match read_all(&self.settings) {
            Ok(files) => files,
            Err(e) => {
                let why = format!("TLS files unreadable; serving the previous certificate: {e}");
                crate::reload::reload_failed(self.audit.get().map(|(_, sink)| sink), Failure::TlsReload, &why);
                return false;
            }
        };
        {
            let current = self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if current.files == files {
                return false;
            }
        }
        match load(&self.settings, files) {
            Ok(loaded) => {
                *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = loaded;
                tracing::info!(cert = %self.settings.cert_file.display(), "TLS certificate reloaded");
                if let Some((listener, sink)) = self.audit.get() {
                    let event = streamsight_core::AuditEvent::TlsReloaded {
                        listener: listener.clone(),
                    };
                    sink.report(streamsight_node::config::DEFAULT_TENANT, event);
                }
                true
            }
            Err(e) => {
                let why = format!("TLS reload failed; serving the previous certificate: {e}");
                crate::reload::reload_failed(self.audit.get().map(|(_, sink)| sink), Failure::TlsReload, &why);
                false
            }
        }
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        what,
        path: path.to_owned(),
        why: e.to_string(),
    })
}

fn read_all(s: &ListenerTls) -> Result<Vec<Vec<u8>>, TlsError> {
    let mut files = vec![read("cert_file", &s.cert_file)?, read("key_file", &s.key_file)?];
    if let Some(ca) = &s.client_ca_file {
        files.push(read("client_ca_file", ca)?);
    }
    Ok(files)
}

/// Builds the configuration from the files' bytes (as [`read_all`] read them).
fn load(s: &ListenerTls, files: Vec<Vec<u8>>) -> Result<Loaded, TlsError> {
    let bad = |what: &'static str, path: &Path, why: String| TlsError::File {
        what,
        path: path.to_owned(),
        why,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&files[0])
        .collect::<Result<_, _>>()
        .map_err(|e| bad("cert_file", &s.cert_file, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("cert_file", &s.cert_file, "no certificate in it".into()));
    }
    // The error says what is wrong with the key, never what it holds.
    let key = PrivateKeyDer::from_pem_slice(&files[1])
        .map_err(|_| bad("key_file", &s.key_file, "no PEM private key in it".into()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
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
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Loaded {
        config: Arc::new(config),
        files,
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
        let tls = Reloading::new(settings.clone()).unwrap();
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
