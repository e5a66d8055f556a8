//! The soak's CI form: `scripts/soak.py` for 3 minutes (1 of warm-up) against
//! the binary under test, with the whole mix (200 services' Data Streams
//! payloads, OTLP spans and logs, Apache Kafka with 500 groups polled, a probe,
//! a DLQ monitor, the default alert rules, dashboard refreshes). It must end with
//! the collector alive, every request answered 2xx, no error logged, every
//! part of the mix seen. The hour-long run and its goals: RELIABILITY.md.
#![allow(clippy::unwrap_used)]

mod support;

#[test]
fn three_minutes_of_the_realistic_mix() {
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("soak");
    let status = std::process::Command::new(support::python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soak.py"))
        .args([
            "--minutes",
            "3",
            "--warmup",
            "1",
            "--binary",
            env!("CARGO_BIN_EXE_streamsight"),
        ])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the soak failed: see its output above and {}",
        out.display()
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("soak.json")).unwrap()).unwrap();
    assert_eq!(report["samples"].as_array().unwrap().len(), 3, "{report}");
    assert_eq!(report["goals"]["errors_logged"]["value"], 0, "{report}");
    assert!(out.join("soak.png").exists());
}
