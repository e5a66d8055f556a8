//! A collector started under a permissive umask (022) still writes its
//! teams' data for its own user only: directories 0700, the default and each
//! tenant's database with its -wal and -shm 0600, the keys file 0600.
#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;

/// Every path under `dir`, `dir` included.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut paths = vec![dir.to_owned()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            paths.extend(walk(&path));
        } else {
            paths.push(path);
        }
    }
    paths
}

#[test]
fn data_files_and_directories_are_private_whatever_the_umask() {
    let dir = std::env::temp_dir().join(format!("streamsight-private-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    let keys = data.join("keys.json");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("streamsight.toml");
    std::fs::write(&config, "[[serve.tenants]]\nname = \"team-b\"\n").unwrap();
    // Made by the CLI under umask 022 too.
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 022; exec {} keys create --config {} --scope admin --tenant team-b --keys-file {}",
            env!("CARGO_BIN_EXE_streamsight"),
            config.display(),
            keys.display()
        ))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c").arg(format!(
        "umask 022; exec {} serve --config {} --intake-listen 127.0.0.1:0 --api-listen 127.0.0.1:0 \
         --otlp-listen 127.0.0.1:0 --storage sqlite://{}/streamsight.db --keys-file {}",
        env!("CARGO_BIN_EXE_streamsight"),
        config.display(),
        data.display(),
        keys.display()
    ));
    let (collector, line) = support::start(&mut cmd, "streamsight serving");
    // A write in team-b's store, so that its WAL exists.
    let intake = support::field(&line, "intake");
    let at_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let payload = support::dsm::payload("svc", vec![(at_ms, vec![support::dsm::produce("orders", 0, 10)])]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("{intake}/v0.1/pipeline_stats"))
            .bearer_auth(&key)
            .header("Content-Type", "application/msgpack")
            .header("Content-Encoding", "gzip")
            .body(streamsight_wire::dsm::payload::encode(&payload))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(status, 202);
    let paths = walk(&data);
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    for wanted in [
        "tenants/team-b.db",
        "tenants/team-b.db-wal",
        "streamsight.db",
        "keys.json",
    ] {
        assert!(names.iter().any(|n| n.ends_with(wanted)), "{wanted} in {names:#?}");
    }
    for path in &paths {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let wanted = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, wanted, "{} is {mode:o}", path.display());
    }
    drop(collector);
    std::fs::remove_dir_all(&dir).unwrap();
}
