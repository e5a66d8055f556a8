//! API keys: who a request is and what it may do.
//!
//! A key is `ssk_<id>_<secret>`: a short public id (for listing and revoking)
//! and 32 random bytes. The keys file keeps the id, the tenant, the scope and a
//! SHA-256 of the secret, never the secret itself; a request's key is found by
//! its id and its hash compared in constant time, so checking a key costs one
//! hash whatever the number of keys. The file is read again on SIGHUP and when
//! it changes ([`crate::reload`]): a revoked key is refused from the next read.

use crate::error::{ApiError, ErrorKind};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use streamsight_node::secrets::SECRET_BYTES;
pub use streamsight_node::secrets::{constant_time_eq, digest, hex};
use streamsight_node::telemetry::Failure;

/// What a key may do. `admin` may do everything.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Send telemetry to the intake.
    Ingest,
    /// Read the API, Burrow's API and `/metrics`.
    Read,
    /// Read, and the records themselves (`/api/v1/records`): payloads are
    /// data the monitoring never needs, so `read` does not imply them.
    Payloads,
    Admin,
}

impl Scope {
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Admin || self == needed || (self == Scope::Payloads && needed == Scope::Read)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Payloads => "payloads",
            Scope::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ingest" => Ok(Scope::Ingest),
            "read" => Ok(Scope::Read),
            "payloads" => Ok(Scope::Payloads),
            "admin" => Ok(Scope::Admin),
            other => Err(format!("scope {other:?} is not ingest, read, payloads or admin")),
        }
    }
}

/// One key as the keys file keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredKey {
    pub id: String,
    pub tenant: String,
    pub scope: Scope,
    /// SHA-256 of the secret, hex.
    pub sha256: String,
    pub created_ms: i64,
    #[serde(default)]
    pub revoked_ms: Option<i64>,
}

/// The keys file: JSON, written whole (to a temporary file, then renamed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    pub keys: Vec<StoredKey>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("keys file {}: {why}", path.display())]
    File { path: PathBuf, why: String },
    #[error("no randomness for a key: {0}")]
    Random(String),
    #[error("no key {0}")]
    UnknownKey(String),
}

const PREFIX: &str = "ssk_";
const ID_BYTES: usize = 6;

/// A token of a node of this log asking another itself, not for a caller:
/// `PEER_PREFIX` and the node's peer key, whose hash the node announces in the
/// log's directory. It reads, never changes (see `docs/scale-out.md`).
pub const PEER_PREFIX: &str = "sspeer_";

/// The public id of a key given whole (`ssk_ID_SECRET`), else what was given.
fn public_id(given: &str) -> &str {
    given
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split_once('_'))
        .map_or(given, |(id, _)| id)
}

/// A new key: the token to hand out once, and what the keys file keeps of it.
#[derive(Debug)]
pub struct NewKey {
    pub token: String,
    pub stored: StoredKey,
}

pub fn generate(tenant: &str, scope: Scope, now_ms: i64) -> Result<NewKey, AuthError> {
    let mut bytes = [0u8; ID_BYTES + SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
    let (id, secret) = (hex(&bytes[..ID_BYTES]), hex(&bytes[ID_BYTES..]));
    Ok(NewKey {
        token: format!("{PREFIX}{id}_{secret}"),
        stored: StoredKey {
            id,
            tenant: tenant.to_owned(),
            scope,
            sha256: digest(&secret),
            created_ms: now_ms,
            revoked_ms: None,
        },
    })
}

impl KeyFile {
    /// The file at `path`; an empty one when there is none.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::parse(path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(AuthError::File {
                path: path.to_owned(),
                why: e.to_string(),
            }),
        }
    }

    fn parse(path: &Path, bytes: &[u8]) -> Result<Self, AuthError> {
        serde_json::from_slice(bytes).map_err(|e| AuthError::File {
            path: path.to_owned(),
            why: e.to_string(),
        })
    }

    /// Writes the file whole, readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), AuthError> {
        let fail = |e: std::io::Error| AuthError::File {
            path: path.to_owned(),
            why: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_vec_pretty(self).map_err(|e| fail(std::io::Error::other(e)))?;
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(fail)?;
            f.write_all(&text).map_err(fail)?;
            f.sync_all().map_err(fail)?;
        }
        std::fs::rename(&tmp, path).map_err(fail)
    }

    /// The key of public id `id`, or of the whole key `id`.
    pub fn find(&self, id: &str) -> Option<&StoredKey> {
        let id = public_id(id);
        self.keys.iter().find(|k| k.id == id)
    }

    /// Revokes the key of public id `id`, or of the whole key `id` (only its
    /// id is read, and only its id is ever shown again); the id revoked.
    pub fn revoke(&mut self, id: &str, now_ms: i64) -> Result<String, AuthError> {
        let id = public_id(id);
        let key = self
            .keys
            .iter_mut()
            .find(|k| k.id == id)
            .ok_or_else(|| AuthError::UnknownKey(id.to_owned()))?;
        key.revoked_ms = key.revoked_ms.or(Some(now_ms));
        Ok(id.to_owned())
    }
}

