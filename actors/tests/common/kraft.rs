//! A single-node KRaft (combined mode, one voter) for integration tests, and a way to call a
//! registered API handler as a connection would: the shape kactor's `start_kraft` runs with,
//! in one place for every test that needs a controller, a metadata log and a broker lifecycle.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kactor_actors::controller::apis::MetadataApis;
use kactor_actors::controller::{ControllerConfig, KraftConfig, KraftHandles};
use kactor_actors::metadata::lifecycle::BrokerLifecycleConfig;
use kactor_actors::metadata::{
    BrokerLifecycleState, SubscribeBrokerConfigChanges, SubscribePartitionChanges,
};
use kactor_actors::network::router::{
    ConnectionInfo, HandlerOutcome, ListenerKind, RequestContext, RequestRouter,
};
use kactor_actors::partition::startup::{start_partitions, PartitionLayer, PartitionLayerConfig};
use kactor_protocol::metadata::register_broker_record::BrokerEndpoint;
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid, Writer};

pub const CLUSTER: &str = "MkU3OEVBNTcwNTJENDM2Qk";

/// Node 1 as controller and broker with its metadata log in `dir`, a PLAINTEXT listener on
/// 127.0.0.1:9092 (registered, never bound) and the controller's defaults.
pub fn kraft_config(dir: &Path) -> KraftConfig {
    KraftConfig {
        node_id: 1,
        voters: BTreeSet::from([1]),
        metadata_log_dir: dir.to_path_buf(),
        election_timeout_ms: 1000,
        metadata_log_segment_bytes: 1 << 30,
        metadata_log: Default::default(),
        controller: Some(ControllerConfig {
            node_id: 1,
            cluster_id: CLUSTER.into(),
            ..Default::default()
        }),
        broker: Some(BrokerLifecycleConfig {
            node_id: 1,
            cluster_id: CLUSTER.into(),
            incarnation_id: Uuid::random(),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: 0,
                ..Default::default()
            }],
            rack: None,
            log_dirs: vec![Uuid([3; 16])],
            heartbeat_interval_ms: 2000,
        }),
        finalized_features: None,
        quorum: Default::default(),
    }
}

/// Waits (10 s at most) until the broker is registered and unfenced.
pub async fn until_running(h: &KraftHandles) {
    let mut rx = h.broker_state.clone().expect("broker role");
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| *s == BrokerLifecycleState::Running),
    )
    .await
    .expect("broker unfenced in time")
    .expect("lifecycle alive");
}

/// The metadata APIs of `h`'s node 1 (auto-creation on, no broker configs or controller
/// listeners).
pub fn metadata_apis(h: &KraftHandles) -> MetadataApis {
    MetadataApis {
        node_id: 1,
        cluster_id: CLUSTER.into(),
        controller: Some(h.controller.clone().expect("controller role")),
        raft: h.raft.clone(),
        image: h.image.clone(),
        auto_create_topics_enable: true,
        topic_channel: h.topic_channel.clone(),
        auto_create_in_flight: Default::default(),
        broker_configs: Arc::new(vec![]),
        controller_listeners: vec![],
        quorum: None,
        loggers: None,
        authz: kactor_actors::authorization::Authz::off(),
    }
}

/// Node 1's partition layer over disk logs in `data_dir`, following `h`'s metadata publisher
/// (partition and broker-config changes) as the topology wires it.
pub fn start_partition_layer(h: &KraftHandles, data_dir: &Path) -> PartitionLayer {
    let layer = start_partitions(
        PartitionLayerConfig::new(1, vec![data_dir.to_path_buf()], BTreeMap::new()),
        None,
    )
    .expect("partition layer starts");
    let registry = layer.registry.clone();
    h.publisher.do_send(SubscribePartitionChanges {
        subscriber: registry.recipient(),
    });
    h.publisher.do_send(SubscribeBrokerConfigChanges {
        subscriber: registry.recipient(),
    });
    layer
}

/// Runs `key`'s handler on a broker listener named PLAINTEXT.
pub async fn call(
    router: &RequestRouter,
    key: ApiKey,
    version: i16,
    body: RequestBody,
) -> ResponseBody {
    call_on(
        router,
        ListenerKind::Broker,
        "PLAINTEXT",
        key,
        version,
        body,
    )
    .await
}

/// Runs `key`'s handler as a connection on `listener` would, and checks that the response
/// encodes at the request's version (what the connection would do next).
pub async fn call_on(
    router: &RequestRouter,
    kind: ListenerKind,
    listener: &str,
    key: ApiKey,
    version: i16,
    body: RequestBody,
) -> ResponseBody {
    let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
    let ctx = RequestContext {
        api_key: key,
        api_version: version,
        header: Default::default(),
        connection: ConnectionInfo {
            connection_id: 1,
            peer: addr,
            local: addr,
            listener_name: Arc::from(listener),
            listener_kind: kind,
            security_protocol: "PLAINTEXT",
            principal: Default::default(),
        },
        received_at: Instant::now(),
        request_bytes: 0,
    };
    let route = router.route(key).expect("registered");
    match (route.handler)(ctx, body).await {
        HandlerOutcome::Respond(r) => {
            let mut w = Writer::new();
            r.encode(&mut w, version)
                .unwrap_or_else(|e| panic!("{key:?} v{version} response does not encode: {e}"));
            r
        }
        other => panic!("{key:?}: {other:?}"),
    }
}
