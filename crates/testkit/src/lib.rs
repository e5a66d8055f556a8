//! What tests across the workspace share, so that no test file grows its own
//! copy: a tansu broker (a Kafka-compatible broker in Rust, installed by
//! `scripts/test`) run as its own process, free loopback ports, waiting for a
//! condition with a deadline instead of a sleep, a watchdog that turns a hang
//! into a failure, the clock's readings tracers stamp, and gzip.
#![allow(clippy::unwrap_used, clippy::panic)] // test support: a failed set-up should fail loudly

pub mod apache_kafka;
pub mod brokers;
pub mod dsm;
pub mod http;
pub mod kafka;
pub mod process;
pub use apache_kafka::ApacheKafka;
pub use brokers::{BrokerKind, RestartableBroker, TestBroker};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Polls `f` until it returns Some, or fails after `secs` seconds naming `what`.
pub async fn eventually<T>(secs: u64, what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Fails the test binary with a message when it is still running after a
/// bound far above its normal time: a hang (a client closing against a broker
/// that is gone, a server that never answers) fails CI with its name instead
/// of holding it until the job's own limit. Disarmed when dropped.
#[derive(Debug)]
pub struct Watchdog {
    done: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Watchdog {
    /// Arms a watchdog for `what`, which should end within `bound`.
    pub fn arm(what: &str, bound: Duration) -> Watchdog {
        let done = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (what, waiting) = (what.to_owned(), done.clone());
        std::thread::spawn(move || {
            let (lock, ended) = &*waiting;
            let guard = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (guard, timeout) = ended
                .wait_timeout_while(guard, bound, |done| !*done)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if timeout.timed_out() && !*guard {
                eprintln!("{what} is still running after {bound:?}: it hangs; aborting the test binary");
                std::process::abort();
            }
        });
        Watchdog { done }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, ended) = &*self.done;
        *lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        ended.notify_all();
    }
}

/// Now, in unix nanoseconds: the time tracers stamp their buckets with.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Now, in unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `raw` gzipped, as clients send bodies with `Content-Encoding: gzip`.
pub fn gzip(raw: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(raw).unwrap();
    gz.finish().unwrap()
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The tansu binary: `STREAMSIGHT_TANSU`, else what `scripts/test` installs.
pub fn tansu_binary() -> PathBuf {
    let found = tansu_installed();
    assert!(
        found.is_some(),
        "tansu is not installed at .tools/tansu/bin/tansu: run scripts/test (it installs it) or set STREAMSIGHT_TANSU"
    );
    found.unwrap_or_default()
}

/// The tansu binary if there is one (benches run without it).
pub fn tansu_installed() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("STREAMSIGHT_TANSU") {
        return Some(path.into());
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/tansu/bin/tansu");
    local.exists().then_some(local)
}

/// A tansu broker on loopback, killed when dropped.
#[derive(Debug)]
pub struct Tansu {
    child: Child,
    pub port: u16,
    pub bootstrap: String,
}

impl Tansu {
    /// A broker with tansu's `memory://` engine on a free port.
    pub fn start() -> Tansu {
        Tansu::start_on(free_port(), "memory://tansu/", &std::env::temp_dir(), &[])
    }

    /// A broker on `port` with `storage` (a tansu storage URL), run in `dir`.
    /// With `STREAMSIGHT_TANSU_LOG` set to a directory, the broker's output
    /// is appended to `tansu-PORT.log` there (its `RUST_LOG` as the
    /// environment gives it): what a broker did when a test blames it.
    pub fn start_on(port: u16, storage: &str, dir: &Path, extra: &[&str]) -> Tansu {
        let url = format!("tcp://127.0.0.1:{port}");
        let output = || -> Stdio {
            let Some(logs) = std::env::var_os("STREAMSIGHT_TANSU_LOG") else {
                return Stdio::null();
            };
            let path = Path::new(&logs).join(format!("tansu-{port}.log"));
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_or_else(|e| panic!("cannot open {}: {e}", path.display()), Stdio::from)
        };
        let child = Command::new(tansu_binary())
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", storage])
            .args(extra)
            .current_dir(dir)
            .stdout(output())
            .stderr(output())
            .spawn()
            .unwrap();
        let bootstrap = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&bootstrap).is_err() {
            assert!(Instant::now() < deadline, "tansu did not start listening");
            std::thread::sleep(Duration::from_millis(50));
        }
        Tansu { child, port, bootstrap }
    }

    /// The broker's process id (for its CPU and memory in /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the broker as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        self.kill();
    }
}
