//! An instrumented producer: `cargo run -p streamsight-sdk --example producer -- BOOTSTRAP TOPIC`
//! (try `streamsight dev-kafka --topic orders` and `streamsight serve`).

use rdkafka::ClientConfig;
use rdkafka::producer::FutureRecord;
use std::time::Duration;
use streamsight_sdk::{Sdk, SdkConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = args.next().unwrap_or_else(|| "orders".into());

    // DD_SERVICE, DD_ENV and DD_TRACE_AGENT_URL as for any Datadog tracer.
    let sdk = Sdk::start(SdkConfig::from_env("checkout"));
    let producer = sdk.future_producer(ClientConfig::new().set("bootstrap.servers", &bootstrap))?;
    for i in 0..100 {
        let payload = format!("order-{i}");
        let record = FutureRecord::to(&topic).key("customer-1").payload(&payload);
        // Failures are counted and shipped by the SDK; the result is yours as usual.
        if let Err((e, _)) = producer.send(record, Duration::from_secs(5), None).await {
            eprintln!("send failed: {e}");
        }
    }
    sdk.shutdown(); // ships what is left
    Ok(())
}
