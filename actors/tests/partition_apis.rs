//! The partition API handlers as the router calls them: Produce (acks 0/1/-1, errors), Fetch
//! (first-batch rule, long poll, incremental sessions), ListOffsets, DeleteRecords,
//! OffsetForLeaderEpoch, DescribeLogDirs, over real actors and an in-memory log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Actor;
use kactor_actors::network::{
    ConnectionInfo, HandlerOutcome, ListenerKind, RequestContext, RequestRouter,
};
use kactor_actors::partition::apis::{register, PartitionApis};
use kactor_actors::partition::fetch_session::FetchSessions;
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::{batch, memory_registry};
use kactor_actors::partition::PurgatoryLink;
use kactor_actors::purgatory::PurgatoryActor;
use kactor_actors::runtime::{ActorMetrics, MeteredAddr};
use kactor_protocol::errors;
use kactor_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kactor_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kactor_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kactor_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kactor_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kactor_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kactor_protocol::messages::*;
use kactor_protocol::records::BatchHeader;
use kactor_protocol::{ApiKey, Records, RequestBody, ResponseBody, Uuid};

const TOPIC_ID: Uuid = Uuid([3; 16]);

struct Broker {
    router: Arc<RequestRouter>,
}

impl Broker {
    async fn start(partitions: i32) -> Self {
        let purgatory = MeteredAddr::new(
            PurgatoryActor::new().start(),
            ActorMetrics::new("PurgatoryActor"),
        );
        let link = PurgatoryLink {
            high_watermark: purgatory.recipient(),
            log_end: purgatory.recipient(),
            leadership_lost: purgatory.recipient(),
        };
        let registry = memory_registry(Some(link));
        let changes = (0..partitions)
            .map(|p| PartitionChange {
                kind: PartitionChangeKind::BecomeLeader,
                topic: "t".into(),
                topic_id: TOPIC_ID,
                partition: p,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                config_overrides: BTreeMap::new(),
            })
            .collect();
        registry
            .send(ApplyPartitionChanges { changes })
            .await
            .unwrap();
        let apis = PartitionApis {
            partitions: registry.send(SubscribePartitionTable).await.unwrap(),
            purgatory,
            fetch_sessions: FetchSessions::new(10),
            rack_aware_reads: false,
            replication_quotas: std::sync::Arc::new(
                kactor_actors::partition::replication_quota::ReplicationQuotas::from_broker_config(
                    1,
                    &Default::default(),
                ),
            ),
        };
        let mut router = RequestRouter::new();
        register(&mut router, apis);
        let (_tx, features) = kactor_actors::network::features_channel(
            Vec::new(),
            kactor_actors::network::api_versions::bootstrap_finalized_features(),
        );
        Broker {
            router: router.build(features),
        }
    }

    async fn call(&self, key: ApiKey, version: i16, body: RequestBody) -> HandlerOutcome {
        let ctx = RequestContext {
            api_key: key,
            api_version: version,
            header: RequestHeader {
                request_api_key: key as i16,
                request_api_version: version,
                ..Default::default()
            },
            connection: ConnectionInfo {
                connection_id: 1,
                peer: "127.0.0.1:1".parse().unwrap(),
                local: "127.0.0.1:9092".parse().unwrap(),
                listener_name: "PLAINTEXT".into(),
                listener_kind: ListenerKind::Broker,
                security_protocol: "PLAINTEXT",
                principal: Default::default(),
            },
            received_at: Instant::now(),
            request_bytes: 0,
        };
        let out = (self.router.route(key).unwrap().handler)(ctx, body).await;
        // Every response must encode at its request's version (fields a version lacks keep
        // their defaults).
        if let HandlerOutcome::Respond(r) = &out {
            let mut w = kactor_protocol::Writer::new();
            r.encode(&mut w, version)
                .unwrap_or_else(|e| panic!("{key:?} v{version} does not encode: {e}"));
        }
        out
    }

