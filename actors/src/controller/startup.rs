//! Wiring of the KRaft side of a node (Kafka's `KafkaRaftManager` + `ControllerServer` +
//! the broker's `MetadataLoader` / `BrokerLifecycleManager` start-up): opens the metadata log,
//! starts RaftActor, QuorumControllerActor (if this node is a voter), MetadataPublisherActor
//! and BrokerLifecycleActor (if this node is a broker) under supervision on one arbiter, and
//! registers the Raft listeners. The process topology calls this once.

use std::collections::BTreeSet;
use std::path::PathBuf;

use actix::prelude::*;
use tokio::sync::watch;

use super::actor::QuorumControllerActor;
use super::core::ControllerConfig;
use crate::metadata::actor::{MetadataImageWatch, MetadataPublisherActor};
use crate::metadata::lifecycle::{
    BrokerLifecycleActor, BrokerLifecycleConfig, BrokerLifecycleState,
};
use crate::network::api_versions::FinalizedFeatures;
use crate::raft::actor::{RaftActor, RaftActorConfig};
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
    /// Present when `process.roles` includes `controller`.
    pub controller: Option<ControllerConfig>,
    /// Present when `process.roles` includes `broker`.
    pub broker: Option<BrokerLifecycleConfig>,
    /// The sender half of `network::features_channel`, for ApiVersions' finalized features.
    pub finalized_features: Option<watch::Sender<FinalizedFeatures>>,
}

/// Addresses and watch channels of the started actors.
pub struct KraftHandles {
    pub raft: MeteredAddr<RaftActor>,
    pub controller: Option<MeteredAddr<QuorumControllerActor>>,
    pub publisher: MeteredAddr<MetadataPublisherActor>,
    pub lifecycle: Option<MeteredAddr<BrokerLifecycleActor>>,
    /// The latest published metadata image.
    pub image: MetadataImageWatch,
    /// The broker's lifecycle state (`Running` = unfenced, ready to serve).
    pub broker_state: Option<watch::Receiver<BrokerLifecycleState>>,
}

/// Opens the metadata log (failing start-up on a broken one) and starts the actors on
/// `arbiter`.
pub fn start_kraft(arbiter: &ArbiterHandle, cfg: KraftConfig) -> Result<KraftHandles, RaftError> {
    let raft_metrics = ActorMetrics::new("RaftActor");
    let mut raft_cfg = RaftActorConfig::single_node(cfg.node_id, cfg.metadata_log_dir.clone());
    raft_cfg.voters = cfg.voters.clone();
    raft_cfg.election_timeout_ms = cfg.election_timeout_ms;
    raft_cfg.segment_bytes = cfg.metadata_log_segment_bytes;
    let raft_actor = RaftActor::open(raft_cfg, raft_metrics.clone())?;
    let raft = start_supervised(arbiter, raft_metrics, move |_| raft_actor);

    let pub_metrics = ActorMetrics::new("MetadataPublisherActor");
    let (mut publisher_actor, image) =
        MetadataPublisherActor::new(cfg.node_id, pub_metrics.clone());
    if let Some(tx) = cfg.finalized_features {
        publisher_actor = publisher_actor.publish_features_to(tx);
    }
    publisher_actor = publisher_actor.registered_with(raft.clone().recipient());
    let publisher = start_supervised(arbiter, pub_metrics, move |_| publisher_actor);

    let mut controller_active = None;
    let controller = cfg.controller.map(|ccfg| {
        let metrics = ActorMetrics::new("QuorumControllerActor");
        let append = raft.recipient();
        let register = raft.recipient();
        let actor = QuorumControllerActor::new(ccfg, append, register, metrics.clone());
        controller_active = Some(actor.active_watch());
        start_supervised(arbiter, metrics, move |_| actor)
    });

    let (lifecycle, broker_state) = match (cfg.broker, &controller) {
        (Some(bcfg), Some(ctl)) => {
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
        // A broker-only node reaches a remote controller over the network: a later issue.
        _ => (None, None),
    };

    Ok(KraftHandles {
        raft,
        controller,
        publisher,
        lifecycle,
        image,
        broker_state,
    })
}