/// The refusal of a caller whose key does not allow `needed` (open while no
/// key exists, as [`unless_admin`]).
pub fn unless_scope(caller: Option<&Caller>, needed: Scope, what: &str) -> Option<axum::response::Response> {
    match caller {
        Some(c) if !c.scope.allows(needed) && !c.key_id.is_empty() => Some(
            ApiError::new(
                ErrorKind::Forbidden,
                format!(
                    "{what}: a {} key cannot; it needs {}",
                    c.scope.as_str(),
                    needed.as_str()
                ),
            )
            .into_response(),
        ),
        _ => None,
    }
}

/// Who a request is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub tenant: String,
    pub scope: Scope,
    pub key_id: String,
}

/// The refusal of a caller that is not an admin, when it is one: changes and
/// the audit log are for admin keys; open, like everything, while no key
/// exists (a caller with no key id came through a keyless route).
pub fn unless_admin(caller: Option<&Caller>, what: &str) -> Option<axum::response::Response> {
    match caller {
        Some(c) if c.scope != Scope::Admin && !c.key_id.is_empty() => {
            Some(ApiError::new(ErrorKind::Forbidden, format!("{what}: for admin keys")).into_response())
        }
        _ => None,
    }
}

impl Caller {
    /// A caller named by where it came from (a bound listener, a trusted
    /// gateway), not by a key.
    pub fn keyless(tenant: String, scope: Scope) -> Self {
        Self {
            tenant,
            scope,
            key_id: String::new(),
        }
    }

    /// The tenant a request belongs to: its caller's, else `default`.
    pub fn tenant_of<B>(request: &axum::http::Request<B>) -> &str {
        request
            .extensions()
            .get::<Caller>()
            .map_or(streamsight_node::config::DEFAULT_TENANT, |c| c.tenant.as_str())
    }
}

/// The live keys, by id, and the tenant of each revoked one (a refusal of a
/// revoked key is counted for the team it concerns).
#[derive(Debug, Default)]
pub struct Keys {
    by_id: HashMap<String, StoredKey>,
    revoked: HashMap<String, String>,
}

impl Keys {
    pub fn new(file: &KeyFile) -> Self {
        let (live, revoked): (Vec<&StoredKey>, Vec<&StoredKey>) =
            file.keys.iter().partition(|k| k.revoked_ms.is_none());
        Self {
            by_id: live.into_iter().map(|k| (k.id.clone(), k.clone())).collect(),
            revoked: revoked.into_iter().map(|k| (k.id.clone(), k.tenant.clone())).collect(),
        }
    }

    /// True when a key was ever made here (a revoked key was once live).
    fn ever_had_a_key(&self) -> bool {
        !self.by_id.is_empty() || !self.revoked.is_empty()
    }

    /// The tenant and id of the key a token names, live or revoked, whether or
    /// not its secret matches; `None` for an id the keys file never held (a
    /// caller's guess is never a label).
    pub fn named(&self, token: &str) -> Option<(String, String)> {
        let id = token.strip_prefix(PREFIX)?.split_once('_')?.0;
        self.by_id
            .get(id)
            .map(|k| (k.tenant.clone(), k.id.clone()))
            .or_else(|| self.revoked.get(id).map(|tenant| (tenant.clone(), id.to_owned())))
    }

