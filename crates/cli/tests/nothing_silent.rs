//! Nothing silent: a command that finds nothing says what it looked at and
//! why, on stderr, failing where something specific was asked for; a network
//! error names the address, the cause and what to check; a reader that goes
//! away (`| head`) is no error.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::process::{Command, Stdio};
use support::{run, start};

/// `streamsight dev-kafka`: a broker that cannot list groups.
fn mock_broker() -> (support::Guard, String) {
    let (guard, line) = start(
        Command::new(env!("CARGO_BIN_EXE_streamsight")).args(["dev-kafka", "--topic", "orders:2"]),
        "bootstrap=",
    );
    let bootstrap = support::field(&line, "bootstrap");
    (guard, bootstrap)
}

#[test]
fn lag_straight_from_a_broker_says_why_it_found_nothing() {
    let (_broker, bootstrap) = mock_broker();
    let (ok, out, err) = run(&["lag", "--bootstrap-server", &bootstrap]);
    assert!(ok, "{err}");
    assert!(out.starts_with("GROUP"), "{out}");
    assert!(err.contains("ListGroups") && err.contains("--group"), "{err}");

    let (ok, _, err) = run(&["lag", "--bootstrap-server", &bootstrap, "--group", "nope"]);
    assert!(!ok, "a group asked for and not found is an error");
    assert!(err.contains("\"nope\"") && err.contains(&bootstrap), "{err}");
}

#[test]
fn lag_from_a_collector_says_why_it_found_nothing_and_where_it_looked() {
    let (_serve, _, api) = support::serve("memory://");
    let (ok, _, err) = run(&["lag", "--collector", &api]);
    assert!(ok, "{err}");
    assert!(err.contains(&api) && err.contains("no lag"), "{err}");
    let (ok, _, err) = run(&["lag", "--collector", &api, "--group", "billing"]);
    assert!(!ok && err.contains("\"billing\""), "{err}");

    let (ok, _, err) = run(&["dlq", "list", "--collector", &api]);
    assert!(ok, "{err}");
    assert!(
        err.contains("watches no dead-letter topic") && err.contains("[[serve.dlq]]"),
        "{err}"
    );
}

#[test]
fn network_errors_name_the_address_the_cause_and_what_to_check() {
    let (ok, _, err) = run(&["lag", "--collector", "notaurl"]);
    assert!(
        !ok && err.contains("notaurl") && err.contains("http://HOST:PORT"),
        "{err}"
    );
    assert!(!err.contains("builder error"), "{err}");
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (ok, _, err) = run(&["lag", "--collector", &url]);
    assert!(!ok, "{err}");
    assert!(
        err.contains(&url) && err.contains("refused") && err.contains("streamsight serve"),
        "{err}"
    );
    // Said once: one line, its cause not repeated.
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(err.matches("refused").count(), 1, "{err}");
}

#[test]
fn a_probe_that_reaches_nothing_fails_saying_why() {
    let port = support::free_port();
    let at = format!("127.0.0.1:{port}");
    let started = std::time::Instant::now();
    let (ok, out, err) = run(&[
        "probe",
        "--bootstrap-server",
        &at,
        "--duration",
        "2s",
        "--report-every",
        "1s",
    ]);
    // Its 2 s, and a bounded stop: not a metadata request's whole 20 s SLA.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(!ok, "{out}");
    assert!(out.contains("no partition probed"), "{out}");
    assert!(err.contains("reached no partition") && err.contains(&at), "{err}");
}

#[test]
fn dumping_a_store_that_is_not_there_makes_none() {
    let dir = std::env::temp_dir().join(format!("streamsight-nothere-{}", std::process::id()));
    let path = dir.join("x.db");
    let (ok, out, err) = run(&["store", "dump", "--storage", &format!("sqlite://{}", path.display())]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("no store at"), "{err}");
    assert!(!dir.exists(), "the dump made {dir:?}");
    let (ok, _, err) = run(&["store", "dump", "--storage", "memory://"]);
    assert!(!ok && err.contains("nothing to dump"), "{err}");
}

#[test]
fn a_reader_that_goes_away_is_no_error() {
    // `scenario bursty` writes megabytes; its reader closes at once.
    let mut child = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["scenario", "bursty", "--hours", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

#[test]
fn serve_says_when_a_polled_cluster_cannot_list_its_groups() {
    use std::io::BufRead;
    let (_broker, bootstrap) = mock_broker();
    let mut child = Command::new(env!("CARGO_BIN_EXE_streamsight"))
        .args(["serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .args(["--otlp-listen", "127.0.0.1:0", "--storage", "memory://"])
        .args(["--cluster", &format!("dev={bootstrap}")])
        .env("STREAMSIGHT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let guard = support::Guard(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let said = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("no consumer groups listed") => break line,
            Ok(_) => {}
            Err(e) => panic!("serve never said its groups cannot be listed: {e}"),
        }
    };
    assert!(said.contains("ListGroups") && said.contains("groups = [...]"), "{said}");
    drop(guard);
}
