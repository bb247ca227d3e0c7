//! Wiring of the KRaft side of a node (Kafka's `KafkaRaftManager` + `ControllerServer` +
//! the broker's `MetadataLoader` / `BrokerLifecycleManager` start-up): opens the metadata log,
//! starts RaftActor, QuorumControllerActor (if this node is a voter), MetadataPublisherActor
//! and BrokerLifecycleActor (if this node is a broker) under supervision on one arbiter, and
//! registers the Raft listeners. The process topology calls this once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use kactor_protocol::Uuid;
use tokio::sync::watch;

use super::actor::QuorumControllerActor;
use super::core::ControllerConfig;
use crate::metadata::actor::{MetadataImageWatch, MetadataPublisherActor, SnapshotPolicy};
use crate::metadata::alter_partition::AlterPartitionManagerActor;
use crate::metadata::controller_channel::ControllerChannelActor;
use crate::metadata::lifecycle::{
    BrokerLifecycleActor, BrokerLifecycleConfig, BrokerLifecycleState,
};
use crate::network::api_versions::FinalizedFeatures;
use crate::raft::actor::{RaftActor, RaftActorConfig};
use crate::raft::core::Endpoints;
use crate::raft::messages::RaftError;
use crate::runtime::{start_supervised, ActorMetrics, MeteredAddr};

#[derive(Debug, Clone)]
pub struct KraftConfig {
    pub node_id: i32,
    /// `controller.quorum.voters` ids (just `node_id` for a single node).
    pub voters: BTreeSet<i32>,
    /// `metadata.log.dir`, or the first `log.dirs` entry.
    pub metadata_log_dir: PathBuf,
    /// `controller.quorum.election.timeout.ms`
    pub election_timeout_ms: i64,
    /// `metadata.log.segment.bytes`
    pub metadata_log_segment_bytes: i32,
    /// Snapshots and retention of the metadata log.
    pub metadata_log: MetadataLogSettings,
    /// Present when `process.roles` includes `controller`.
    pub controller: Option<ControllerConfig>,
    /// Present when `process.roles` includes `broker`.
    pub broker: Option<BrokerLifecycleConfig>,
    /// The sender half of `network::features_channel`, for ApiVersions' finalized features.
    pub finalized_features: Option<watch::Sender<FinalizedFeatures>>,
    /// Where the other voters are and the quorum's timeouts.
    pub quorum: QuorumSettings,
}

/// When snapshots are written and how long the metadata log and snapshots are kept.
#[derive(Debug, Clone, Copy)]
pub struct MetadataLogSettings {
    pub snapshots: SnapshotPolicy,
    /// `metadata.max.retention.bytes`
    pub retention_bytes: i64,
    /// `metadata.max.retention.ms`
    pub retention_ms: i64,
}

impl Default for MetadataLogSettings {
    /// Kafka's defaults.
    fn default() -> Self {
        MetadataLogSettings {
            snapshots: SnapshotPolicy {
                max_bytes: 20 * 1024 * 1024,
                max_interval_ms: 60 * 60 * 1000,
            },
            retention_bytes: 100 * 1024 * 1024,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
        }
    }
}

/// The multi-voter part of the quorum configuration (Kafka's `QuorumConfig`).
#[derive(Debug, Clone)]
pub struct QuorumSettings {
    /// Each voter's controller listener (`controller.quorum.voters`).
    pub voter_endpoints: BTreeMap<i32, Endpoints>,
    /// `meta.properties` `cluster.id`, carried and checked in Raft requests.
    pub cluster_id: String,
    /// `controller.quorum.fetch.timeout.ms`
    pub fetch_timeout_ms: i64,
    /// `controller.quorum.election.backoff.max.ms`
    pub election_backoff_max_ms: i64,
    /// `controller.quorum.request.timeout.ms`
    pub request_timeout_ms: i64,
    /// `controller.quorum.retry.backoff.ms`
    pub retry_backoff_ms: i64,
    /// `controller.quorum.fetch.max.bytes`
    pub fetch_max_bytes: i32,
    /// `controller.quorum.auto.join.enable`, on a node with the controller role.
    pub auto_join: bool,
    /// `controller.quorum.fetch.snapshot.max.bytes`
    pub fetch_snapshot_max_bytes: i32,
    /// The metadata log dir's `meta.properties` `directory.id` (KIP-853 names a voter by it);
    /// ZERO when unknown.
    pub directory_id: Uuid,
    /// `controller.quorum.bootstrap.servers` (host:port): with no voters configured, the
    /// quorum is dynamic and these are asked where the leader is (KIP-853).
    pub bootstrap_servers: Vec<String>,
    /// This node's controller listeners (a dynamic voter announces them).
    pub local_listeners: Endpoints,
    /// The first of `controller.listener.names`.
    pub controller_listener: String,
}