    async fn produce(
        &self,
        version: i16,
        acks: i16,
        partition: i32,
        records: bytes::Bytes,
    ) -> HandlerOutcome {
        let req = ProduceRequest {
            acks,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                topic_id: TOPIC_ID,
                partition_data: vec![PartitionProduceData {
                    index: partition,
                    records: Some(Records::Memory(records)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        self.call(ApiKey::Produce, version, RequestBody::Produce(req))
            .await
    }

    async fn fetch(&self, req: FetchRequest, version: i16) -> FetchResponse {
        match self
            .call(ApiKey::Fetch, version, RequestBody::Fetch(req))
            .await
        {
            HandlerOutcome::Respond(ResponseBody::Fetch(r)) => r,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn produce_result(o: HandlerOutcome) -> (i16, i64) {
    match o {
        HandlerOutcome::Respond(ResponseBody::Produce(r)) => {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn fetch_req(
    partitions: &[(i32, i64)],
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes,
        max_bytes,
        session_id: 0,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: "t".into(),
            topic_id: TOPIC_ID,
            partitions: partitions
                .iter()
                .map(|(p, o)| FetchPartition {
                    partition: *p,
                    fetch_offset: *o,
                    partition_max_bytes: 1 << 20,
                    current_leader_epoch: -1,
                    last_fetched_epoch: -1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn batch_offsets(records: &Option<Records>) -> Vec<i64> {
    let bytes = match records {
        Some(Records::Memory(b)) => b.clone(),
        Some(Records::File(f)) => f.read_to_bytes().unwrap(),
        None => return vec![],
    };
    let mut out = vec![];
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).ok();
        // A fetch may end inside a batch (see `partial_bytes`).
        let Some(h) = h.filter(|h| pos + h.total_size() <= bytes.len()) else {
            break;
        };
        out.push(h.base_offset);
        pos += h.total_size();
    }
    out
}

/// The bytes of the partial batch a fetch response ends with (0 if it ends on a boundary).
fn partial_bytes(records: &Option<Records>) -> usize {
    let bytes = match records {
        Some(Records::Memory(b)) => b.clone(),
        Some(Records::File(f)) => f.read_to_bytes().unwrap(),
        None => return 0,
    };
    let mut pos = 0;
    while let Ok(h) = BatchHeader::parse(&bytes[pos..]) {
        if pos + h.total_size() > bytes.len() {
            break;
        }
        pos += h.total_size();
    }
    bytes.len() - pos
}

#[actix_rt::test]
async fn produce_paths_and_errors() {
    let b = Broker::start(1).await;
    assert_eq!(
        produce_result(b.produce(9, 1, 0, batch(&[b"a", b"b"], 0)).await),
        (0, 0)
    );
    assert_eq!(
        produce_result(b.produce(9, -1, 0, batch(&[b"c"], 0)).await),
        (0, 2)
    );
    assert!(matches!(
        b.produce(9, 0, 0, batch(&[b"d"], 0)).await,
        HandlerOutcome::NoResponse
    ));
    // acks=0 with an error closes the connection, as Kafka does.
    assert!(matches!(
        b.produce(9, 0, 7, batch(&[b"d"], 0)).await,
        HandlerOutcome::Close(_)
    ));
    assert_eq!(
        produce_result(b.produce(9, 1, 7, batch(&[b"x"], 0)).await).0,
        errors::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        produce_result(b.produce(9, 2, 0, batch(&[b"x"], 0)).await).0,
        errors::INVALID_REQUIRED_ACKS
    );
    let mut bad = batch(&[b"x"], 0).to_vec();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert_eq!(
        produce_result(b.produce(9, 1, 0, bad.into()).await).0,
        errors::CORRUPT_MESSAGE
    );
    // The oldest served version encodes too (no log_start_offset / record errors before v5 / v8).
    assert_eq!(
        produce_result(b.produce(3, 1, 0, batch(&[b"old"], 0)).await).0,
        0
    );
    let mut bad = batch(&[b"x"], 0).to_vec();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert_eq!(
        produce_result(b.produce(3, 1, 0, bad.into()).await).0,
        errors::CORRUPT_MESSAGE
    );
    // v13 names topics by id.
    assert_eq!(
        produce_result(b.produce(13, 1, 0, batch(&[b"e"], 0)).await),
        (0, 5)
    );
}

#[actix_rt::test]
async fn fetch_reads_below_max_bytes_with_the_first_batch_rule() {
    let b = Broker::start(2).await;
    for _ in 0..3 {
        b.produce(9, 1, 0, batch(&[&[1u8; 100]], 0)).await;
    }
    b.produce(9, 1, 1, batch(&[&[1u8; 100]], 0)).await;
    // max_bytes 10: partition 0's first batch still comes back; partition 1 gets nothing.
    let r = b.fetch(fetch_req(&[(0, 0), (1, 0)], 0, 1, 10), 12).await;
    let ps = &r.responses[0].partitions;
    assert_eq!(batch_offsets(&ps[0].records), vec![0]);
    assert_eq!(batch_offsets(&ps[1].records), Vec::<i64>::new());
    assert_eq!(ps[0].high_watermark, 3);
    let r = b.fetch(fetch_req(&[(0, 1)], 0, 1, 1 << 20), 12).await;
    assert_eq!(
        batch_offsets(&r.responses[0].partitions[0].records),
        vec![1, 2]
    );
    for v in [4, 5, 11, 12, 16] {
        let r = b
            .fetch(fetch_req(&[(0, 1), (5, 0)], 0, 1, 1 << 20), v)
            .await;
        assert_eq!(
            r.responses[0].partitions[1].error_code,
            errors::UNKNOWN_TOPIC_OR_PARTITION
        );
    }
    let r = b.fetch(fetch_req(&[(0, 9)], 0, 1, 1 << 20), 12).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        errors::OFFSET_OUT_OF_RANGE
    );
    // v13+: by topic id; an unknown id is UNKNOWN_TOPIC_ID.
    let mut req = fetch_req(&[(0, 0)], 0, 1, 1 << 20);
    req.topics[0].topic_id = Uuid([9; 16]);
    let r = b.fetch(req, 13).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        errors::UNKNOWN_TOPIC_ID
    );
}

/// Each partition's batch base offsets, in response order.
fn offsets_by_partition(r: &FetchResponse) -> Vec<Vec<i64>> {
    r.responses[0]
        .partitions
        .iter()
        .map(|p| batch_offsets(&p.records))
        .collect()
}

/// The partitions of a fetch are read at once, but the byte budget still applies in request
/// order, as Kafka slices the log: an empty partition takes none of it, the first with data
/// gets its batches, a later one gets the bytes that still fit (ending inside a batch), and one
/// after the budget is spent gets none (not even part of a first batch).
#[actix_rt::test]
async fn fetch_budget_applies_in_request_order_across_partitions() {
    let b = Broker::start(4).await;
    for p in 1..4 {
        for _ in 0..3 {
            b.produce(9, 1, p, batch(&[&[1u8; 100]], 0)).await;
        }
    }
    let one = b.fetch(fetch_req(&[(1, 2)], 0, 1, 1 << 20), 12).await;
    let size = match &one.responses[0].partitions[0].records {
        Some(Records::Memory(m)) => m.len(),
        Some(Records::File(f)) => f.len as usize,
        None => panic!("no batch"),
    } as i32;
    // Partition 0 is empty; 1 takes three batches, 2 the one and a half that are left
    // (one whole batch and half the next), 3 nothing.
    let r = b
        .fetch(
            fetch_req(&[(0, 0), (1, 0), (2, 0), (3, 0)], 0, 1, 4 * size + size / 2),
            12,
        )
        .await;
    assert_eq!(
        offsets_by_partition(&r),
        vec![vec![], vec![0, 1, 2], vec![0], vec![]]
    );
    let partials: Vec<usize> = r.responses[0]
        .partitions
        .iter()
        .map(|p| partial_bytes(&p.records))
        .collect();
    assert_eq!(partials, vec![0, 0, (size / 2) as usize, 0]);
    // The first partition with data gets its first batch even over the budget, and the
    // budget is then spent.
    let r = b
        .fetch(fetch_req(&[(0, 0), (1, 0), (2, 0)], 0, 1, size / 2), 12)
        .await;
    assert_eq!(offsets_by_partition(&r), vec![vec![], vec![0], vec![]]);
    // Every partition keeps its high watermark whatever the budget left it.
    let hws: Vec<i64> = r.responses[0]
        .partitions
        .iter()
        .map(|p| p.high_watermark)
        .collect();
    assert_eq!(hws, vec![0, 3, 3]);
}

#[actix_rt::test]
async fn fetch_long_polls_until_data_arrives_or_max_wait() {
    let b = Arc::new(Broker::start(1).await);
    let started = Instant::now();
    let r = b.fetch(fetch_req(&[(0, 0)], 100, 1, 1 << 20), 12).await;
    assert!(started.elapsed() >= Duration::from_millis(90));
    assert!(batch_offsets(&r.responses[0].partitions[0].records).is_empty());

    let b2 = b.clone();
    let producer = actix_rt::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        b2.produce(9, 1, 0, batch(&[b"late"], 0)).await;
    });
    let started = Instant::now();
    let r = b.fetch(fetch_req(&[(0, 0)], 10_000, 1, 1 << 20), 12).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the append, not the max wait"
    );
    assert_eq!(
        batch_offsets(&r.responses[0].partitions[0].records),
        vec![0]
    );
    producer.await.unwrap();
}

#[actix_rt::test]
async fn incremental_fetch_sessions() {
    let b = Broker::start(2).await;
    b.produce(9, 1, 0, batch(&[b"a"], 0)).await;
    let mut req = fetch_req(&[(0, 0), (1, 0)], 0, 1, 1 << 20);
    req.session_epoch = 0;
    let r = b.fetch(req, 12).await;
    assert_ne!(r.session_id, 0);
    assert_eq!(r.responses[0].partitions.len(), 2);
    let id = r.session_id;
    // Epoch 1: the consumer moved partition 0 past the record it got; nothing else changed, so
    // the response lists no partitions.
    let mut inc = fetch_req(&[(0, 1)], 0, 1, 1 << 20);
    inc.session_id = id;
    inc.session_epoch = 1;
    let r = b.fetch(inc.clone(), 12).await;
    assert_eq!((r.error_code, r.session_id), (0, id));
    assert!(r.responses.iter().all(|t| t.partitions.is_empty()));
    // New data on partition 1 shows up by itself.
    b.produce(9, 1, 1, batch(&[b"b"], 0)).await;
    inc.session_epoch = 2;
    inc.topics.clear();
    let r = b.fetch(inc.clone(), 12).await;
    let ps: Vec<i32> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect();
    assert_eq!(ps, vec![1]);
    // A stale epoch and an unknown session.
    let r = b.fetch(inc.clone(), 12).await;
    assert_eq!(r.error_code, errors::INVALID_FETCH_SESSION_EPOCH);
    inc.session_id = id.wrapping_add(1).max(1);
    inc.session_epoch = 1;
    let r = b.fetch(inc, 12).await;
    assert_eq!(r.error_code, errors::FETCH_SESSION_ID_NOT_FOUND);
}

#[actix_rt::test]
async fn list_offsets_delete_records_epochs_and_log_dirs() {
    let b = Broker::start(1).await;
    b.produce(9, 1, 0, batch(&[b"a", b"b"], 1_000)).await;
    b.produce(9, 1, 0, batch(&[b"c"], 5_000)).await;
    let list = |ts: i64| ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: "t".into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: ts,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let offset = |o: HandlerOutcome| match o {
        HandlerOutcome::Respond(ResponseBody::ListOffsets(r)) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset)
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        offset(
            b.call(ApiKey::ListOffsets, 8, RequestBody::ListOffsets(list(-1)))
                .await
        ),
        (0, 3)
    );
    assert_eq!(
        offset(
            b.call(ApiKey::ListOffsets, 8, RequestBody::ListOffsets(list(-2)))
                .await
        ),
        (0, 0)
    );
    assert_eq!(
        offset(
            b.call(ApiKey::ListOffsets, 8, RequestBody::ListOffsets(list(-3)))
                .await
        ),
        (0, 2)
    );
    assert_eq!(
        offset(
            b.call(
                ApiKey::ListOffsets,
                8,
                RequestBody::ListOffsets(list(4_000))
            )
            .await
        ),
        (0, 2)
    );
    assert_eq!(
        offset(
            b.call(
                ApiKey::ListOffsets,
                8,
                RequestBody::ListOffsets(list(9_000))
            )
            .await
        ),
        (0, -1)
    );

    let del = DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: "t".into(),
            partitions: vec![
                DeleteRecordsPartition {
                    partition_index: 0,
                    offset: 2,
                    ..Default::default()
                },
                DeleteRecordsPartition {
                    partition_index: 5,
                    offset: 2,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        timeout_ms: 1000,
        ..Default::default()
    };
    match b
        .call(ApiKey::DeleteRecords, 2, RequestBody::DeleteRecords(del))
        .await
    {
        HandlerOutcome::Respond(ResponseBody::DeleteRecords(r)) => {
            let ps = &r.topics[0].partitions;
            assert_eq!((ps[0].error_code, ps[0].low_watermark), (0, 2));
            assert_eq!(
                (ps[1].error_code, ps[1].low_watermark),
                (errors::UNKNOWN_TOPIC_OR_PARTITION, -1)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        offset(
            b.call(ApiKey::ListOffsets, 8, RequestBody::ListOffsets(list(-2)))
                .await
        ),
        (0, 2)
    );

    let epochs = OffsetForLeaderEpochRequest {
        replica_id: -1,
        topics: vec![OffsetForLeaderTopic {
            topic: "t".into(),
            partitions: vec![OffsetForLeaderPartition {
                partition: 0,
                current_leader_epoch: 0,
                leader_epoch: 0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match b
        .call(
            ApiKey::OffsetForLeaderEpoch,
            4,
            RequestBody::OffsetForLeaderEpoch(epochs),
        )
        .await
    {
        HandlerOutcome::Respond(ResponseBody::OffsetForLeaderEpoch(r)) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.leader_epoch, p.end_offset), (0, 0, 3));
        }
        other => panic!("{other:?}"),
    }

    let dirs = DescribeLogDirsRequest {
        topics: Some(vec![DescribableLogDirTopic {
            topic: "t".into(),
            partitions: vec![0],
            ..Default::default()
        }]),
        ..Default::default()
    };
    match b
        .call(
            ApiKey::DescribeLogDirs,
            4,
            RequestBody::DescribeLogDirs(dirs),
        )
        .await
    {
        HandlerOutcome::Respond(ResponseBody::DescribeLogDirs(r)) => {
            assert_eq!(r.results.len(), 1);
            let t = &r.results[0].topics[0];
            assert_eq!(t.name, "t");
            assert!(t.partitions[0].partition_size > 0);
        }
        other => panic!("{other:?}"),
    }
}
