//! MetadataPublisherActor (Kafka's `MetadataLoader` + `BrokerMetadataPublisher`): a Raft
//! listener that replays committed records into a new immutable [`MetadataImage`], publishes it
//! on a watch channel (readers take an `Arc` snapshot without locking out the writer), and
//! sends per-partition leader/follower/delete notifications and dynamic broker config changes
//! to subscribers. State only changes here.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::watch;
use tracing::{error, info, warn};

use super::core::{
    broker_configs, local_changes, LocalChanges, LocalPartitionChange, LocalPartitionChangeKind,
    MetadataImage, MetadataRecord,
};
use super::messages::*;
use crate::metadata::core::snapshot::{changes_between, image_from_values, image_records};
use crate::metadata::core::ConfigResource;
use crate::metadata::core::Provenance;
use crate::network::api_versions::FinalizedFeatures;
use crate::raft::messages::{
    CreateSnapshot, LoadedSnapshot, MetadataBatchesCommitted, RaftLeaderChanged,
    RegisterRaftListener,
};
use crate::runtime::{ActorMetrics, MeteredAddr, MeteredRecipient, SupervisedActor};

/// Readers' handle on the latest image: `rx.borrow().clone()` is an `Arc` snapshot.
pub type MetadataImageWatch = watch::Receiver<Arc<MetadataImage>>;

/// When this node writes a metadata snapshot (Kafka's `SnapshotGenerator` settings).
#[derive(Debug, Clone, Copy)]
pub struct SnapshotPolicy {
    /// `metadata.log.max.record.bytes.between.snapshots`
    pub max_bytes: u64,
    /// `metadata.log.max.snapshot.interval.ms` (0: no time trigger).
    pub max_interval_ms: i64,
}

/// The snapshot generator's state.
struct SnapshotGenerator {
    policy: SnapshotPolicy,
    to: MeteredRecipient<CreateSnapshot>,
    /// Batch bytes applied since the last snapshot (or since start).
    bytes_since: u64,
    since_ms: i64,
    /// Append time of the last batch applied.
    last_batch_ms: i64,
    in_flight: bool,
}

pub struct MetadataPublisherActor {
    node_id: i32,
    image: Arc<MetadataImage>,
    image_tx: watch::Sender<Arc<MetadataImage>>,
    partition_subscribers: Vec<MeteredRecipient<PartitionsChanged>>,
    /// The image offset the partition subscribers last received.
    partitions_published_offset: i64,
    config_subscribers: Vec<MeteredRecipient<BrokerConfigsChanged>>,
    /// ApiVersions' view of the finalized features.
    features_tx: Option<watch::Sender<FinalizedFeatures>>,
    /// Where it registers for committed batches, at every start: a restart after a panic
    /// mid-batch re-registers and Raft delivers again from the log start (batches already in
    /// the image are skipped), so a batch lost with the panic is not a gap.
    raft: Option<MeteredRecipient<RegisterRaftListener>>,
    snapshots: Option<SnapshotGenerator>,
    metrics: ActorMetrics,
}

impl MetadataPublisherActor {
    /// The actor and the watch readers use. Register the actor with the RaftActor
    /// (`RegisterRaftListener { name: "MetadataPublisherActor", committed: addr.recipient(), leader_changes: None }`).
    pub fn new(node_id: i32, metrics: ActorMetrics) -> (Self, MetadataImageWatch) {
        let image = Arc::new(MetadataImage::default());
        let (image_tx, rx) = watch::channel(image.clone());
        (
            MetadataPublisherActor {
                node_id,
                image,
                image_tx,
                partition_subscribers: Vec::new(),
                partitions_published_offset: -1,
                config_subscribers: Vec::new(),
                features_tx: None,
                raft: None,
                snapshots: None,
                metrics,
            },
            rx,
        )
    }

    /// Publishes finalized feature levels (FeatureLevelRecords) to ApiVersions, with the
    /// image offset as the features epoch, as Kafka does.
    pub fn publish_features_to(mut self, tx: watch::Sender<FinalizedFeatures>) -> Self {
        self.features_tx = Some(tx);
        self
    }

    /// Registers with Raft when started, and again after every restart.
    pub fn registered_with(mut self, raft: MeteredRecipient<RegisterRaftListener>) -> Self {
        self.raft = Some(raft);
        self
    }

    /// Writes snapshots through `to` (the RaftActor) as `policy` says.
    pub fn snapshots_to(
        mut self,
        to: MeteredRecipient<CreateSnapshot>,
        policy: SnapshotPolicy,
    ) -> Self {
        self.snapshots = Some(SnapshotGenerator {
            policy,
            to,
            bytes_since: 0,
            since_ms: crate::raft::actor::now_ms(),
            last_batch_ms: 0,
            in_flight: false,
        });
        self
    }

