//! The partition layer under a real single-node KRaft: CreateTopics through the controller's
//! handler reaches the ReplicaManagerActor as a `PartitionsChanged`, the new partitions lead,
//! and Produce / Fetch / ListOffsets through the router work at real versions, every response
//! encoding at its request's version (fetch data as a file slice).

use std::time::Duration;

use actix::prelude::*;
use kactor_actors::controller::apis::register as register_admin;
use kactor_actors::controller::start_kraft;
use kactor_actors::network::router::RequestRouter;
use kactor_actors::partition::apis::register as register_partitions;
use kactor_actors::partition::testing::batch;
use kactor_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kactor_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::records::BatchHeader;
use kactor_protocol::{ApiKey, Records, RequestBody, ResponseBody};

mod common;
use common::kraft::{call, kraft_config, metadata_apis, start_partition_layer, until_running};

#[test]
fn create_topic_then_produce_and_fetch() {
    let meta_dir = tempfile::tempdir().unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    System::new().block_on(async move {
        let h = start_kraft(&Arbiter::current(), kraft_config(meta_dir.path())).unwrap();
        until_running(&h).await;
        let layer = start_partition_layer(&h, data_dir.path());

        let mut router = RequestRouter::new();
        register_admin(&mut router, metadata_apis(&h));
        register_partitions(&mut router, layer.apis.clone());

        let ResponseBody::CreateTopics(r) = call(
            &router,
            ApiKey::CreateTopics,
            7,
            RequestBody::CreateTopics(CreateTopicsRequest {
                topics: vec![m::create_topics_request::CreatableTopic {
                    name: "orders".into(),
                    num_partitions: 2,
                    replication_factor: 1,
                    configs: vec![m::create_topics_request::CreatableTopicConfig {
                        name: "message.timestamp.type".into(),
                        value: Some("LogAppendTime".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                timeout_ms: 5000,
                ..Default::default()
            }),
        )
        .await
        else {
            panic!()
        };
        assert_eq!(r.topics[0].error_code, 0);
        let topic_id = r.topics[0].topic_id;

        // The registry hears about the new partitions from the publisher.
        let mut table = layer.apis.partitions.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            table.wait_for(|t| t.partitions.len() == 2),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(
            layer.apis.partitions.borrow().topic_id("orders"),
            Some(topic_id)
        );

        // Produce v13 (topic ids), acks=all.
        let produce = ProduceRequest {
            acks: -1,
            timeout_ms: 5000,
            topic_data: vec![TopicProduceData {
                topic_id,
                partition_data: vec![PartitionProduceData {
                    index: 1,
                    records: Some(Records::Memory(batch(&[b"k1", b"k2"], 1))),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Produce(r) =
            call(&router, ApiKey::Produce, 13, RequestBody::Produce(produce)).await
        else {
            panic!()
        };
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 0));
        assert!(
            p.log_append_time_ms > 0,
            "the topic's LogAppendTime applies"
        );

        // Fetch v12 by name: a file slice on the wire.
        let fetch = FetchRequest {
            replica_id: -1,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1 << 20,
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                topic: "orders".into(),
                partitions: vec![FetchPartition {
                    partition: 1,
                    fetch_offset: 0,
                    partition_max_bytes: 1 << 20,
                    current_leader_epoch: -1,
                    last_fetched_epoch: -1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Fetch(r) =
            call(&router, ApiKey::Fetch, 12, RequestBody::Fetch(fetch)).await
        else {
            panic!()
        };
        let pd = &r.responses[0].partitions[0];
        assert_eq!((pd.error_code, pd.high_watermark), (0, 2));
        let Some(Records::File(slice)) = &pd.records else {
            panic!("zero-copy slice expected")
        };
        let bytes = slice.read_to_bytes().unwrap();
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!((h.base_offset, h.records_count), (0, 2));
        assert_eq!(
            h.timestamp_type(),
            kactor_protocol::records::TimestampType::LogAppendTime
        );

        layer.shutdown().await.unwrap();
        assert!(data_dir.path().join(".kafka_cleanshutdown").exists());
    });
}
