//! Schema validation cost per record (a realistic order record, JSON Schema and
//! Avro with Confluent framing), and consumer throughput on librdkafka's mock
//! cluster with validation on and off, alternating within one run.
//!
//! `cargo bench -p streamsight-sdk --bench validation`; figures in BENCHMARKS.md.
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, black_box};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::time::{Duration, Instant};
use streamsight_sdk::validate::Validator;

const JSON_SCHEMA: &str = r#"{
  "type": "object",
  "required": ["order_id", "customer", "items", "total", "currency", "created_at"],
  "properties": {
    "order_id": {"type": "string", "pattern": "^ord-[0-9]+$"},
    "customer": {"type": "object", "required": ["id", "email"],
      "properties": {"id": {"type": "integer"}, "email": {"type": "string", "minLength": 3}}},
    "items": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["sku", "qty", "price"],
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}, "price": {"type": "number"}}}},
    "total": {"type": "number", "minimum": 0},
    "currency": {"enum": ["EUR", "USD", "GBP"]},
    "created_at": {"type": "string"}
  }
}"#;

const ORDER: &str = r#"{"order_id":"ord-1042","customer":{"id":77,"email":"a@b.example"},
  "items":[{"sku":"A-1","qty":2,"price":9.5},{"sku":"B-7","qty":1,"price":20.0}],
  "total":39.0,"currency":"EUR","created_at":"2026-11-30T12:00:00Z"}"#;

const AVRO_SCHEMA: &str = r#"{"type":"record","name":"Order","fields":[
  {"name":"order_id","type":"string"},{"name":"customer_id","type":"long"},
  {"name":"email","type":"string"},{"name":"skus","type":{"type":"array","items":"string"}},
  {"name":"total","type":"double"},{"name":"currency","type":{"type":"enum","name":"Currency","symbols":["EUR","USD","GBP"]}},
  {"name":"created_at","type":"long"}]}"#;

fn file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("streamsight-bench-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

fn avro_record() -> Vec<u8> {
    use apache_avro::types::{Record, Value};
    let schema = apache_avro::Schema::parse_str(AVRO_SCHEMA).unwrap();
    let mut r = Record::new(&schema).unwrap();
    r.put("order_id", "ord-1042");
    r.put("customer_id", 77i64);
    r.put("email", "a@b.example");
    r.put(
        "skus",
        Value::Array(vec![Value::String("A-1".into()), Value::String("B-7".into())]),
    );
    r.put("total", 39.0f64);
    r.put("currency", Value::Enum(0, "EUR".into()));
    r.put("created_at", 1_796_000_000_000i64);
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .unwrap();
    let mut framed = vec![0, 0, 0, 0, 7];
    framed.extend(writer.write_value_to_vec(r).unwrap());
    framed
}

fn per_record(c: &mut Criterion) {
    let v = Validator::new()
        .json_schema("orders", &file("order.json", JSON_SCHEMA))
        .unwrap()
        .avro("orders-avro", &file("order.avsc", AVRO_SCHEMA), true, Some(7))
        .unwrap();
    let avro = avro_record();
    let drifted = ORDER.replace("\"total\"", "\"amount\"");
    assert!(v.validate("orders", Some(ORDER.as_bytes())).is_ok());
    assert!(v.validate("orders-avro", Some(&avro)).is_ok());
    let mut g = c.benchmark_group("validate");
    g.bench_function("json_schema_valid_order", |b| {
        b.iter(|| v.validate("orders", Some(black_box(ORDER.as_bytes()))))
    });
    g.bench_function("json_schema_drifted_order", |b| {
        b.iter(|| v.validate("orders", Some(black_box(drifted.as_bytes()))))
    });
    g.bench_function("avro_confluent_valid_order", |b| {
        b.iter(|| v.validate("orders-avro", Some(black_box(&avro))))
    });
    g.bench_function("no_schema_for_topic", |b| {
        b.iter(|| v.validate("other", Some(black_box(ORDER.as_bytes()))))
    });
    g.finish();
}

/// Consume throughput with validation on and off, alternating rounds.
fn throughput() {
    const N: usize = 20_000;
    const ROUNDS: usize = 8;
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for _ in 0..N {
        producer.send(BaseRecord::<(), _>::to("orders").payload(ORDER)).unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let v = Validator::new()
        .json_schema("orders", &file("order2.json", JSON_SCHEMA))
        .unwrap();
    let run = |validate: bool, round: usize| {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", format!("bench-{validate}-{round}"))
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("orders", 0, Offset::Beginning).unwrap();
        consumer.assign(&tpl).unwrap();
        // The first fetch is not what is measured.
        while !matches!(consumer.poll(Duration::from_millis(100)), Some(Ok(_))) {}
        let start = Instant::now();
        let mut n = 1;
        while n < N {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                if validate {
                    black_box(v.validate(m.topic(), m.payload()).is_ok());
                }
                n += 1;
            }
        }
        (N - 1) as f64 / start.elapsed().as_secs_f64()
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            off.push(run(false, round));
            on.push(run(true, round));
        } else {
            on.push(run(true, round));
            off.push(run(false, round));
        }
    }
    let mut ratios: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
    ratios.sort_by(f64::total_cmp);
    on.sort_by(f64::total_cmp);
    off.sort_by(f64::total_cmp);
    println!(
        "consume with JSON Schema validation: off {:.0} rec/s, on {:.0} rec/s (medians); ratio on/off median {:.3} (range {:.3}..{:.3}), {ROUNDS} alternating rounds of {N}",
        off[ROUNDS / 2],
        on[ROUNDS / 2],
        ratios[ROUNDS / 2],
        ratios[0],
        ratios[ROUNDS - 1]
    );
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    throughput();
    let mut c = Criterion::default().configure_from_args();
    per_record(&mut c);
    c.final_summary();
}