impl Default for QuorumSettings {
    /// Kafka's defaults, no remote voters.
    fn default() -> Self {
        QuorumSettings {
            voter_endpoints: BTreeMap::new(),
            cluster_id: String::new(),
            fetch_timeout_ms: 2000,
            election_backoff_max_ms: 1000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            fetch_max_bytes: 1024 * 1024,
            auto_join: false,
            fetch_snapshot_max_bytes: 1024 * 1024,
            directory_id: Uuid::ZERO,
            bootstrap_servers: Vec::new(),
            local_listeners: Endpoints::new(),
            controller_listener: "CONTROLLER".to_string(),
        }
    }
}

/// Addresses and watch channels of the started actors.
pub struct KraftHandles {
    pub raft: MeteredAddr<RaftActor>,
    pub controller: Option<MeteredAddr<QuorumControllerActor>>,
    pub publisher: MeteredAddr<MetadataPublisherActor>,
    pub lifecycle: Option<MeteredAddr<BrokerLifecycleActor>>,
    /// The latest published metadata image.
    pub image: MetadataImageWatch,
    /// The Raft leader's id as it changes.
    pub raft_leader: watch::Receiver<Option<i32>>,
    /// host:port of the controllers this node knows (from the configured voters, or, in a
    /// dynamic quorum, from the voter set in the log and the leader's announcements).
    pub controller_addresses: watch::Receiver<Arc<BTreeMap<i32, String>>>,
    /// The broker's lifecycle state (`Running` = unfenced, ready to serve).
    pub broker_state: Option<watch::Receiver<BrokerLifecycleState>>,
    /// A broker's way to the active controller (its lifecycle, producer id blocks).
    pub controller_channel: Option<MeteredAddr<ControllerChannelActor>>,
    /// Where a broker's partition leaders send ISR changes (batched AlterPartition over a
    /// channel of its own).
    pub alter_partition: Option<MeteredAddr<AlterPartitionManagerActor>>,
    /// A broker's channel for the topics it creates itself (auto-created and internal ones):
    /// a burst of creations, each up to a request timeout, must not queue ahead of the
    /// lifecycle's heartbeats on `controller_channel`.
    pub topic_channel: Option<MeteredAddr<ControllerChannelActor>>,
}

