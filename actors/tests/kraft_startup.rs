//! Start-up of a combined node (Kafka's `BrokerLifecycleManager` against the co-located
//! `QuorumController`, and the broker's auto-creating Metadata answer): the broker registers
//! once the controller is active instead of being refused while it activates, heartbeats once
//! its image has caught up with its registration, and a Metadata request that auto-creates a
//! topic is answered with the topic's leader once this broker hosts it, so that the Produce
//! the answer invites is acknowledged on the first try.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use kactor_actors::controller::apis::register_with_auto_create_wait;
use kactor_actors::controller::core::errors::ApiError;
use kactor_actors::controller::core::requests::{BrokerHeartbeatReply, BrokerRegistrationReply};
use kactor_actors::controller::messages::{
    Committed, ControllerReply, ProcessBrokerHeartbeat, RegisterBroker,
};
use kactor_actors::controller::start_kraft;
use kactor_actors::metadata::core::MetadataImage;
use kactor_actors::metadata::lifecycle::BrokerLifecycleActor;
use kactor_actors::metadata::BrokerLifecycleState;
use kactor_actors::network::router::RequestRouter;
use kactor_actors::partition::apis::register as register_partitions;
use kactor_actors::partition::testing::batch;
use kactor_actors::runtime::ActorMetrics;
use kactor_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::{ApiKey, Records, RequestBody, ResponseBody};
use tokio::sync::watch;

mod common;
use common::kraft::{call, kraft_config, metadata_apis, start_partition_layer, until_running};

/// What the stand-in controller saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Register,
    /// A heartbeat and the metadata offset it reported.
    Heartbeat(i64),
}

/// A controller stand-in: grants the registration with broker epoch (= registration offset)
/// `EPOCH` and unfences a heartbeat that reports an image at or past it.
struct FakeController {
    seen: Arc<Mutex<Vec<Seen>>>,
}

const EPOCH: i64 = 7;

impl Actor for FakeController {
    type Context = Context<Self>;
}

impl kactor_actors::runtime::SupervisedActor for FakeController {
    const MAILBOX_CAPACITY: usize = 64;
}

kactor_actors::supervised_mailbox!(FakeController);

impl Handler<RegisterBroker> for FakeController {
    type Result = ControllerReply<BrokerRegistrationReply>;
    fn handle(&mut self, _: RegisterBroker, _: &mut Context<Self>) -> Self::Result {
        self.seen.lock().unwrap().push(Seen::Register);
        Ok(Committed {
            response: BrokerRegistrationReply {
                error: ApiError::NONE,
                broker_epoch: EPOCH,
            },
            offset: EPOCH,
        })
    }
}

impl Handler<ProcessBrokerHeartbeat> for FakeController {
    type Result = ControllerReply<BrokerHeartbeatReply>;
    fn handle(&mut self, m: ProcessBrokerHeartbeat, _: &mut Context<Self>) -> Self::Result {
        let offset = m.heartbeat.current_metadata_offset;
        self.seen.lock().unwrap().push(Seen::Heartbeat(offset));
        let caught_up = offset >= EPOCH;
        Ok(Committed {
            response: BrokerHeartbeatReply {
                error: ApiError::NONE,
                is_caught_up: caught_up,
                is_fenced: !caught_up,
                should_shut_down: false,
            },
            offset: -1,
        })
    }
}

fn image_at(offset: i64) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    image.provenance.last_offset = offset;
    Arc::new(image)
}

/// The lifecycle registers only once the controller says it is active, and its first
/// heartbeat reports an image that already holds its registration, so that one heartbeat
/// unfences it.
#[test]
fn broker_registers_when_controller_active_and_heartbeats_when_caught_up() {
    System::new().block_on(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let controller = kactor_actors::runtime::start_here(FakeController { seen: seen.clone() });
        let (active_tx, active_rx) = watch::channel(false);
        let (image_tx, image_rx) = watch::channel(image_at(0));
        let cfg = kraft_config(std::path::Path::new("/nonexistent"))
            .broker
            .expect("broker role");
        let (lifecycle, mut state) = BrokerLifecycleActor::new(
            cfg,
            controller.recipient(),
            controller.recipient(),
            image_rx,
            ActorMetrics::new("BrokerLifecycleActor"),
        );
        let _lifecycle = lifecycle.with_controller_active(active_rx).start();

        // A controller that is not active yet is not asked (it would only answer
        // NOT_CONTROLLER and leave the broker to a retry timer).
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            seen.lock().unwrap().is_empty(),
            "{:?}",
            seen.lock().unwrap()
        );
        assert_eq!(*state.borrow(), BrokerLifecycleState::Starting);

        active_tx.send_replace(true);
        tokio::time::timeout(
            Duration::from_secs(10),
            state.wait_for(|s| *s == BrokerLifecycleState::Recovery),
        )
        .await
        .expect("registered")
        .unwrap();
        // The image has not reached the registration yet: a heartbeat now would be answered
        // "fenced". Publishing it sends the heartbeat that unfences the broker.
        image_tx.send_replace(image_at(EPOCH));
        tokio::time::timeout(
            Duration::from_secs(10),
            state.wait_for(|s| *s == BrokerLifecycleState::Running),
        )
        .await
        .expect("unfenced")
        .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Seen::Register, Seen::Heartbeat(EPOCH)]
        );
    });
}

