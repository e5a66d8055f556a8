//! Apache Kafka for tests: one KRaft node (broker and controller) run by
//! `scripts/kafka start` from the jars `scripts/kafka install` put into
//! `.tools/kafka` (scripts/test installs them). A test binary shares one node
//! ([`ApacheKafka::shared`], started once, its tests naming their topics and
//! groups uniquely with [`unique`]); a test that kills or configures its
//! broker starts its own ([`ApacheKafka::start_with`]).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The repository's `scripts/kafka`.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka")
}

/// Whether `scripts/kafka install` has run.
pub fn installed() -> bool {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools/kafka/libs")
        .is_dir()
}

/// Runs one of Apache Kafka's own command-line tools (`class`, e.g.
/// `org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`) from the
/// installed jars: (success, stdout, stderr). The broker's truth, read by
/// the broker's own code, for a test to compare with streamsight's.
pub fn kafka_tool(class: &str, args: &[&str]) -> (bool, String, String) {
    let libs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/kafka/libs/*");
    let java =
        std::env::var_os("JAVA_HOME").map_or_else(|| PathBuf::from("java"), |h| PathBuf::from(h).join("bin/java"));
    let out = Command::new(java)
        .arg("-cp")
        .arg(libs)
        .arg(class)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run java for {class}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A table one of Kafka's tools printed (see [`kafka_tool`]): the rows after
/// the line that starts with `header` (its first column's name) up to a blank
/// line, each as its values by column name. Values are read from the right:
/// the one column whose values hold a space (`COORDINATOR (ID)`) is the
/// only one that may take more than a word.
pub fn tool_table(out: &str, header: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(header));
    let Some(names) = lines.next() else {
        return Vec::new();
    };
    let names = names.replace("COORDINATOR (ID)", "COORDINATOR");
    let names: Vec<&str> = names.split_whitespace().collect();
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let values: Vec<&str> = l.split_whitespace().collect();
            let skip = values.len().saturating_sub(names.len());
            names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let v = if i == 0 {
                        values[0]
                    } else {
                        values.get(i + skip).copied().unwrap_or("")
                    };
                    ((*name).to_owned(), v.to_owned())
                })
                .collect()
        })
        .collect()
}

/// Settings of the nodes tests start: retention is checked every second (a
/// topic's own small `retention.ms` then deletes within seconds, not the
/// default five minutes), and a member may ask a session of 500 ms (the
/// default least is 6 s: a member stalling past its session, and past
/// `max.poll.interval.ms`, which librdkafka holds at or above it, takes
/// seconds, not minutes); nothing else differs from `scripts/kafka start`.
pub const TEST_CONFIG: &[(&str, &str)] = &[
    ("log.retention.check.interval.ms", "1000"),
    ("group.min.session.timeout.ms", "500"),
];

/// An Apache Kafka node on loopback, stopped (SIGTERM, then SIGKILL after
/// 20 s) when dropped.
#[derive(Debug)]
pub struct ApacheKafka {
    pub port: u16,
    pub bootstrap: String,
    /// Its data, `server.properties` and `kafka.log`.
    pub dir: PathBuf,
    /// The broker's JVM.
    jvm: u32,
    /// Tells the thread that started the node to stop it.
    stop: Option<mpsc::Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

/// `name` made unique to this process and moment: topics and groups of tests
/// sharing one broker never meet.
pub fn unique(name: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{name}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

impl ApacheKafka {
    /// The node this test binary shares (started by the first test that asks).
    pub fn shared() -> &'static ApacheKafka {
        static NODE: std::sync::OnceLock<ApacheKafka> = std::sync::OnceLock::new();
        NODE.get_or_init(ApacheKafka::start)
    }

    /// A node of its own in a new directory, on a free port, with
    /// [`TEST_CONFIG`].
    pub fn start() -> ApacheKafka {
        let dir = std::env::temp_dir().join(unique("streamsight-apache-kafka"));
        ApacheKafka::start_with(&dir, crate::free_port(), TEST_CONFIG)
    }

    /// A node on `port` with its data in `dir` (formatted when new, else
    /// started again on what it holds), with `config` over the defaults.
    pub fn start_with(dir: &Path, port: u16, config: &[(&str, &str)]) -> ApacheKafka {
        ApacheKafka::start_with_args(dir, port, config, &[])
    }

    /// The same with more of `scripts/kafka start`'s arguments (`--add-scram
    /// SPEC`, `--controller-port C`).
    pub fn start_with_args(dir: &Path, port: u16, config: &[(&str, &str)], args: &[&str]) -> ApacheKafka {
        assert!(
            installed(),
            "Apache Kafka is not installed in .tools/kafka: run scripts/test (it installs it) or scripts/kafka install"
        );
        let mut command = Command::new(script());
        command
            .args(["start", "--exit-with-parent", "--port", &port.to_string(), "--dir"])
            .arg(dir);
        for (k, v) in config {
            command.args(["--config", &format!("{k}={v}")]);
        }
        command.args(args);
        command.stdout(Stdio::piped()).stderr(Stdio::inherit());
        // The node's wrapper ends with the thread that started it: a thread
        // of its own that lives as long as the node, not the test's.
        let (started_tx, started_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let keeper = std::thread::Builder::new()
            .name(format!("apache-kafka-{port}"))
            .spawn(move || {
                let mut child = match command.spawn() {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = started_tx.send(Err(format!("scripts/kafka start: {e}")));
                        return;
                    }
                };
                let stdout = child.stdout.take().map(std::io::BufReader::new);
                let line = stdout.and_then(|mut out| {
                    let mut line = String::new();
                    out.read_line(&mut line).ok().map(|_| line)
                });
                match line.filter(|l| l.starts_with("bootstrap=")) {
                    Some(line) => {
                        let _ = started_tx.send(Ok(line));
                    }
                    None => {
                        let _ = child.kill();
                        let _ = started_tx.send(Err(format!("scripts/kafka start exited: {:?}", child.wait())));
                        return;
                    }
                }
                // Until dropped (or the sender goes with a panicking test).
                let _ = stop_rx.recv();
                let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
                let deadline = Instant::now() + Duration::from_secs(20);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            })
            .unwrap_or_else(|e| panic!("cannot start a thread for Apache Kafka: {e}"));
        let line = match started_rx.recv_timeout(Duration::from_secs(150)) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => panic!("Apache Kafka did not start in {}: {e}", dir.display()),
            Err(e) => panic!("Apache Kafka did not start in {} within 150 s: {e}", dir.display()),
        };
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_default()
                .to_owned()
        };
        ApacheKafka {
            port,
            bootstrap: field("bootstrap="),
            dir: dir.to_owned(),
            jvm: field("pid=").parse().unwrap_or(0),
            stop: Some(stop_tx),
            keeper: Some(keeper),
        }
    }

    /// The broker's JVM's process id (for its CPU and memory in /proc).
    pub fn pid(&self) -> u32 {
        self.jvm
    }

    /// Stops the broker as a crash would (SIGKILL to its JVM); its data stay
    /// in [`Self::dir`] for [`Self::start_with`] to start again.
    pub fn kill(&mut self) {
        let _ = Command::new("kill").args(["-KILL", &self.jvm.to_string()]).status();
        self.stop.take();
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
    }
}

impl Drop for ApacheKafka {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
    }
}
