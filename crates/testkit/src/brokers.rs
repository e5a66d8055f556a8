//! One test body, every broker: a body takes a [`TestBroker`] and
//! [`on_every_broker!`] runs it once on Apache Kafka (the broker users run)
//! and once on tansu, as tansu runs one test body per storage engine. Where
//! the brokers differ a body asks [`TestBroker::kind`], and says why.

use crate::{ApacheKafka, Tansu};

/// Which broker a body runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerKind {
    /// Apache Kafka 4 (KRaft), from `scripts/kafka`.
    ApacheKafka,
    /// tansu 0.6.0 with its `memory://` engine.
    Tansu,
}

/// A broker a test body runs on.
#[derive(Debug)]
pub struct TestBroker {
    pub kind: BrokerKind,
    pub bootstrap: String,
    /// Owned brokers stop with the body; the shared Apache Kafka node lives
    /// as long as the test binary.
    _tansu: Option<Tansu>,
}

impl TestBroker {
    /// The Apache Kafka node this test binary shares.
    pub fn apache_kafka() -> TestBroker {
        TestBroker {
            kind: BrokerKind::ApacheKafka,
            bootstrap: ApacheKafka::shared().bootstrap.clone(),
            _tansu: None,
        }
    }

    /// A tansu broker of the body's own (`memory://`).
    pub fn tansu() -> TestBroker {
        let tansu = Tansu::start();
        TestBroker {
            kind: BrokerKind::Tansu,
            bootstrap: tansu.bootstrap.clone(),
            _tansu: Some(tansu),
        }
    }

    /// `name` unique to this body: bodies share the Apache Kafka node.
    pub fn name(&self, name: &str) -> String {
        crate::apache_kafka::unique(name)
    }

    /// `apache-kafka` or `tansu`, for cluster names and messages.
    pub fn label(&self) -> &'static str {
        match self.kind {
            BrokerKind::ApacheKafka => "apache-kafka",
            BrokerKind::Tansu => "tansu",
        }
    }
}

/// For each `body` (an `async fn(TestBroker)`), a module of that name with
/// two tests: `apache_kafka` and `tansu`.
#[macro_export]
macro_rules! on_every_broker {
    ($($body:ident),* $(,)?) => {$(
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn apache_kafka() {
                super::$body($crate::brokers::TestBroker::apache_kafka()).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tansu() {
                super::$body($crate::brokers::TestBroker::tansu()).await;
            }
        }
    )*};
}

/// A broker of a body's own that it can kill (`kill -9`) and start again on
/// the same port and data: Apache Kafka (KRaft, its log dirs) or tansu (its
/// `sqlite://` engine).
#[derive(Debug)]
pub struct RestartableBroker {
    pub kind: BrokerKind,
    pub port: u16,
    pub bootstrap: String,
    dir: std::path::PathBuf,
    kafka: Option<ApacheKafka>,
    tansu: Option<Tansu>,
}

impl RestartableBroker {
    pub fn start(kind: BrokerKind) -> RestartableBroker {
        let dir = std::env::temp_dir().join(crate::apache_kafka::unique("streamsight-restartable"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        let port = crate::free_port();
        let mut broker = RestartableBroker {
            kind,
            port,
            bootstrap: format!("127.0.0.1:{port}"),
            dir,
            kafka: None,
            tansu: None,
        };
        broker.restart();
        broker
    }

    /// Stops the broker as a crash would; its data stay.
    pub fn kill(&mut self) {
        if let Some(mut k) = self.kafka.take() {
            k.kill();
        }
        if let Some(mut t) = self.tansu.take() {
            t.kill();
        }
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.kill();
        match self.kind {
            BrokerKind::ApacheKafka => {
                self.kafka = Some(ApacheKafka::start_with(
                    &self.dir,
                    self.port,
                    crate::apache_kafka::TEST_CONFIG,
                ));
            }
            BrokerKind::Tansu => {
                self.tansu = Some(Tansu::start_on(self.port, "sqlite://tansu.db", &self.dir, &[]));
            }
        }
    }

    /// `apache-kafka` or `tansu`.
    pub fn label(&self) -> &'static str {
        match self.kind {
            BrokerKind::ApacheKafka => "apache-kafka",
            BrokerKind::Tansu => "tansu",
        }
    }
}

impl Drop for RestartableBroker {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