    /// The live keys of a keys file's bytes; none when it is empty.
    fn from_file(path: &Path, bytes: &[u8]) -> Result<Self, AuthError> {
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        Ok(Self::new(&KeyFile::parse(path, bytes)?))
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The caller a token names, if it is a live key.
    pub fn verify(&self, token: &str) -> Option<Caller> {
        let (id, secret) = token.strip_prefix(PREFIX)?.split_once('_')?;
        let key = self.by_id.get(id)?;
        constant_time_eq(digest(secret).as_bytes(), key.sha256.as_bytes()).then(|| Caller {
            tenant: key.tenant.clone(),
            scope: key.scope,
            key_id: key.id.clone(),
        })
    }
}

/// What the keys file means for a request now.
#[derive(Debug)]
pub enum KeyState {
    /// No key was ever needed: loopback listeners, no key ever made (or
    /// `insecure_no_auth`). Every request is let through.
    Open,
    /// Requests need one of these keys.
    Keyed(Arc<Keys>),
    /// Keys are required and none is live: every request but the probes is
    /// refused, with this reason. Never open again by a key going.
    Locked(&'static str),
}

/// Why a collector whose keys are required, and none live, refuses everyone.
pub const NO_LIVE_KEY: &str = "the keys file holds no live key, and this collector requires one (a listener beyond loopback, or keys were in use): every request but /healthz and /readyz is refused until an admin creates one (`streamsight keys create`)";

/// The keys file, read again when it changes.
#[derive(Debug)]
pub struct ReloadingKeys {
    path: PathBuf,
    current: RwLock<(Arc<Keys>, Vec<u8>)>,
    audit: std::sync::OnceLock<crate::reload::AuditSink>,
    /// Set for good once keys are required: a listener beyond loopback, or a
    /// key was ever live. From then on a file with no live key locks every
    /// request out instead of letting every request in.
    required: std::sync::atomic::AtomicBool,
    /// `insecure_no_auth`: said on purpose, so never required.
    insecure: bool,
    /// Whether the lock was said (once each time it begins).
    locked_said: std::sync::atomic::AtomicBool,
    /// The last reload failure said: the same one is not said every check.
    last_failure: crate::reload::SaidOnce,
}

impl ReloadingKeys {
    /// The keys at `path` (none when it does not exist). With `insecure`
    /// (`insecure_no_auth`), a file with no live key lets everyone in;
    /// without it, that happens only until keys are required.
    pub fn new(path: PathBuf, insecure: bool) -> Result<Self, AuthError> {
        let bytes = std::fs::read(&path).unwrap_or_default();
        let keys = Keys::from_file(&path, &bytes)?;
        let ever = keys.ever_had_a_key();
        let reloading = Self {
            path,
            current: RwLock::new((Arc::new(keys), bytes)),
            audit: std::sync::OnceLock::new(),
            required: std::sync::atomic::AtomicBool::new(ever && !insecure),
            insecure,
            locked_said: std::sync::atomic::AtomicBool::new(false),
            last_failure: crate::reload::SaidOnce::default(),
        };
        reloading.say_lock();
        Ok(reloading)
    }

    /// From now on a file with no live key refuses everyone (a listener is
    /// beyond loopback); nothing with `insecure_no_auth`.
    pub fn require(&self) {
        if !self.insecure {
            self.required.store(true, std::sync::atomic::Ordering::Release);
            self.say_lock();
        }
    }

    /// What a request meets now.
    pub fn state(&self) -> KeyState {
        let keys = self.keys();
        if !keys.is_empty() {
            KeyState::Keyed(keys)
        } else if self.required.load(std::sync::atomic::Ordering::Acquire) {
            KeyState::Locked(NO_LIVE_KEY)
        } else {
            KeyState::Open
        }
    }

    /// Says once, at error level, that everyone is locked out (and once more
    /// each time that begins again).
    fn say_lock(&self) {
        use std::sync::atomic::Ordering;
        match self.state() {
            KeyState::Locked(why) => {
                if !self.locked_said.swap(true, Ordering::AcqRel) {
                    tracing::error!(path = %self.path.display(), "{why}");
                }
            }
            _ => self.locked_said.store(false, Ordering::Release),
        }
    }

    /// A reload that failed, said when it differs from the last one said.
    fn failed(&self, why: String) {
        self.last_failure.failed(self.audit.get(), Failure::KeysReload, why);
    }

    /// From now on, keys that appear or go are reported to `sink`.
    pub fn audit_to(&self, sink: crate::reload::AuditSink) {
        let _ = self.audit.set(sink);
    }

