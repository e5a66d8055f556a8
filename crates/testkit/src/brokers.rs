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
