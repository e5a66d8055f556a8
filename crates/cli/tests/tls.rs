//! The CLI against a collector serving TLS with a private CA, and with a
//! self-signed certificate made as `openssl req -x509` makes it (a CA
//! certificate used as the server's): refused with what to do, then trusted
//! with `--ca-file` or `STREAMSIGHT_CA_FILE`; the start line says `https://`.
#![allow(clippy::unwrap_used)]

mod support;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A collector serving `cert`/`key` on its API and intake: (guard, API URL, start line).
fn serve_tls(name: &str, cert: &str, key: &str) -> (support::Guard, String, String) {
    let dir = std::env::temp_dir().join(format!("streamsight-cli-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cert.pem"), cert).unwrap();
    std::fs::write(dir.join("key.pem"), key).unwrap();
    let d = dir.display();
    let toml = format!(
        "[serve.api_tls]\ncert_file = \"{d}/cert.pem\"\nkey_file = \"{d}/key.pem\"\n\
         [serve.intake_tls]\ncert_file = \"{d}/cert.pem\"\nkey_file = \"{d}/key.pem\"\n"
    );
    let (guard, line) = support::serve_with_line(name, &toml, "memory://");
    let api = support::field(&line, "api");
    (guard, api, line)
}

fn lag(api: &str, ca_file: Option<&std::path::Path>, env: Option<&std::path::Path>) -> (bool, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_streamsight"));
    cmd.args(["lag", "--collector", api]).env_remove("STREAMSIGHT_CA_FILE");
    if let Some(path) = ca_file {
        cmd.arg("--ca-file").arg(path);
    }
    if let Some(path) = env {
        cmd.env("STREAMSIGHT_CA_FILE", path);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn the_cli_trusts_a_private_ca_or_a_self_signed_certificate_when_told_and_says_how_when_not() {
    let dir = std::env::temp_dir().join(format!("streamsight-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // A private CA and a server certificate it signed.
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let cert = CertificateParams::new(names.clone())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let (_collector, api, line) = serve_tls("private-ca", &cert.pem(), &key.serialize_pem());
    for listener in ["intake=https://", "api=https://", "otlp=https://"] {
        assert!(line.contains(listener), "{line}");
    }
    let (ok, out) = lag(&api, None, None);
    assert!(!ok && out.contains("not trusted") && out.contains("--ca-file"), "{out}");
    let (ok, out) = lag(&api, Some(&ca_file), None);
    assert!(ok, "{out}");
    let (ok, out) = lag(&api, None, Some(&ca_file));
    assert!(ok, "{out}");

    // Self-signed, saying it is a CA (`openssl req -x509`'s default).
    let mut own = CertificateParams::new(names).unwrap();
    own.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let own_key = KeyPair::generate().unwrap();
    let own = own.self_signed(&own_key).unwrap();
    let own_file = dir.join("own.pem");
    std::fs::write(&own_file, own.pem()).unwrap();
    let (_collector, api, _) = serve_tls("self-signed", &own.pem(), &own_key.serialize_pem());
    let (ok, out) = lag(&api, None, None);
    assert!(!ok && out.contains("--ca-file"), "{out}");
    let (ok, out) = lag(&api, Some(&own_file), None);
    assert!(ok, "{out}");
    // Another CA's file does not make it trusted.
    let (ok, _) = lag(&api, Some(&ca_file), None);
    assert!(!ok);

    // A CA file that is not one: named, with what is wrong.
    let bad = dir.join("bad.pem");
    std::fs::write(&bad, "not a certificate").unwrap();
    let (ok, out) = lag(&api, Some(&bad), None);
    assert!(
        !ok && out.contains("bad.pem") && out.contains("no PEM certificate"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
