//! Produce and Fetch as bytes over TCP: a SocketServerActor with the partition handlers
//! registered, a disk-backed partition, and a raw client. The fetch response's records come
//! from the segment file (sendfile on this plaintext listener) and must arrive intact.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kactor_actors::network::api_versions::bootstrap_finalized_features;
use kactor_actors::network::{
    features_channel, ConnectionLimits, ListenerKind, ListenerSpec, NetworkConfig, RequestRouter,
    SocketServerActor,
};
use kactor_actors::partition::apis::register;
use kactor_actors::partition::messages::{
    ApplyPartitionChanges, PartitionChange, PartitionChangeKind,
};
use kactor_actors::partition::startup::{start_partitions, PartitionLayerConfig};
use kactor_actors::partition::testing::batch;
use kactor_actors::runtime::ArbiterPools;
use kactor_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kactor_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kactor_protocol::messages::*;
use kactor_protocol::records::{verify_crc, BatchHeader};
use kactor_protocol::{
    request_header_version, response_header_version, ApiKey, Decode, Encode, Message, Records,
    Uuid, Writer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn roundtrip<Req: Encode, Resp: Decode>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &Req,
) -> Resp {
    let header = RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id,
        client_id: Some("wire-test".into()),
        ..Default::default()
    };
    let mut w = Writer::new();
    header
        .encode(&mut w, request_header_version(key, version))
        .unwrap();
    body.encode(&mut w, version).unwrap();
    let payload = w.into_bytes();
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    stream.write_all(&frame).await.unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.unwrap();
    let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf).await.unwrap();
    let mut buf = Bytes::from(buf);
    let rh = ResponseHeader::decode(&mut buf, response_header_version(key, version)).unwrap();
    assert_eq!(rh.correlation_id, correlation_id);
    let resp = Resp::decode(&mut buf, version).unwrap();
    assert!(!buf.has_remaining(), "response fully consumed");
    resp
}

#[test]
fn produce_then_fetch_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    actix::System::new().block_on(async move {
        let pools = ArbiterPools::start(1, 2);
        let layer = start_partitions(
            PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new()),
            Some(&pools),
        )
        .unwrap();
        layer
            .registry
            .send(ApplyPartitionChanges {
                changes: vec![PartitionChange {
                    kind: PartitionChangeKind::BecomeLeader,
                    topic: "wire".into(),
                    topic_id: Uuid([5; 16]),
                    partition: 0,
                    leader: 1,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    replicas: vec![1],
                    isr: vec![1],
                    config_overrides: BTreeMap::new(),
                }],
            })
            .await
            .unwrap();
        let mut router = RequestRouter::new();
        register(&mut router, layer.apis.clone());
        let (_features_tx, features) = features_channel(Vec::new(), bootstrap_finalized_features());
        let router = router.build(features);
        let config = NetworkConfig {
            listeners: vec![ListenerSpec {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 0,
                kind: ListenerKind::Broker,
                security: kactor_actors::security::ListenerSecurity::plaintext(),
            }],
            listen_backlog_size: 50,
            socket_send_buffer_bytes: -1,
            socket_receive_buffer_bytes: -1,
            max_connections: 100,
            max_connections_per_ip: 100,
            max_connections_per_ip_overrides: Default::default(),
            queued_max_request_bytes: -1,
            limits: ConnectionLimits {
                socket_request_max_bytes: 100 << 20,
                queued_max_requests: 16,
                connections_max_idle_ms: 600_000,
            },
        };
        let server = SocketServerActor::bind(config, router, pools.clone()).unwrap();
        let address = server.bound_listeners()[0].address;
        let _server = actix::Actor::start_in_arbiter(&pools.next_network(), move |_| server);

        let mut stream = TcpStream::connect(address).await.unwrap();
        let values: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; 2000]).collect();
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        let sent = batch(&refs, 1);
        for (i, acks) in [(0, 1i16), (1, -1)] {
            let produce = ProduceRequest {
                acks,
                timeout_ms: 5000,
                topic_data: vec![TopicProduceData {
                    name: "wire".into(),
                    partition_data: vec![PartitionProduceData {
                        index: 0,
                        records: Some(Records::Memory(sent.clone())),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
            let r: ProduceResponse = roundtrip(&mut stream, ApiKey::Produce, 9, i, &produce).await;
            let p = &r.responses[0].partition_responses[0];
            assert_eq!((p.error_code, p.base_offset), (0, 50 * i as i64));
        }
        let fetch = FetchRequest {
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 50 << 20,
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                topic: "wire".into(),
                partitions: vec![FetchPartition {
                    partition: 0,
                    fetch_offset: 0,
                    partition_max_bytes: 10 << 20,
                    current_leader_epoch: -1,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let max = <FetchRequest as Message>::VALID_VERSIONS.1.min(12);
        let r: FetchResponse = tokio::time::timeout(
            Duration::from_secs(10),
            roundtrip(&mut stream, ApiKey::Fetch, max, 2, &fetch),
        )
        .await
        .unwrap();
        let pd = &r.responses[0].partitions[0];
        assert_eq!((pd.error_code, pd.high_watermark), (0, 100));
        let Some(Records::Memory(got)) = &pd.records else {
            panic!("decoded records are in memory")
        };
        // Two batches, byte-identical to what was sent apart from offset and epoch.
        let mut pos = 0;
        let mut bases = vec![];
        while pos < got.len() {
            let h = BatchHeader::parse(&got[pos..]).unwrap();
            verify_crc(&got[pos..pos + h.total_size()]).unwrap();
            assert_eq!(&got[pos + 16..pos + h.total_size()], &sent[16..]);
            bases.push(h.base_offset);
            pos += h.total_size();
        }
        assert_eq!(bases, vec![0, 50]);
        layer.shutdown().await.unwrap();
        pools.stop();
    });
}
