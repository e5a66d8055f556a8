//! An instrumented consumer: `cargo run -p streamsight-sdk --example consumer -- BOOTSTRAP TOPIC GROUP`

use rdkafka::ClientConfig;
use rdkafka::consumer::CommitMode;
use rdkafka::message::Message;
use std::time::Duration;
use streamsight_sdk::{Sdk, SdkConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = args.next().unwrap_or_else(|| "orders".into());
    let group = args.next().unwrap_or_else(|| "billing".into());

    let sdk = Sdk::start(SdkConfig::from_env("billing"));
    let consumer = sdk.stream_consumer(
        ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", &group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false"),
    )?;
    consumer.subscribe(&[topic.as_str()])?;
    loop {
        let Ok(next) = tokio::time::timeout(Duration::from_secs(10), consumer.recv()).await else {
            break;
        };
        let (msg, ctx) = next?;
        // ctx.trace continues the producer's trace; pass ctx to a downstream send.
        println!("offset {} trace {:032x}", msg.offset(), ctx.trace.trace_id);
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
    sdk.shutdown();
    Ok(())
}
