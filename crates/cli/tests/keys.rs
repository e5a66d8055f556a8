//! `streamsight keys`: a key is printed once and stored hashed; list never shows
//! it; revoke marks it; `serve` refuses a public address without keys.
#![allow(clippy::unwrap_used)]

mod support;

#[test]
fn keys_are_created_once_listed_without_their_secret_and_revoked() {
    let dir = std::env::temp_dir().join(format!("streamsight-keys-cli-{}", std::process::id()));
    let path = dir.join("keys.json");
    let file = path.to_str().unwrap();
    let (ok, token, err) = support::run(&["keys", "create", "--scope", "ingest", "--keys-file", file]);
    assert!(ok, "{err}");
    let token = token.trim();
    assert!(token.starts_with("ssk_"), "{token}");
    let id = &token[4..16];
    assert!(err.contains(id) && err.contains("only this once"), "{err}");
    let stored = std::fs::read_to_string(&path).unwrap();
    assert!(!stored.contains(&token[17..]), "the secret is on disk");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

    let (ok, list, _) = support::run(&["keys", "list", "--keys-file", file]);
    assert!(
        ok && list.contains(id) && list.contains("ingest") && !list.contains(&token[17..]),
        "{list}"
    );
    let (ok, _, err) = support::run(&["keys", "revoke", id, "--keys-file", file]);
    assert!(ok, "{err}");
    let (_, list, _) = support::run(&["keys", "list", "--keys-file", file]);
    let row = list.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(!row.trim_end().ends_with('-'), "not marked revoked: {row}");
    // Revoking it again says it already was, and when; nothing changes.
    let before = std::fs::read(&path).unwrap();
    let (ok, _, err) = support::run(&["keys", "revoke", id, "--keys-file", file]);
    assert!(ok && err.contains("already revoked at 20"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Columns line up whatever the scope (`payloads` is the longest) and
    // times read as ISO-8601 UTC.
    let payloads = support::create_key(file, "payloads");
    let (_, list, _) = support::run(&["keys", "list", "--keys-file", file]);
    let lines: Vec<&str> = list.lines().collect();
    let column = |line: &str, word: &str| line.find(word).unwrap();
    let created = column(lines[0], "CREATED");
    let row = lines.iter().find(|l| l.starts_with(&payloads[4..16])).unwrap();
    assert_eq!(column(row, "payloads"), column(lines[0], "SCOPE"), "{list}");
    assert_eq!(&row[created..created + 2], "20", "{list}");
    let (ok, _, err) = support::run(&["keys", "revoke", "nope", "--keys-file", file]);
    assert!(!ok && err.contains("no key nope"), "{err}");
    // Given whole, a key is revoked by its id; its secret is never printed back.
    let (_, other, _) = support::run(&["keys", "create", "--scope", "read", "--keys-file", file]);
    let other = other.trim();
    let (ok, out, err) = support::run(&["keys", "revoke", other, "--keys-file", file]);
    assert!(ok && err.contains(&other[4..16]), "{err}");
    assert!(!err.contains(&other[17..]) && !out.contains(&other[17..]), "{err}");
    let (ok, _, err) = support::run(&[
        "keys",
        "revoke",
        &format!("ssk_000000000000_{}", &other[17..]),
        "--keys-file",
        file,
    ]);
    assert!(
        !ok && err.contains("no key 000000000000") && !err.contains(&other[17..]),
        "{err}"
    );
    let (ok, _, err) = support::run(&["keys", "create", "--scope", "owner", "--keys-file", file]);
    assert!(!ok && err.contains("ingest, read, payloads or admin"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serve_refuses_a_public_address_without_keys() {
    let missing = std::env::temp_dir().join(format!("streamsight-keys-none-{}/keys.json", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["serve", "--api-listen", "0.0.0.0:0", "--intake-listen", "127.0.0.1:0"])
        .args(["--otlp-listen", "127.0.0.1:0"])
        .args(["--storage", "memory://"])
        .env("STREAMSIGHT_KEYS_FILE", &missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without API keys") && err.contains("--insecure-no-auth"),
        "{err}"
    );
}