    /// Replaces the image with a loaded snapshot's, unless the image is already past it, and
    /// tells subscribers what differs.
    fn load_snapshot(&mut self, s: &LoadedSnapshot) -> Result<(), String> {
        let provenance = Provenance {
            last_offset: s.id.offset - 1,
            last_epoch: s.id.epoch,
        };
        if provenance.last_offset <= self.image.provenance.last_offset {
            return Ok(());
        }
        let next = image_from_values(&s.values, s.kraft_version, provenance)?;
        let changes = changes_between(&self.image, &next);
        let local = local_changes(&self.image, &next, &changes, self.node_id);
        self.image = Arc::new(next);
        if changes.features_changed {
            self.publish_features();
        }
        self.publish(local);
        if let Some(g) = &mut self.snapshots {
            g.bytes_since = 0;
            g.since_ms = crate::raft::actor::now_ms();
        }
        info!(snapshot = ?s.id, records = s.values.len(), "loaded a metadata snapshot");
        Ok(())
    }

    /// Kafka's `SnapshotGenerator`: a snapshot of the image once enough record bytes were
    /// committed since the last one, or enough time passed with something new.
    fn maybe_snapshot(&mut self, ctx: &mut Context<Self>) {
        let Some(g) = &mut self.snapshots else { return };
        let now = crate::raft::actor::now_ms();
        let due = g.bytes_since >= g.policy.max_bytes
            || (g.policy.max_interval_ms > 0
                && g.bytes_since > 0
                && now - g.since_ms >= g.policy.max_interval_ms);
        if !due || g.in_flight || self.image.provenance.last_offset < 0 {
            return;
        }
        let values: Result<Vec<_>, _> = image_records(&self.image)
            .iter()
            .map(MetadataRecord::encode)
            .collect();
        let values = match values {
            Ok(v) => v,
            Err(e) => {
                error!(error = %e, "cannot encode the metadata image for a snapshot");
                return;
            }
        };
        g.in_flight = true;
        g.bytes_since = 0;
        g.since_ms = now;
        let msg = CreateSnapshot {
            last_offset: self.image.provenance.last_offset,
            last_epoch: self.image.provenance.last_epoch,
            last_contained_timestamp_ms: g.last_batch_ms,
            values,
        };
        g.to.send(msg)
            .into_actor(self)
            .map(|res, act, _| {
                if let Some(g) = &mut act.snapshots {
                    g.in_flight = false;
                }
                match res {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => warn!(error = %e, "metadata snapshot not written"),
                    Err(e) => warn!(error = %e, "RaftActor unreachable for a metadata snapshot"),
                }
            })
            .spawn(ctx);
    }

    fn publish_features(&self) {
        if let Some(tx) = &self.features_tx {
            tx.send_replace(FinalizedFeatures {
                epoch: self.image.provenance.last_offset,
                levels: self.image.features.clone(),
            });
        }
    }

    /// Every replica this node hosts in `image`, as a full snapshot for a new subscriber.
    fn hosted_partitions(&self) -> Vec<LocalPartitionChange> {
        let mut out = Vec::new();
        for topic in self.image.topics.by_id.values() {
            let overrides = self
                .image
                .config_overrides(&ConfigResource::topic(&topic.name));
            for (index, p) in &topic.partitions {
                if !p.replicas.contains(&self.node_id) {
                    continue;
                }
                out.push(LocalPartitionChange {
                    kind: if p.leader == self.node_id {
                        LocalPartitionChangeKind::BecomeLeader
                    } else {
                        LocalPartitionChangeKind::BecomeFollower
                    },
                    topic_name: topic.name.clone(),
                    topic_id: topic.id,
                    partition_index: *index,
                    leader_id: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    config_overrides: overrides.clone(),
                });
            }
        }
        out
    }

    /// Sends the partition subscribers `local` with the current image. Every image reaches
    /// them, with or without changes for this node (see [`PartitionsChanged`]), but replaying
    /// many batches sends only the ones that change a hosted replica and the last.
    fn publish_partitions(&mut self, local: LocalChanges) {
        let msg = PartitionsChanged {
            image: self.image.clone(),
            partitions: local.partitions,
            topic_configs: local.topic_configs,
        };
        self.partition_subscribers.retain(|s| s.connected());
        for s in &self.partition_subscribers {
            s.do_send(msg.clone());
        }
        self.partitions_published_offset = self.image.provenance.last_offset;
    }

    fn publish(&mut self, local: LocalChanges) {
        if !local.partitions.is_empty() || !local.topic_configs.is_empty() {
            self.publish_partitions(LocalChanges {
                partitions: local.partitions,
                topic_configs: local.topic_configs,
                broker_configs: None,
            });
        }
        if let Some(c) = local.broker_configs {
            let msg = BrokerConfigsChanged {
                cluster_default: c.cluster_default,
                this_broker: c.this_broker,
            };
            self.config_subscribers.retain(|s| s.connected());
            for s in &self.config_subscribers {
                s.do_send(msg.clone());
            }
        }
    }
}

