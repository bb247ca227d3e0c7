//! Protocol codec throughput (Kafka has no direct counterpart; its `RequestContext.parseRequest`
//! and `FetchResponse` send path are what this stands in for): decoding a 1 MiB Produce request
//! and encoding a 1 MiB Fetch response, against one CRC-32C pass over the same payload, the
//! cheapest thing the broker must do with every produced byte anyway.
//!
//! Also produce validation (Kafka's `LogValidator` on an uncompressed v2 batch, which walks
//! every record): 1 MiB batches of 100 B and 1 KiB values, as librdkafka sends them.
//!
//! `cargo bench -p kactor-protocol --bench codec`

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kactor_protocol::codec::Writer;
use kactor_protocol::messages::{fetch_response, produce_request, FetchResponse, ProduceRequest};
use kactor_protocol::records::{validate_batch, BatchBuilder};
use kactor_protocol::{Decode, Encode, Records, Uuid};

const PAYLOAD: usize = 1 << 20;

fn payload() -> Bytes {
    // Incompressible-looking but deterministic bytes; the codec never looks inside.
    let mut x: u32 = 0x9e37_79b9;
    Bytes::from(
        (0..PAYLOAD)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect::<Vec<u8>>(),
    )
}

fn produce_frame(records: &Bytes) -> Bytes {
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![produce_request::TopicProduceData {
            name: "bench".into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(Records::Memory(records.clone())),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut w = Writer::new();
    req.encode(&mut w, 9).unwrap();
    w.into_bytes()
}

fn fetch_response(records: &Bytes) -> FetchResponse {
    FetchResponse {
        responses: vec![fetch_response::FetchableTopicResponse {
            topic_id: Uuid([7; 16]),
            partitions: vec![fetch_response::PartitionData {
                partition_index: 0,
                high_watermark: 1_000_000,
                last_stable_offset: 1_000_000,
                records: Some(Records::Memory(records.clone())),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A batch of `value_size` records without key or headers filling about 1 MiB, with
/// millisecond timestamps a few apart, like a producer's with linger.ms=5.
fn value_batch(value_size: usize) -> Bytes {
    let value = vec![b'x'; value_size];
    let mut b = BatchBuilder::new(0);
    let n = PAYLOAD / (value_size + 8);
    for i in 0..n {
        b.append(
            1_700_000_000_000 + (i / 2000) as i64,
            None,
            Some(&value),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn bench(c: &mut Criterion) {
    let records = payload();
    let frame = produce_frame(&records);
    let resp = fetch_response(&records);

    let mut g = c.benchmark_group("1MiB");
    g.throughput(Throughput::Bytes(PAYLOAD as u64));
    g.bench_function("decode ProduceRequest v9", |b| {
        b.iter(|| {
            let mut buf = frame.clone();
            black_box(ProduceRequest::decode(&mut buf, 9).unwrap())
        })
    });
    g.bench_function("encode FetchResponse v16", |b| {
        b.iter(|| {
            let mut w = Writer::with_capacity(128);
            black_box(&resp).encode(&mut w, 16).unwrap();
            black_box(w.into_chunks())
        })
    });
    g.bench_function("crc32c payload", |b| {
        b.iter(|| black_box(crc32c::crc32c(black_box(&records))))
    });
    g.finish();

    for value_size in [100, 1024] {
        let batch = value_batch(value_size);
        let mut g = c.benchmark_group(format!("validate {value_size} B records"));
        g.throughput(Throughput::Bytes(batch.len() as u64));
        g.bench_function("validate_batch 1 MiB", |b| {
            b.iter(|| black_box(validate_batch(black_box(&batch)).unwrap()))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
