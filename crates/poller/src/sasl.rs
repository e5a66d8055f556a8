//! SASL authentication: PLAIN, and SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as
//! Kafka speaks them, through SaslHandshake v1 and SaslAuthenticate. The SCRAM
//! exchange is a pure state machine, tested against the RFC's vector.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

/// `[serve.clusters.sasl]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaslConfig {
    pub mechanism: Mechanism,
    pub username: String,
    /// Never logged nor shown by the API.
    #[serde(skip_serializing)]
    pub password: String,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// The first message PLAIN sends: authorization id (empty), user, password.
/// Kafka's own maximum (`scram.iterations` up to 16,384), with room to spare: a
/// hostile broker asking for billions would otherwise burn a core per login.
pub(crate) const MAX_SCRAM_ITERATIONS: u32 = 65_536;

pub(crate) fn plain(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// A SCRAM exchange in progress, from the client's side.
pub(crate) struct Scram {
    mechanism: Mechanism,
    password: String,
    client_nonce: String,
    first_bare: String,
    server_signature: Vec<u8>,
}

impl std::fmt::Debug for Scram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scram")
            .field("mechanism", &self.mechanism)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Scram {
    pub(crate) fn new(mechanism: Mechanism, username: &str, password: &str, client_nonce: String) -> Self {
        let user = username.replace('=', "=3D").replace(',', "=2C");
        Self {
            mechanism,
            password: password.to_owned(),
            first_bare: format!("n={user},r={client_nonce}"),
            client_nonce,
            server_signature: Vec::new(),
        }
    }

    /// A fresh random nonce, printable.
    pub(crate) fn nonce() -> String {
        let mut bytes = [0u8; 24];
        // Without randomness a nonce is predictable: fail the exchange rather than that.
        if getrandom::fill(&mut bytes).is_err() {
            return String::new();
        }
        B64.encode(bytes)
    }

    pub(crate) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// The proof answering the server's first message.
    pub(crate) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        if self.client_nonce.is_empty() {
            return Err("no randomness for a nonce".into());
        }
        let server_first = std::str::from_utf8(server_first).map_err(|_| "server-first is not utf-8")?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|_| "salt is not base64")?),
                Some(("i", v)) => iterations = Some(v.parse::<u32>().map_err(|_| "iteration count is not a number")?),
                Some(("e", v)) => return Err(format!("server refused: {v}")),
                _ => {}
            }
        }
        let nonce = nonce.ok_or("server-first has no nonce")?;
        if !nonce.starts_with(&self.client_nonce) {
            return Err("server nonce does not extend ours".into());
        }
        let salt = salt.ok_or("server-first has no salt")?;
        let iterations = iterations
            .filter(|&i| i > 0)
            .ok_or("server-first has no iteration count")?;
        if iterations > MAX_SCRAM_ITERATIONS {
            return Err(format!(
                "server asks for {iterations} iterations; more than {MAX_SCRAM_ITERATIONS} is refused"
            ));
        }
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let salted = self.salted_password(&salt, iterations);
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = self.hash(&client_key);
        let signature = self.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = self.hmac(&salted, b"Server Key");
        self.server_signature = self.hmac(&server_key, auth_message.as_bytes());
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server proved it knows the password too.
    pub(crate) fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final).map_err(|_| "server-final is not utf-8")?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("server refused: {e}"));
        }
        let v = text.strip_prefix("v=").ok_or("server-final has no verifier")?;
        let v = v.split(',').next().unwrap_or("");
        if B64.decode(v).ok().as_deref() == Some(&self.server_signature[..]) {
            Ok(())
        } else {
            Err("server signature does not match: not the broker we think".into())
        }
    }

    fn salted_password(&self, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self.mechanism {
            Mechanism::ScramSha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<sha2::Sha512>(self.password.as_bytes(), salt, iterations, &mut out);
                out.to_vec()
            }
            _ => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(self.password.as_bytes(), salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            // HMAC takes keys of any length.
            let Ok(mut m) = <M as KeyInit>::new_from_slice(key) else {
                return Vec::new();
            };
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        match self.mechanism {
            Mechanism::ScramSha512 => mac::<hmac::Hmac<sha2::Sha512>>(key, data),
            _ => mac::<hmac::Hmac<sha2::Sha256>>(key, data),
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        use sha2::Digest;
        match self.mechanism {
            Mechanism::ScramSha512 => sha2::Sha512::digest(data).to_vec(),
            _ => sha2::Sha256::digest(data).to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3.
    #[test]
    fn scram_sha_256_matches_the_rfc_vector() {
        let mut s = Scram::new(Mechanism::ScramSha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(s.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_ = s.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(final_).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        s.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(s.verify_server_final(b"v=AAAA").is_err());
    }

    #[test]
    fn a_server_that_does_not_extend_our_nonce_or_refuses_is_an_error() {
        let mut s = Scram::new(Mechanism::ScramSha512, "u", "p", "abc".into());
        assert!(s.client_final(b"r=xyz,s=AAAA,i=1").is_err());
        assert!(s.client_final(b"e=unknown-user").unwrap_err().contains("unknown-user"));
        assert!(s.client_final(b"r=abcd,s=!!,i=1").is_err());
        assert!(s.client_final(b"r=abcd,s=AAAA,i=0").is_err());
        let started = std::time::Instant::now();
        let greedy = s.client_final(b"r=abcd,s=AAAA,i=4000000000").unwrap_err();
        assert!(greedy.contains("refused"), "{greedy}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "refused before deriving"
        );
    }

    #[test]
    fn usernames_are_escaped_and_passwords_never_printed() {
        let s = Scram::new(Mechanism::ScramSha256, "a=b,c", "p", "n".into());
        assert_eq!(s.client_first(), b"n,,n=a=3Db=2Cc,r=n");
        let c = SaslConfig {
            mechanism: Mechanism::Plain,
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        let scram = Scram::new(Mechanism::ScramSha256, "u", "hunter2", "n".into());
        assert!(!format!("{scram:?}").contains("hunter2"));
        assert_eq!(plain("u", "p"), b"\0u\0p");
    }
}