impl Actor for MetadataPublisherActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(raft) = &self.raft {
            let me = MeteredAddr::new(ctx.address(), self.metrics.clone());
            raft.do_send(RegisterRaftListener {
                name: "MetadataPublisherActor",
                committed: me.clone().recipient(),
                leader_changes: Some(me.recipient()),
            });
        }
    }
}

impl Supervised for MetadataPublisherActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // The image is immutable and only replaced after a whole batch applied, so what we
        // hold is consistent; started() registers again for what the panic may have lost.
    }
}

impl SupervisedActor for MetadataPublisherActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(MetadataPublisherActor);

impl Handler<MetadataBatchesCommitted> for MetadataPublisherActor {
    type Result = ();

    fn handle(&mut self, msg: MetadataBatchesCommitted, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        let before = self.image.provenance.last_offset;
        if let Some(s) = &msg.snapshot {
            if let Err(e) = self.load_snapshot(s) {
                error!(snapshot = ?s.id, error = %e, "cannot load a metadata snapshot; image frozen");
                return;
            }
        }
        for batch in msg.batches.iter() {
            if batch.last_offset <= self.image.provenance.last_offset {
                continue;
            }
            if let Some(g) = &mut self.snapshots {
                g.bytes_since += batch.size_in_bytes as u64;
                g.last_batch_ms = batch.append_timestamp_ms;
            }
            let records: Result<Vec<MetadataRecord>, _> = if batch.is_control {
                Ok(Vec::new())
            } else {
                batch
                    .records
                    .iter()
                    .cloned()
                    .map(MetadataRecord::decode)
                    .collect()
            };
            let applied = records.map_err(|e| e.to_string()).and_then(|records| {
                let kraft_version = batch.kraft_version().map_err(|e| e.to_string())?;
                let (mut next, mut changes) = self
                    .image
                    .apply_batch(&records, batch.last_offset, batch.epoch)
                    .map_err(|e| e.to_string())?;
                if let Some(level) = kraft_version {
                    next.replay_kraft_version(level, &mut changes);
                }
                Ok((next, changes))
            });
            match applied {
                Ok((next, changes)) => {
                    let local = local_changes(&self.image, &next, &changes, self.node_id);
                    self.image = Arc::new(next);
                    if changes.features_changed {
                        self.publish_features();
                    }
                    self.publish(local);
                }
                Err(e) => {
                    // Serving an image that skipped a record would be serving wrong metadata:
                    // Kafka's loader faults the same way and the process must restart.
                    error!(offset = batch.base_offset, error = %e, "cannot apply committed metadata; image frozen");
                    return;
                }
            }
        }
        if self.image.provenance.last_offset != before {
            if self.partitions_published_offset != self.image.provenance.last_offset {
                self.publish_partitions(LocalChanges::default());
            }
            self.image_tx.send_replace(self.image.clone());
        }
        self.maybe_snapshot(ctx);
    }
}

impl Handler<RaftLeaderChanged> for MetadataPublisherActor {
    type Result = ();

    fn handle(&mut self, msg: RaftLeaderChanged, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        info!(leader = ?msg.leader_id, epoch = msg.epoch, "metadata leader");
    }
}

impl Handler<SubscribePartitionChanges> for MetadataPublisherActor {
    type Result = ();

    fn handle(&mut self, msg: SubscribePartitionChanges, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        // Always, even with nothing hosted: the subscriber serves this image from now on.
        msg.subscriber.do_send(PartitionsChanged {
            image: self.image.clone(),
            partitions: self.hosted_partitions(),
            topic_configs: Vec::new(),
        });
        self.partition_subscribers.push(msg.subscriber);
    }
}

impl Handler<SubscribeBrokerConfigChanges> for MetadataPublisherActor {
    type Result = ();

    fn handle(&mut self, msg: SubscribeBrokerConfigChanges, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        let c = broker_configs(&self.image, self.node_id);
        msg.subscriber.do_send(BrokerConfigsChanged {
            cluster_default: c.cluster_default,
            this_broker: c.this_broker,
        });
        self.config_subscribers.push(msg.subscriber);
    }
}

impl Handler<GetMetadataImage> for MetadataPublisherActor {
    type Result = MessageResult<GetMetadataImage>;

    fn handle(&mut self, _: GetMetadataImage, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        MessageResult(self.image.clone())
    }
}

/// Waits until the published image has applied `offset` (e.g. a controller write), so a
/// handler can answer only once this node's metadata reflects it.
pub async fn wait_for_offset(rx: &mut MetadataImageWatch, offset: i64) -> bool {
    rx.wait_for(|img| img.provenance.last_offset >= offset)
        .await
        .is_ok()
}