/// Against the real controller: the broker is registered and unfenced with one registration
/// and one heartbeat's worth of metadata (registration, then unfencing), and nothing refused.
#[test]
fn combined_node_unfences_with_one_registration() {
    let dir = tempfile::tempdir().unwrap();
    System::new().block_on(async move {
        let h = start_kraft(&Arbiter::current(), kraft_config(dir.path())).unwrap();
        until_running(&h).await;
        let image = h.image.borrow().clone();
        let broker = image.brokers.get(&1).expect("registered");
        assert!(!broker.fenced);
        // Bootstrap records, then one RegisterBrokerRecord and one unfencing
        // BrokerRegistrationChangeRecord: a refused registration writes nothing, so this
        // does not show a retry; the lifecycle test above does.
        assert_eq!(broker.epoch, image.provenance.last_offset - 1);
    });
}

/// A Metadata request for an unknown topic with auto-creation allowed: with a generous wait
/// the first answer already names the new partition's leader (this broker), the partition is
/// hosted by then, and an acks=all Produce right after it is acknowledged.
#[test]
fn auto_created_topic_metadata_has_leader_and_first_produce_is_acked() {
    let meta_dir = tempfile::tempdir().unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    System::new().block_on(async move {
        let h = start_kraft(&Arbiter::current(), kraft_config(meta_dir.path())).unwrap();
        until_running(&h).await;
        let layer = start_partition_layer(&h, data_dir.path());
        let mut router = RequestRouter::new();
        let mut apis = metadata_apis(&h);
        // A broker answers from the image its replicas already reflect, as the topology wires it.
        apis.image = layer.served_image.clone();
        register_with_auto_create_wait(
            &mut router,
            apis,
            // Generous, so that a slow disk cannot turn this into Kafka's (also valid)
            // UNKNOWN_TOPIC_OR_PARTITION answer.
            Duration::from_secs(10),
        );
        register_partitions(&mut router, layer.apis.clone());

        let ResponseBody::Metadata(r) = call(
            &router,
            ApiKey::Metadata,
            12,
            RequestBody::Metadata(MetadataRequest {
                topics: Some(vec![m::metadata_request::MetadataRequestTopic {
                    name: Some("first".into()),
                    ..Default::default()
                }]),
                allow_auto_topic_creation: true,
                ..Default::default()
            }),
        )
        .await
        else {
            panic!()
        };
        let t = &r.topics[0];
        assert_eq!((t.error_code, t.name.as_deref()), (0, Some("first")));
        assert_eq!(t.partitions.len(), 1);
        let p = &t.partitions[0];
        assert_eq!((p.error_code, p.partition_index, p.leader_id), (0, 0, 1));
        assert!(layer.apis.partitions.borrow().get("first", 0).is_some());

        let produce = ProduceRequest {
            acks: -1,
            timeout_ms: 5000,
            topic_data: vec![TopicProduceData {
                name: "first".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(Records::Memory(batch(&[b"first"], 1))),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Produce(r) =
            call(&router, ApiKey::Produce, 11, RequestBody::Produce(produce)).await
        else {
            panic!()
        };
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 0));

        // An unknown topic without auto-creation is still Kafka's UNKNOWN_TOPIC_OR_PARTITION.
        let ResponseBody::Metadata(r) = call(
            &router,
            ApiKey::Metadata,
            12,
            RequestBody::Metadata(MetadataRequest {
                topics: Some(vec![m::metadata_request::MetadataRequestTopic {
                    name: Some("not-created".into()),
                    ..Default::default()
                }]),
                allow_auto_topic_creation: false,
                ..Default::default()
            }),
        )
        .await
        else {
            panic!()
        };
        assert_eq!(r.topics[0].error_code, 3);
        layer.shutdown().await.unwrap();
    });
}