    pub fn keys(&self) -> Arc<Keys> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone()
    }
}

impl crate::reload::Reload for ReloadingKeys {
    fn reload_if_changed(&self) -> bool {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            // A file that went is no statement about keys (a volume not yet
            // mounted, a deploy's mistake): the last good keys stay, so
            // nothing opens. Keys are ended by revoking them.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Never there (a collector with no keys yet): nothing to say.
                if self
                    .current
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .1
                    .is_empty()
                {
                    return false;
                }
                self.failed(format!(
                    "keys file {} is gone; keeping the keys last read (end keys with `streamsight keys revoke`)",
                    self.path.display()
                ));
                return false;
            }
            Err(e) => {
                self.failed(format!(
                    "keys file {} unreadable; keeping the keys: {e}",
                    self.path.display()
                ));
                return false;
            }
        };
        if self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).1 == bytes {
            return false;
        }
        let keys = match Keys::from_file(&self.path, &bytes) {
            Ok(keys) => keys,
            Err(e) => {
                self.failed(format!("keys file invalid; keeping the keys: {e}"));
                return false;
            }
        };
        self.last_failure.clear();
        if keys.ever_had_a_key() && !self.insecure {
            self.required.store(true, std::sync::atomic::Ordering::Release);
        }
        let previous = self.keys();
        if let Some(sink) = self.audit.get() {
            for k in keys.by_id.values().filter(|k| !previous.by_id.contains_key(&k.id)) {
                let event = streamsight_core::AuditEvent::KeyCreated {
                    id: k.id.clone(),
                    tenant: k.tenant.clone(),
                    scope: k.scope.as_str().to_owned(),
                };
                sink.report(&k.tenant, event);
            }
            for k in previous.by_id.values().filter(|k| !keys.by_id.contains_key(&k.id)) {
                let event = streamsight_core::AuditEvent::KeyRevoked {
                    id: k.id.clone(),
                    tenant: k.tenant.clone(),
                };
                sink.report(&k.tenant, event);
            }
        }
        let live = keys.by_id.len();
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = (Arc::new(keys), bytes);
        tracing::info!(path = %self.path.display(), live, "keys reloaded");
        self.say_lock();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_key_is_revoked_by_its_id_and_its_secret_never_shown() {
        let key = generate("default", Scope::Read, 1).unwrap();
        let secret = key.token.rsplit('_').next().unwrap().to_owned();
        let mut file = KeyFile {
            keys: vec![key.stored.clone()],
        };
        assert_eq!(file.revoke(&key.token, 2).unwrap(), key.stored.id);
        assert_eq!(file.keys[0].revoked_ms, Some(2));
        let unknown = generate("default", Scope::Read, 1).unwrap();
        let err = file.revoke(&unknown.token, 3).unwrap_err().to_string();
        assert!(err.contains(&unknown.stored.id) && !err.contains(&secret), "{err}");
        let other_secret = unknown.token.rsplit('_').next().unwrap();
        assert!(!err.contains(other_secret), "{err}");
    }

    #[test]
    fn a_key_is_checked_by_its_id_and_hash_and_revoking_it_ends_it() {
        let a = generate("default", Scope::Read, 1).unwrap();
        let b = generate("default", Scope::Ingest, 2).unwrap();
        assert!(a.token.starts_with("ssk_") && a.token.len() == 4 + 12 + 1 + 64);
        assert!(!a.stored.sha256.contains(&a.token[17..]), "the secret is not stored");
        let mut file = KeyFile {
            keys: vec![a.stored.clone(), b.stored.clone()],
        };
        let keys = Keys::new(&file);
        let caller = keys.verify(&a.token).unwrap();
        assert_eq!(
            (caller.scope, caller.key_id.as_str()),
            (Scope::Read, a.stored.id.as_str())
        );
        // Another key's secret under this id, a changed byte, garbage: nobody.
        let swapped = format!("ssk_{}_{}", a.stored.id, &b.token[17..]);
        let mut flipped = a.token.clone();
        flipped.pop();
        flipped.push(if a.token.ends_with('0') { '1' } else { '0' });
        for bad in [swapped.as_str(), flipped.as_str(), "ssk_", "", "Bearer x", "ssk_zz_zz"] {
            assert_eq!(keys.verify(bad), None, "{bad}");
        }
        file.revoke(&a.stored.id, 3).unwrap();
        assert_eq!(Keys::new(&file).verify(&a.token), None);
        assert!(Keys::new(&file).verify(&b.token).is_some());
        assert!(file.revoke("nope", 4).is_err());
    }

    #[test]
    fn scopes() {
        assert!(Scope::Admin.allows(Scope::Ingest) && Scope::Admin.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Ingest) && !Scope::Ingest.allows(Scope::Read));
        // Payloads read, and more; read does not imply payloads.
        assert!(Scope::Payloads.allows(Scope::Read) && !Scope::Read.allows(Scope::Payloads));
        assert!(!Scope::Payloads.allows(Scope::Ingest) && Scope::Admin.allows(Scope::Payloads));
        assert!(constant_time_eq(b"ab", b"ab") && !constant_time_eq(b"ab", b"ac") && !constant_time_eq(b"a", b"ab"));
    }
}