/// Opens the metadata log (failing start-up on a broken one) and starts the actors on
/// `arbiter`.
pub fn start_kraft(arbiter: &ArbiterHandle, cfg: KraftConfig) -> Result<KraftHandles, RaftError> {
    let raft_metrics = ActorMetrics::new("RaftActor");
    let mut raft_cfg = RaftActorConfig::single_node(cfg.node_id, cfg.metadata_log_dir.clone());
    raft_cfg.voters = cfg.voters.clone();
    raft_cfg.election_timeout_ms = cfg.election_timeout_ms;
    raft_cfg.segment_bytes = cfg.metadata_log_segment_bytes;
    raft_cfg.voter_endpoints = cfg.quorum.voter_endpoints.clone();
    raft_cfg.cluster_id = cfg.quorum.cluster_id.clone();
    raft_cfg.fetch_timeout_ms = cfg.quorum.fetch_timeout_ms;
    raft_cfg.election_backoff_max_ms = cfg.quorum.election_backoff_max_ms;
    raft_cfg.request_timeout_ms = cfg.quorum.request_timeout_ms;
    raft_cfg.retry_backoff_ms = cfg.quorum.retry_backoff_ms;
    raft_cfg.directory_id = cfg.quorum.directory_id;
    raft_cfg.retention_bytes = cfg.metadata_log.retention_bytes;
    raft_cfg.retention_ms = cfg.metadata_log.retention_ms;
    raft_cfg.fetch_max_bytes = cfg.quorum.fetch_max_bytes;
    raft_cfg.auto_join = cfg.quorum.auto_join;
    raft_cfg.fetch_snapshot_max_bytes = cfg.quorum.fetch_snapshot_max_bytes;
    raft_cfg.bootstrap_servers = cfg.quorum.bootstrap_servers.clone();
    raft_cfg.local_listeners = cfg.quorum.local_listeners.clone();
    raft_cfg.controller_listener = cfg.quorum.controller_listener.clone();
    let raft_actor = RaftActor::open(raft_cfg, raft_metrics.clone())?;
    let raft_leader = raft_actor.leader_watch();
    let controller_addresses = raft_actor.addresses_watch();
    let append_gate = raft_actor.append_gate();
    // Other voters (or a dynamic quorum, whose voters come and go): the active controller
    // may be in another process.
    let remote_voters = cfg.voters.is_empty() || cfg.voters.iter().any(|v| *v != cfg.node_id);
    let raft = start_supervised(arbiter, raft_metrics, move |_| raft_actor);

    let pub_metrics = ActorMetrics::new("MetadataPublisherActor");
    let (mut publisher_actor, image) =
        MetadataPublisherActor::new(cfg.node_id, pub_metrics.clone());
    if let Some(tx) = cfg.finalized_features {
        publisher_actor = publisher_actor.publish_features_to(tx);
    }
    publisher_actor = publisher_actor
        .registered_with(raft.clone().recipient())
        .snapshots_to(raft.clone().recipient(), cfg.metadata_log.snapshots);
    let publisher = start_supervised(arbiter, pub_metrics, move |_| publisher_actor);

    let mut controller_active = None;
    let controller = cfg.controller.map(|ccfg| {
        let metrics = ActorMetrics::new("QuorumControllerActor");
        let append = raft.recipient();
        let upgrade_kraft = raft.recipient();
        let register = raft.recipient();
        let actor =
            QuorumControllerActor::new(ccfg, append, upgrade_kraft, register, metrics.clone())
                .with_append_gate(append_gate);
        controller_active = Some(actor.active_watch());
        start_supervised(arbiter, metrics, move |_| actor)
    });

    // Every broker reaches the active controller through the channel, wherever it runs (the
    // co-located one answers directly); the lifecycle uses it too unless this node is the only
    // voter, whose lifecycle talks to its own controller and waits for it to activate.
    let request_timeout =
        std::time::Duration::from_millis(cfg.quorum.request_timeout_ms.max(1) as u64);
    let channel = |name: &'static str| {
        let metrics = ActorMetrics::new(name);
        let channel = ControllerChannelActor::new(
            cfg.node_id,
            controller.clone(),
            raft_leader.clone(),
            controller_addresses.clone(),
            request_timeout,
            metrics.clone(),
        );
        start_supervised(arbiter, metrics, move |_| channel)
    };
    let controller_channel = cfg
        .broker
        .as_ref()
        .map(|_| channel("ControllerChannelActor"));
    let topic_channel = cfg
        .broker
        .as_ref()
        .map(|_| channel("TopicCreationChannelActor"));
    // ISR changes travel apart from the heartbeats (Kafka's separate `alter-partition`
    // channel): a burst of them must not delay a heartbeat past the session timeout.
    let alter_partition = cfg.broker.as_ref().map(|_| {
        let metrics = ActorMetrics::new("AlterPartitionManagerActor");
        let actor = AlterPartitionManagerActor::new(
            cfg.node_id,
            channel("AlterPartitionChannelActor"),
            Some(image.clone()),
            request_timeout + std::time::Duration::from_secs(1),
            metrics.clone(),
        );
        start_supervised(arbiter, metrics, move |_| actor)
    });
    let (lifecycle, broker_state) = match (cfg.broker, &controller, &controller_channel) {
        (Some(bcfg), ctl, Some(channel)) if remote_voters || ctl.is_none() => {
            let metrics = ActorMetrics::new("BrokerLifecycleActor");
            let (actor, state) = BrokerLifecycleActor::new(
                bcfg,
                channel.clone().recipient(),
                channel.clone().recipient(),
                image.clone(),
                metrics.clone(),
            );
            (
                Some(start_supervised(arbiter, metrics, move |_| actor)),
                Some(state),
            )
        }
        (Some(bcfg), Some(ctl), _) => {
            let metrics = ActorMetrics::new("BrokerLifecycleActor");
            let (actor, state) = BrokerLifecycleActor::new(
                bcfg,
                ctl.recipient(),
                ctl.recipient(),
                image.clone(),
                metrics.clone(),
            );
            let actor = match controller_active {
                Some(active) => actor.with_controller_active(active),
                None => actor,
            };
            (
                Some(start_supervised(arbiter, metrics, move |_| actor)),
                Some(state),
            )
        }
        // A controller-only node has no broker lifecycle.
        _ => (None, None),
    };

    Ok(KraftHandles {
        raft_leader,
        controller_addresses,
        raft,
        controller,
        publisher,
        lifecycle,
        image,
        broker_state,
        controller_channel,
        alter_partition,
        topic_channel,
    })
}
