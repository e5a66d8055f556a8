// Each test crate includes this module and uses part of it.
#![allow(dead_code, unreachable_pub, unused_imports)]

//! Running `streamsight` and other programs from tests.

pub mod browser;
pub use streamsight_testkit::dsm;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Kills the child when the test ends, however it ends.
pub struct Guard(pub Child);

impl Guard {
    /// Sends `SIG{name}` to the child (`STOP` pauses it, `CONT` resumes it).
    pub fn signal(&self, name: &str) {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args([&format!("-{name}"), &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {pid}");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub use streamsight_testkit::free_port;

/// Starts a command and waits, up to 90 s, for a stdout line containing `marker`.
pub fn start(cmd: &mut Command, marker: &str) -> (Guard, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let guard = Guard(child);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(marker) => return (guard, line),
            Ok(_) => {}
            Err(e) => panic!("no line with {marker:?} from {cmd:?}: {e}"),
        }
    }
}

/// The value of `key=` in a line of `key=value` words.
pub fn field(line: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        .to_owned()
}

/// `streamsight serve` on free loopback ports: (guard, intake URL, API URL).
pub fn serve(storage: &str) -> (Guard, String, String) {
    serve_env(storage, &[])
}

/// The same, with `env` set for the process.
pub fn serve_env(storage: &str, env: &[(&str, &str)]) -> (Guard, String, String) {
    let (guard, line) = start(
        Command::new(env!("CARGO_BIN_EXE_streamsight"))
            .envs(env.iter().copied())
            .args(serve_args(storage))
            .env(
                "STREAMSIGHT_LOG",
                std::env::var("STREAMSIGHT_TEST_LOG").unwrap_or("warn".into()),
            ),
        "streamsight serving",
    );
    (guard, field(&line, "intake"), field(&line, "api"))
}

/// `streamsight serve` on `storage` and free loopback ports, run to its end
/// (a test that expects it to refuse to start): (success, stdout, stderr).
pub fn serve_to_the_end(storage: &str) -> (bool, String, String) {
    run(&serve_args(storage))
}

/// `serve` on `storage` with every listener on a free loopback port.
fn serve_args(storage: &str) -> [&str; 9] {
    [
        "serve",
        "--intake-listen",
        "127.0.0.1:0",
        "--api-listen",
        "127.0.0.1:0",
        "--otlp-listen",
        "127.0.0.1:0",
        "--storage",
        storage,
    ]
}

/// Runs `streamsight ARGS` to completion: (success, stdout, stderr).
pub fn run(args: &[&str]) -> (bool, String, String) {
    run_keyed(args, "")
}

/// The same with `key` as its `STREAMSIGHT_API_KEY` (none when empty).
pub fn run_keyed(args: &[&str], key: &str) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_streamsight"));
    cmd.args(args);
    if !key.is_empty() {
        cmd.env("STREAMSIGHT_API_KEY", key);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A key of `scope` made in `keys_file` by `streamsight keys create`: its token.
pub fn create_key(keys_file: &str, scope: &str) -> String {
    let (ok, token, err) = run(&["keys", "create", "--scope", scope, "--keys-file", keys_file]);
    assert!(ok, "{err}");
    token.trim().to_owned()
}

/// `streamsight serve` with `toml` as its config file, in memory, on free
/// loopback ports: (guard, API URL).
pub fn serve_with_config(name: &str, toml: &str) -> (Guard, String) {
    let (guard, _, api) = serve_with(name, toml, "memory://");
    (guard, api)
}

/// `streamsight serve` with `toml` as its config file and `storage`, on free
/// loopback ports: (guard, intake URL, API URL).
pub fn serve_with(name: &str, toml: &str, storage: &str) -> (Guard, String, String) {
    let (guard, line) = serve_with_line(name, toml, storage);
    (guard, field(&line, "intake"), field(&line, "api"))
}

/// The same, with the line it printed (`intake=`, `api=`, `otlp=`).
pub fn serve_with_line(name: &str, toml: &str, storage: &str) -> (Guard, String) {
    let config = std::env::temp_dir().join(format!("streamsight-{name}-{}.toml", std::process::id()));
    std::fs::write(&config, toml).unwrap();
    let (guard, line) = start(
        Command::new(env!("CARGO_BIN_EXE_streamsight"))
            .args(["serve", "--intake-listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
            .args(["--otlp-listen", "127.0.0.1:0"])
            .args(["--storage", storage, "--config"])
            .arg(&config)
            .env(
                "STREAMSIGHT_LOG",
                std::env::var("STREAMSIGHT_TEST_LOG").unwrap_or("warn".into()),
            ),
        "streamsight serving",
    );
    (guard, line)
}

/// The workspace's Python venv, with the real clients `scripts/test` installs.
pub fn python() -> std::path::PathBuf {
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: run scripts/test, which installs it",
        venv.display()
    );
    venv
}

/// A script of `tests/python`.
pub fn script(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// Fills partition `p` of `topic` with `records[p]` records and commits `group`
/// at `commits[p]`, on a mock cluster (or any broker) at `bootstrap`.
pub fn seed_cluster(bootstrap: &str, topic: &str, records: &[usize], group: &str, commits: &[i64]) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for (p, &n) in records.iter().enumerate() {
        for _ in 0..n {
            producer
                .send(BaseRecord::<(), _>::to(topic).partition(p as i32).payload("x"))
                .unwrap();
        }
    }
    producer.flush(Duration::from_secs(10)).unwrap();
    seed_commits(bootstrap, topic, group, commits);
}

/// Commits `group` at `commits[p]` on each partition `p` of `topic`, as a
/// consumer that never joined would (the group stays without members).
pub fn seed_commits(bootstrap: &str, topic: &str, group: &str, commits: &[i64]) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for (p, &offset) in commits.iter().enumerate() {
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(offset))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

/// `topic` with `partitions` partitions of `per_partition` records each, one
/// record per batch (tansu answers "latest" with the last batch's base + 1).
pub async fn fill_topic(bootstrap: &str, topic: &str, partitions: i32, per_partition: usize) {
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for r in admin
        .create_topics(
            &[rdkafka::admin::NewTopic::new(
                topic,
                partitions,
                rdkafka::admin::TopicReplication::Fixed(1),
            )],
            &opts,
        )
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    for p in 0..partitions {
        for i in 0..per_partition {
            let value = format!("record {i}");
            let record = rdkafka::producer::FutureRecord::<(), _>::to(topic)
                .partition(p)
                .payload(&value);
            producer.send(record, Duration::from_secs(5)).await.unwrap();
        }
    }
}

/// The trace id of dead letter `i` of [`dead_letters`].
pub fn trace_of(i: i64) -> String {
    format!("{:032x}", i + 1)
}

/// `letters` dead letters in `orders.dlq` (topics `orders` of 2 partitions,
/// `orders-retry` and `orders.dlq` made first), as the SDK writes them: the
/// record's key, value and own headers, and provenance naming
/// `orders[i % 2]@i`; the first `invalid` failed validation, the rest processing.
pub async fn dead_letters(bootstrap: &str, letters: i64, invalid: i64) {
    fill_topic(bootstrap, "orders", 2, 0).await;
    fill_topic(bootstrap, "orders-retry", 1, 0).await;
    fill_topic(bootstrap, "orders.dlq", 1, 0).await;
    let producer: rdkafka::producer::FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    for i in 0..letters {
        let bad = i < invalid;
        let provenance = streamsight_wire::dlq::Provenance {
            source_topic: Some("orders".into()),
            source_partition: Some((i % 2) as i32),
            source_offset: Some(i),
            consumer_group: Some("billing".into()),
            stage: Some(if bad { "validation" } else { "processing" }.into()),
            error_class: Some(if bad { "deserialization" } else { "ValueError" }.into()),
            error_message: Some("card declined".into()),
            trace_id: Some(trace_of(i)),
            ..streamsight_wire::dlq::Provenance::default()
        };
        let traceparent = format!("00-{}-{:016x}-01", trace_of(i), i + 1);
        let mut headers = rdkafka::message::OwnedHeaders::new()
            .insert(rdkafka::message::Header {
                key: "traceparent",
                value: Some(traceparent.as_bytes()),
            })
            .insert(rdkafka::message::Header {
                key: "app-header",
                value: Some(b"kept".as_slice()),
            });
        let named = provenance.headers(streamsight_wire::dlq::Conventions {
            spring: true,
            connect: false,
        });
        for (k, v) in &named {
            headers = headers.insert(rdkafka::message::Header {
                key: k,
                value: Some(v.as_slice()),
            });
        }
        let (key, value) = (format!("order-{i}"), format!("{{\"order\":{i}}}"));
        let record = rdkafka::producer::FutureRecord::to("orders.dlq")
            .key(&key)
            .payload(&value)
            .headers(headers);
        producer.send(record, Duration::from_secs(5)).await.unwrap();
    }
}

/// A confluent-kafka group member (`tests/python/group_member.py`): joins
/// `group`, reads `count` records of `topic`, prints what it did, and leaves
/// cleanly when told.
pub struct Member {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
}

/// A Datadog tracer's environment: Data Streams Monitoring on, reporting as
/// `service` to the agent-compatible intake at `intake`, nothing else.
fn with_datadog_env(mut command: std::process::Command, service: &str, intake: &str) -> std::process::Command {
    command
        .env("DD_SERVICE", service)
        .env("DD_ENV", "test")
        .env("DD_TRACE_AGENT_URL", intake)
        .env("DD_DATA_STREAMS_ENABLED", "true")
        .env("DD_REMOTE_CONFIGURATION_ENABLED", "false")
        .env("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false")
        .env("DD_PROFILING_ENABLED", "false")
        .env("DD_TRACE_STARTUP_LOGS", "false");
    command
}

impl Member {
    pub fn join(bootstrap: &str, topic: &str, group: &str, client_id: &str, count: usize) -> Member {
        Self::spawn(
            "group_member.py",
            &[bootstrap, topic, group, client_id, &count.to_string()],
        )
    }

    /// The same with `group.protocol=PROTOCOL` (`consumer`: KIP-848).
    pub fn join_with(
        bootstrap: &str,
        topic: &str,
        group: &str,
        client_id: &str,
        count: usize,
        protocol: &str,
    ) -> Member {
        Self::spawn(
            "group_member.py",
            &[bootstrap, topic, group, client_id, &count.to_string(), protocol],
        )
    }

    /// A static member (KIP-345, classic): `group.instance.id` = `instance`.
    /// Closed, it does not leave; the next with the same id takes its place.
    pub fn join_static(
        bootstrap: &str,
        topic: &str,
        group: &str,
        client_id: &str,
        count: usize,
        instance: &str,
    ) -> Member {
        Self::spawn(
            "group_member.py",
            &[
                bootstrap,
                topic,
                group,
                client_id,
                &count.to_string(),
                "classic",
                instance,
            ],
        )
    }

    /// A member whose handler outlasts `max.poll.interval.ms` (`tests/python/slow_member.py`):
    /// `stalls` times it reads a record and then stops polling for `stall_ms`,
    /// so librdkafka leaves the group and joins it again; "done" after the last.
    pub fn stalling(bootstrap: &str, topic: &str, group: &str, client_id: &str, stalls: u32, stall_ms: u32) -> Member {
        Self::spawn(
            "slow_member.py",
            &[
                bootstrap,
                topic,
                group,
                client_id,
                &stalls.to_string(),
                &stall_ms.to_string(),
            ],
        )
    }

    /// A member with Apache Kafka's own Java client
    /// (`harness/java-clients`, `GroupMember`: the same lines as
    /// `group_member.py`), `protocol` `classic` or `consumer` (KIP-848).
    pub fn java(bootstrap: &str, topic: &str, group: &str, client_id: &str, count: usize, protocol: &str) -> Member {
        Self::java_main(
            "GroupMember",
            &[bootstrap, topic, group, client_id, &count.to_string(), protocol],
        )
    }

    /// A share-group member with Kafka's own `KafkaShareConsumer`
    /// (`ShareMember`): holds `count` records, then acknowledges them from the
    /// highest offset down, releasing `release`, rejecting `reject`, keeping
    /// `hold` acquired and accepting the rest; prints "acked …".
    pub fn java_share(
        bootstrap: &str,
        topic: &str,
        group: &str,
        count: usize,
        [release, reject, hold]: [&[i64]; 3],
    ) -> Member {
        let list = |offsets: &[i64]| {
            if offsets.is_empty() {
                "-".to_owned()
            } else {
                offsets.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
            }
        };
        Self::java_main(
            "ShareMember",
            &[
                bootstrap,
                topic,
                group,
                &format!("{group}-member"),
                &count.to_string(),
                &list(release),
                &list(reject),
                &list(hold),
            ],
        )
    }

    /// A Kafka Streams application in a streams group (`StreamsApp`,
    /// `group.protocol=streams`): counts `input` by value into `output`
    /// through a repartition topic and a state store; prints "running".
    pub fn streams_app(bootstrap: &str, application_id: &str, input: &str, output: &str) -> Member {
        Self::java_main("StreamsApp", &[bootstrap, application_id, input, output])
    }

    /// The seed's incident as a Java service (`SeedService`) under the real
    /// dd-java-agent `version` (`harness/java-clients/target/dd-java-agent/`),
    /// Data Streams Monitoring on, reporting as `service` to the intake at
    /// `intake`. Prints "produced 1000", "stuck 500", then takes "fail",
    /// "recover" and "close" on stdin.
    /// `clients`: `None` for kafka-clients 4.4, `Some("3")` for 3.9.
    pub fn seed_service(version: &str, clients: Option<&str>, service: &str, intake: &str, args: [&str; 5]) -> Member {
        let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness/java-clients/target");
        let agent = harness.join(format!("dd-java-agent/dd-java-agent-{version}.jar"));
        assert!(
            agent.exists(),
            "dd-java-agent {version} is not at {}: run scripts/test (it fetches it)",
            agent.display()
        );
        let agent = format!("-javaagent:{}", agent.display());
        let mut command = Self::java_command(&[&agent], "SeedService", &args);
        if let Some(major) = clients {
            // The older client in place of 4.4's: the classpath spelled out.
            let older = std::fs::read_dir(harness.join(format!("kafka-clients-{major}")))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect::<Vec<_>>();
            assert!(
                !older.is_empty(),
                "no kafka-clients {major} in the harness: run scripts/test"
            );
            let mut classpath = vec![harness.join("java-clients-harness-1.jar")];
            classpath.extend(older);
            for dep in std::fs::read_dir(harness.join("deps")).unwrap() {
                let dep = dep.unwrap().path();
                let name = dep.file_name().unwrap().to_string_lossy().into_owned();
                if !name.starts_with("kafka-clients-") && !name.starts_with("kafka-streams-") {
                    classpath.push(dep);
                }
            }
            let classpath = std::env::join_paths(classpath).unwrap();
            let mut with_older = std::process::Command::new("java");
            with_older
                .arg(&agent)
                .arg("-cp")
                .arg(classpath)
                .arg("dev.streamsight.harness.SeedService")
                .args(args);
            command = with_older;
        }
        Self::spawn_command(with_datadog_env(command, service, intake))
    }

    /// A Kafka Streams application relaying `input` to `output` under the real
    /// dd-java-agent `version` (`StreamsRelay`: a record "big" becomes one
    /// the broker refuses, skipped by its production exception handler);
    /// prints "running", then "failing" at the first refused send.
    pub fn streams_relay(version: &str, service: &str, intake: &str, args: [&str; 4]) -> Member {
        let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness/java-clients/target");
        let agent = harness.join(format!("dd-java-agent/dd-java-agent-{version}.jar"));
        assert!(
            agent.exists(),
            "dd-java-agent {version} is not at {}: run scripts/test",
            agent.display()
        );
        let agent = format!("-javaagent:{}", agent.display());
        let command = Self::java_command(&[&agent], "StreamsRelay", &args);
        Self::spawn_command(with_datadog_env(command, service, intake))
    }

    /// The seed's incident as a Go service on confluent-kafka-go under the real
    /// dd-trace-go (`harness/go-tracers/target/seed`), the same lines as
    /// `seed_service` (`args`: bootstrap, orders topic, group).
    pub fn go_seed(service: &str, intake: &str, args: [&str; 3]) -> Member {
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness/go-tracers/target/seed");
        assert!(
            bin.exists(),
            "the Go tracer harness is not built at {}: run scripts/test (it builds it)",
            bin.display()
        );
        let mut command = std::process::Command::new(bin);
        command.args(args);
        Self::spawn_command(with_datadog_env(command, service, intake))
    }

    /// The same on kafkajs under the real dd-trace for Node.js
    /// (`harness/js-tracers/seed.js`).
    pub fn js_seed(service: &str, intake: &str, args: [&str; 3]) -> Member {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness/js-tracers");
        assert!(
            dir.join("node_modules/dd-trace").exists(),
            "the Node.js tracer harness is not installed in {}: run scripts/test (it installs it)",
            dir.display()
        );
        let mut command = std::process::Command::new("node");
        command.arg(dir.join("seed.js")).args(args);
        Self::spawn_command(with_datadog_env(command, service, intake))
    }

    /// `harness/java-clients`' class `main` run with `args`.
    fn java_main(main: &str, args: &[&str]) -> Member {
        Self::spawn_command(Self::java_command(&[], main, args))
    }

    /// `java JVM_ARGS -cp HARNESS dev.streamsight.harness.MAIN ARGS`.
    fn java_command(jvm: &[&str], main: &str, args: &[&str]) -> std::process::Command {
        let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness/java-clients/target");
        let jar = harness.join("java-clients-harness-1.jar");
        assert!(
            jar.exists(),
            "the Java harness is not built at {}: run scripts/test (it builds it)",
            jar.display()
        );
        let classpath = format!("{}:{}/deps/*", jar.display(), harness.display());
        let mut command = std::process::Command::new("java");
        command
            .args(jvm)
            .args(["-cp", &classpath, &format!("dev.streamsight.harness.{main}")])
            .args(args);
        command
    }

    fn spawn(name: &str, args: &[&str]) -> Member {
        let mut command = std::process::Command::new(python());
        command.arg(script(name)).args(args);
        Self::spawn_command(command)
    }

    fn spawn_command(mut command: std::process::Command) -> Member {
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Member { child, stdin, lines }
    }

    /// Lines up to and including the first that starts with `prefix`.
    pub fn until(&self, prefix: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut seen = Vec::new();
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => {
                    let done = line.starts_with(prefix);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(e) => panic!("the member printed no {prefix:?} line ({e}); it printed {seen:?}"),
            }
        }
    }

    /// Writes `line` to the member's stdin (a command to the harness).
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the member's stdin is open");
        std::io::Write::write_all(stdin, format!("{line}\n").as_bytes()).unwrap();
        std::io::Write::flush(stdin).unwrap();
    }

    /// Leaves the group cleanly and waits for the process.
    pub fn close(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = std::io::Write::write_all(&mut stdin, b"close\n");
        }
        self.until("closed");
        let _ = self.child.wait();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A webhook receiver on a plain socket: the bodies it was sent.
pub fn webhook_receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body = loop {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            if let Some(body) = body {
                g.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (url, got)
}
