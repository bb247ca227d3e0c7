//! `ReplicaManagerActor` (Kafka's `ReplicaManager` + the log-opening half of `LogManager`): owns
//! the table topic-partition → `PartitionActor`, applies the metadata publisher's leader /
//! follower / delete notifications (opening, creating and deleting logs through a
//! [`LogFactory`]), and publishes the table to request handlers as an immutable snapshot
//! (`Arc<PartitionTable>` in a `watch` channel, swapped on every change).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, MessageResult, ResponseActFuture,
    Supervised, WrapFuture,
};
use futures_util::future::join_all;
use kactor_protocol::Uuid;
use tokio::sync::watch;

use super::actor::{now_ms, PartitionActor, PurgatoryLink};
use super::core::{MemoryLog, Partition, PartitionConfig, PartitionLog, TopicPartition};
use super::messages::*;
use crate::purgatory::LeadershipLost;
use crate::runtime::{ActorMetrics, ArbiterPools, MeteredAddr, SupervisedActor};

/// Opens and creates partition logs under `log.dirs` (the disk-backed implementation wraps
/// `crate::log::LogDir`; [`MemoryLogFactory`] keeps logs in memory).
/// A log that could not be opened or created, and the log dir it failed in (an I/O error there
/// takes the whole dir offline, as Kafka's `LogDirFailureChannel` does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOpenError {
    pub log_dir: String,
    pub message: String,
}

impl std::fmt::Display for LogOpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub trait LogFactory: Send + 'static {
    /// The existing log of `tp` (recovered at load), or a new empty one in an online dir.
    fn open_or_create(
        &mut self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: &PartitionConfig,
        topic_overrides: &BTreeMap<String, String>,
    ) -> Result<Box<dyn PartitionLog>, LogOpenError>;
    /// Takes `log_dir` offline after an I/O error: nothing is placed, checkpointed or marked
    /// cleanly shut down there any more. Returns how many dirs are still online.
    fn take_offline(&mut self, _log_dir: &str) -> usize {
        1
    }
    /// The log dirs taken offline.
    fn offline_log_dirs(&self) -> Vec<String> {
        Vec::new()
    }
    /// Removes a log this node has on disk but never opened (deleted while we were down).
    fn delete_unopened(&mut self, _tp: &TopicPartition) -> Result<(), String> {
        Ok(())
    }
    /// The log dir holding `tp` (DescribeLogDirs).
    fn log_dir_of(&self, tp: &TopicPartition) -> String;
    /// Every configured log dir.
    fn log_dirs(&self) -> Vec<String>;
    /// The high watermark `replication-offset-checkpoint` held for `tp` when the log dirs were
    /// loaded, taken once by the replica that opens the log; None where nothing is persisted
    /// (the partition then starts from its recovery point).
    fn take_checkpointed_high_watermark(&mut self, _tp: &TopicPartition) -> Option<i64> {
        None
    }
    /// Writes recovery-point and log-start-offset checkpoints from the replicas' numbers.
    fn checkpoint(&mut self, replicas: &[(TopicPartition, ReplicaInfo)]) -> Result<(), String>;
    /// Writes `replication-offset-checkpoint` from the replicas' high watermarks
    /// (`replica.high.watermark.checkpoint.interval.ms`).
    fn checkpoint_high_watermarks(
        &mut self,
        _high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String> {
        Ok(())
    }
    /// Closes the logs handed back by stopped replicas, checkpoints their high watermarks and
    /// writes the clean-shutdown marker.
    fn shutdown(
        &mut self,
        logs: Vec<Box<dyn PartitionLog>>,
        high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String>;
    /// Removes logs the previous run renamed for deletion (after `file.delete.delay.ms`).
    fn purge_deleted(&mut self) {}
    /// Renames the logs on disk that nobody opened and `is_stray` picks to their `-stray` name
    /// (Kafka's `LogManager.findStrayReplicas`); returns the new paths.
    fn mark_strays(
        &mut self,
        _is_stray: &dyn Fn(&TopicPartition, Option<Uuid>) -> bool,
    ) -> Result<Vec<std::path::PathBuf>, String> {
        Ok(Vec::new())
    }
}

/// Logs in memory: tests, and a broker started without storage.
#[derive(Debug, Default)]
pub struct MemoryLogFactory {
    pub shut_down: bool,
    pub checkpoints: usize,
}

impl LogFactory for MemoryLogFactory {
    fn open_or_create(
        &mut self,
        _tp: &TopicPartition,
        _topic_id: Uuid,
        _config: &PartitionConfig,
        _overrides: &BTreeMap<String, String>,
    ) -> Result<Box<dyn PartitionLog>, LogOpenError> {
        Ok(Box::new(MemoryLog::new()))
    }
    fn log_dir_of(&self, _tp: &TopicPartition) -> String {
        "memory".into()
    }
    fn log_dirs(&self) -> Vec<String> {
        vec!["memory".into()]
    }
    fn checkpoint(&mut self, _replicas: &[(TopicPartition, ReplicaInfo)]) -> Result<(), String> {
        self.checkpoints += 1;
        Ok(())
    }
    fn shutdown(
        &mut self,
        _logs: Vec<Box<dyn PartitionLog>>,
        _high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String> {
        self.shut_down = true;
        Ok(())
    }
}

/// One hosted replica as request handlers see it.
#[derive(Clone)]
pub struct HostedReplica {
    pub addr: MeteredAddr<PartitionActor>,
    pub topic_id: Uuid,
    pub leader: i32,
    pub leader_epoch: i32,
    pub log_dir: String,
    pub replica_count: usize,
    pub isr_size: usize,
}

/// The immutable snapshot request handlers look partitions up in.
#[derive(Clone, Default)]
pub struct PartitionTable {
    pub partitions: HashMap<TopicPartition, HostedReplica>,
    /// Replicas assigned here whose log dir is offline (Kafka's `HostedPartition.Offline`):
    /// requests for them get KAFKA_STORAGE_ERROR. Value: the failed log dir.
    pub offline: HashMap<TopicPartition, String>,
    /// Log dirs taken offline after an I/O error.
    pub offline_log_dirs: Vec<String>,
    pub topic_ids: HashMap<String, Uuid>,
    pub topic_names: HashMap<Uuid, String>,
    /// The metadata image the table was last updated from (every topic, hosted or not).
    pub image: Option<Arc<crate::metadata::core::MetadataImage>>,
    /// Every configured log dir (DescribeLogDirs lists empty ones too).
    pub log_dirs: Vec<String>,
    /// Bumped on every change (tests, caches).
    pub version: u64,
}

impl PartitionTable {
    pub fn get(&self, topic: &str, partition: i32) -> Option<&HostedReplica> {
        self.partitions.get(&TopicPartition::new(topic, partition))
    }
    /// A topic's name by id: hosted topics first, then the metadata image.
    pub fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.topic_names.get(id).cloned().or_else(|| {
            self.image
                .as_ref()
                .and_then(|i| i.topics.get(id).map(|t| t.name.clone()))
        })
    }
    pub fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.topic_ids.get(name).copied().or_else(|| {
            self.image
                .as_ref()
                .and_then(|i| i.topics.get_by_name(name).map(|t| t.id))
        })
    }
    /// The partition's leader in the served image (-1 when it has none), `None` when the
    /// image does not know the partition.
    pub fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        self.image
            .as_ref()?
            .topics
            .get_by_name(topic)?
            .partitions
            .get(&partition)
            .map(|p| p.leader)
    }

    /// Whether the cluster knows the partition at all (hosted here or not): decides between
    /// NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION for a partition not hosted here.
    pub fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.get(topic, partition).is_some()
            || self.image.as_ref().is_some_and(|i| {
                i.topics
                    .get_by_name(topic)
                    .is_some_and(|t| t.partitions.contains_key(&partition))
            })
    }
}

/// What handlers hold: `reader.borrow().clone()` is the current `Arc<PartitionTable>`.
pub type PartitionTableReader = watch::Receiver<Arc<PartitionTable>>;

pub struct ReplicaManagerActor {
    broker_id: i32,
    broker_config: BTreeMap<String, String>,
    /// The broker's config from its properties file, under any dynamic values.
    static_broker_config: BTreeMap<String, String>,
    topic_overrides: HashMap<String, BTreeMap<String, String>>,
    factory: Box<dyn LogFactory>,
    arbiters: Option<ArbiterPools>,
    purgatory: Option<PurgatoryLink>,
    table: Arc<PartitionTable>,
    /// Where partitions report their failures (this actor), once started.
    own_addr: Option<MeteredAddr<ReplicaManagerActor>>,
    publisher: watch::Sender<Arc<PartitionTable>>,
    /// The metadata image once this broker's replicas reflect it: what request handlers
    /// answer from (Kafka publishes an image to its metadata cache only after the replica
    /// manager applied the delta), so Metadata never shows a partition Produce cannot find.
    served_image: watch::Sender<Arc<crate::metadata::core::MetadataImage>>,
    /// The replica fetchers of the partitions this broker follows.
    fetchers: super::fetcher_manager::FetcherManager,
    /// Where leaders here send ISR changes (the controller channel).
    isr_channel: Option<crate::runtime::MeteredRecipient<AlterIsr>>,
    /// Set when ShutdownReplicas arrives: the table is emptied while the replicas stop one
    /// by one, and a periodic checkpoint taken then would write files without them (and a
    /// crash before the shutdown's own write would leave them so).
    shutting_down: bool,
    metrics: ActorMetrics,
}

impl ReplicaManagerActor {
    pub fn new(
        broker_id: i32,
        broker_config: BTreeMap<String, String>,
        factory: Box<dyn LogFactory>,
        arbiters: Option<ArbiterPools>,
        purgatory: Option<PurgatoryLink>,
    ) -> Self {
        let table = Arc::new(PartitionTable {
            log_dirs: factory.log_dirs(),
            ..Default::default()
        });
        let (publisher, _) = watch::channel(table.clone());
        let (served_image, _) = watch::channel(Arc::default());
        let fetchers = super::fetcher_manager::FetcherManager::new(
            broker_id,
            &broker_config,
            arbiters.clone(),
        );
        ReplicaManagerActor {
            fetchers,
            isr_channel: None,
            shutting_down: false,
            broker_id,
            static_broker_config: broker_config.clone(),
            broker_config,
            topic_overrides: HashMap::new(),
            factory,
            arbiters,
            purgatory,
            table,
            own_addr: None,
            publisher,
            served_image,
            metrics: ActorMetrics::new("ReplicaManagerActor"),
        }
    }

    /// Leaders here propose ISR changes to `channel` (the controller channel).
    pub fn with_isr_channel(
        mut self,
        channel: Option<crate::runtime::MeteredRecipient<AlterIsr>>,
    ) -> Self {
        self.isr_channel = channel;
        self
    }

    /// A reader of the table, for wiring before the actor starts.
    pub fn reader(&self) -> PartitionTableReader {
        self.publisher.subscribe()
    }

    /// A reader of the served image (see the field), for wiring before the actor starts.
    pub fn served_image(&self) -> crate::metadata::actor::MetadataImageWatch {
        self.served_image.subscribe()
    }

    /// A topic's config overrides (`None`: the topic left this broker), which also say which
    /// of its replicas are replication-throttled here.
    fn set_topic_overrides(&mut self, topic: &str, overrides: Option<BTreeMap<String, String>>) {
        let quotas = self.fetchers.replication_quotas();
        match overrides {
            Some(o) => {
                quotas.set_topic_config(topic, &o);
                self.topic_overrides.insert(topic.to_string(), o);
            }
            None => {
                quotas.set_topic_config(topic, &BTreeMap::new());
                self.topic_overrides.remove(topic);
            }
        }
    }

    /// The broker's effective config changed: the replication throttle rates and every
    /// replica's config follow it.
    fn set_broker_config(&mut self, config: BTreeMap<String, String>) {
        self.fetchers.replication_quotas().set_rates(&config);
        self.broker_config = config;
        let table = self.table.clone();
        self.push_configs(table.partitions.iter());
    }

    /// The throttles this broker's request handlers and fetchers share.
    pub fn replication_quotas(&self) -> Arc<super::replication_quota::ReplicationQuotas> {
        self.fetchers.replication_quotas().clone()
    }

    fn config_for(&self, topic: &str) -> PartitionConfig {
        let empty = BTreeMap::new();
        let overrides = self.topic_overrides.get(topic).unwrap_or(&empty);
        PartitionConfig::resolve(&self.broker_config, overrides)
    }

    fn start_replica(&mut self, change: &PartitionChange) -> Result<HostedReplica, LogOpenError> {
        let tp = change.tp();
        let config = self.config_for(&change.topic);
        let log =
            self.factory
                .open_or_create(&tp, change.topic_id, &config, &change.config_overrides)?;
        let log_dir = self.factory.log_dir_of(&tp);
        let mut core = Partition::new(tp.clone(), self.broker_id, log, config, now_ms());
        if let Some(hw) = self.factory.take_checkpointed_high_watermark(&tp) {
            core.restore_high_watermark(hw);
        }
        // The new replica takes its role before it serves anything: the actor starts ready.
        match change.kind {
            PartitionChangeKind::BecomeLeader => {
                core.become_leader(&change.assignment(), super::actor::now_ms())
                    .map_err(|e| LogOpenError {
                        log_dir: log_dir.clone(),
                        message: e.to_string(),
                    })?;
            }
            _ => core.become_follower(&change.assignment()),
        }
        let purgatory = self.purgatory.clone();
        let registry = self.own_addr.clone().map(|to| (to, log_dir.clone()));
        let metrics = ActorMetrics::new("PartitionActor");
        let make = move |_: &mut Context<PartitionActor>| {
            PartitionActor::new(core, purgatory).reporting_to(registry)
        };
        let addr = match &self.arbiters {
            Some(pools) => {
                let arbiter = pools.io_for(&(tp.topic.as_str(), tp.partition));
                crate::runtime::start_supervised(&arbiter, metrics, make)
            }
            None => MeteredAddr::new(actix::Supervisor::start(make), metrics),
        };
        if let Some(channel) = &self.isr_channel {
            addr.do_send(ConnectIsrChannel {
                topic_id: change.topic_id,
                channel: channel.clone(),
            });
        }
        Ok(HostedReplica {
            addr,
            topic_id: change.topic_id,
            leader: change.leader,
            leader_epoch: change.leader_epoch,
            log_dir,
            replica_count: change.replicas.len(),
            isr_size: change.isr.len(),
        })
    }

    /// Applies `changes` in two steps: replicas being deleted (or whose topic was re-created
    /// under the same name, i.e. a new topic id) stop and remove their logs first, and the
    /// registry handles nothing else until they have, so a re-created topic never opens the
    /// old topic's directory; then everything else.
    fn apply_in_order(
        &mut self,
        changes: Vec<PartitionChange>,
        image: Option<Arc<crate::metadata::core::MetadataImage>>,
        ctx: &mut Context<Self>,
    ) {
        let mut table = (*self.table).clone();
        let mut stops = Vec::new();
        for change in &changes {
            let tp = change.tp();
            let remove = match change.kind {
                PartitionChangeKind::Delete => true,
                _ => table
                    .partitions
                    .get(&tp)
                    .is_some_and(|r| r.topic_id != change.topic_id),
            };
            if remove {
                if let Some(r) = table.partitions.remove(&tp) {
                    stops.push(async move { r.addr.send(StopReplica { delete: true }).await });
                }
            }
        }
        if stops.is_empty() {
            self.apply_with_image(changes, image);
            return;
        }
        self.publish(table);
        ctx.wait(
            async move {
                join_all(stops).await;
            }
            .into_actor(self)
            .map(move |_, act, _| act.apply_with_image(changes, image)),
        );
    }

    fn apply_with_image(
        &mut self,
        changes: Vec<PartitionChange>,
        image: Option<Arc<crate::metadata::core::MetadataImage>>,
    ) {
        let mut table = (*self.table).clone();
        if let Some(image) = image {
            self.fetchers.refresh_addresses(&image);
            table.image = Some(image);
        }
        for change in changes {
            let tp = change.tp();
            match change.kind {
                PartitionChangeKind::Delete => {
                    // An offline replica's files stay where they are, as Kafka leaves them in a
                    // failed dir; the next start of a healed dir finds them unassigned.
                    table.offline.remove(&tp);
                    self.fetchers.unfollow(std::slice::from_ref(&tp));
                    if let Some(r) = table.partitions.remove(&tp) {
                        r.addr.do_send(StopReplica { delete: true });
                    } else {
                        // No replica to tell the purgatory (offline or never opened): forget
                        // its ended leaderships here, or a topic created again under the same
                        // name would find its epochs counted as lost.
                        if let Some(p) = &self.purgatory {
                            p.leadership_lost.do_send(LeadershipLost {
                                tp: tp.clone(),
                                leader_epoch: -1,
                                deleted: true,
                            });
                        }
                        if let Err(e) = self.factory.delete_unopened(&tp) {
                            tracing::error!(%tp, error = %e, "failed to delete partition log");
                        }
                    }
                    if !table.partitions.keys().any(|k| k.topic == tp.topic) {
                        if let Some(id) = table.topic_ids.remove(&tp.topic) {
                            table.topic_names.remove(&id);
                        }
                        self.set_topic_overrides(&tp.topic, None);
                    }
                }
                PartitionChangeKind::BecomeLeader | PartitionChangeKind::BecomeFollower => {
                    self.set_topic_overrides(&change.topic, Some(change.config_overrides.clone()));
                    table
                        .topic_ids
                        .insert(change.topic.clone(), change.topic_id);
                    table
                        .topic_names
                        .insert(change.topic_id, change.topic.clone());
                    let config = self.config_for(&change.topic);
                    // A replica whose dir failed stays offline until a restart, as in Kafka.
                    let offline = table.offline.contains_key(&tp);
                    if let Some(r) = table.partitions.get_mut(&tp) {
                        r.leader = change.leader;
                        r.leader_epoch = change.leader_epoch;
                        r.replica_count = change.replicas.len();
                        r.isr_size = change.isr.len();
                        if change.kind == PartitionChangeKind::BecomeLeader {
                            r.addr.do_send(BecomeLeader {
                                assignment: change.assignment(),
                                config,
                            });
                        } else {
                            r.addr.do_send(BecomeFollower {
                                assignment: change.assignment(),
                                config,
                            });
                        }
                    } else if !offline {
                        match self.start_replica(&change) {
                            Ok(r) => {
                                table.partitions.insert(tp.clone(), r);
                            }
                            Err(e) => {
                                tracing::error!(%tp, log_dir = %e.log_dir, error = %e, "cannot open the partition's log");
                                table.offline.insert(tp.clone(), e.log_dir.clone());
                                self.take_log_dir_offline(&mut table, &e.log_dir, &e.message);
                            }
                        }
                    }
                    self.update_fetcher(&table, &change, &tp);
                }
            }
        }
        self.publish(table);
    }

    /// A follower hosted here fetches from its leader; anything else does not fetch.
    fn update_fetcher(
        &mut self,
        table: &PartitionTable,
        change: &PartitionChange,
        tp: &TopicPartition,
    ) {
        let hosted = table.partitions.get(tp);
        match (change.kind, hosted, table.image.as_ref()) {
            (PartitionChangeKind::BecomeFollower, Some(r), Some(image)) if change.leader >= 0 => {
                self.fetchers.follow(
                    image,
                    change.leader,
                    super::fetcher::FollowedPartition {
                        tp: tp.clone(),
                        topic_id: change.topic_id,
                        leader_epoch: change.leader_epoch,
                        replica: r.addr.clone(),
                    },
                );
            }
            _ => self.fetchers.unfollow(std::slice::from_ref(tp)),
        }
    }

    fn publish(&mut self, mut table: PartitionTable) {
        let m = super::metrics::partition_metrics();
        m.partitions.set(table.partitions.len() as i64);
        m.leaders.set(
            table
                .partitions
                .values()
                .filter(|r| r.leader == self.broker_id)
                .count() as i64,
        );
        m.under_replicated.set(
            table
                .partitions
                .values()
                .filter(|r| r.leader == self.broker_id && r.isr_size < r.replica_count)
                .count() as i64,
        );
        // Effective minimum per topic (Kafka's `effectiveMinIsr`: capped by the replica count),
        // resolved once per topic.
        let mut min_isr: HashMap<&str, usize> = HashMap::new();
        let (mut under, mut at) = (0i64, 0i64);
        for (tp, r) in table
            .partitions
            .iter()
            .filter(|(_, r)| r.leader == self.broker_id)
        {
            let configured = *min_isr
                .entry(tp.topic.as_str())
                .or_insert_with(|| self.config_for(&tp.topic).min_insync_replicas);
            let effective = configured.min(r.replica_count.max(1));
            if r.isr_size < effective {
                under += 1;
            } else if r.isr_size == effective {
                at += 1;
            }
        }
        m.under_min_isr.set(under);
        m.at_min_isr.set(at);
        m.offline.set(table.offline.len() as i64);
        table.version += 1;
        table.log_dirs = self.factory.log_dirs();
        table.offline_log_dirs = self.factory.offline_log_dirs();
        self.table = Arc::new(table);
        self.publisher.send_replace(self.table.clone());
        if let Some(image) = &self.table.image {
            if !Arc::ptr_eq(image, &self.served_image.borrow()) {
                self.served_image.send_replace(image.clone());
            }
        }
    }

    /// Kafka's `ReplicaManager.handleLogDirFailure`: the dir is offline until a restart; every
    /// replica in it stops at once, without flushing or checkpointing into a failed disk, and
    /// answers KAFKA_STORAGE_ERROR from now on. With no log dir left the node cannot serve
    /// anything and stops, as Kafka halts ("all log dirs have failed").
    fn take_log_dir_offline(&mut self, table: &mut PartitionTable, log_dir: &str, reason: &str) {
        if self.factory.offline_log_dirs().iter().any(|d| d == log_dir) {
            return;
        }
        let online = self.factory.take_offline(log_dir);
        let stopped: Vec<TopicPartition> = table
            .partitions
            .iter()
            .filter(|(_, r)| r.log_dir == log_dir)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &stopped {
            if let Some(r) = table.partitions.remove(tp) {
                r.addr.do_send(TakeReplicaOffline);
            }
            table.offline.insert(tp.clone(), log_dir.to_string());
        }
        tracing::error!(
            log_dir,
            error = reason,
            replicas = stopped.len(),
            online_log_dirs = online,
            "log dir failed: it is offline until restart and its replicas answer KAFKA_STORAGE_ERROR"
        );
        if online == 0 {
            crate::runtime::fault::report_fatal(format!(
                "all log dirs have failed (the last, {log_dir}: {reason}); shutting down this node"
            ));
        }
    }

    fn push_configs<'a>(
        &self,
        replicas: impl Iterator<Item = (&'a TopicPartition, &'a HostedReplica)>,
    ) {
        for (tp, r) in replicas {
            r.addr.do_send(UpdatePartitionConfig {
                config: self.config_for(&tp.topic),
            });
        }
    }
}

impl Actor for ReplicaManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.own_addr = Some(MeteredAddr::new(ctx.address(), self.metrics.clone()));
        // Kafka's `isr-expiration` task: every half `replica.lag.time.max.ms`, leaders with
        // followers drop the ones that fell behind. Partitions without followers get nothing.
        let max_lag_ms =
            super::broker_num(&self.broker_config, "replica.lag.time.max.ms", 30_000).max(2);
        ctx.run_interval(
            std::time::Duration::from_millis((max_lag_ms / 2) as u64),
            move |act, _| {
                for r in act.table.partitions.values() {
                    if r.leader == act.broker_id && r.replica_count > 1 {
                        r.addr.do_send(MaybeShrinkIsr { max_lag_ms });
                    }
                }
            },
        );
    }
}

impl Supervised for ReplicaManagerActor {
    fn restarting(&mut self, _: &mut Context<Self>) {}
}

impl SupervisedActor for ReplicaManagerActor {
    /// Its table is what every request handler and coordinator reads: a half-applied change
    /// cannot be told from a finished one, so the node stops rather than serve it.
    const ON_PANIC: crate::runtime::OnPanic = crate::runtime::OnPanic::Escalate;
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(ReplicaManagerActor);

impl Handler<LogDirFailed> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: LogDirFailed, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let mut table = (*self.table).clone();
        self.take_log_dir_offline(&mut table, &msg.log_dir, &msg.reason);
        self.publish(table);
    }
}

impl Handler<ReplicaFailed> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: ReplicaFailed, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let mut table = (*self.table).clone();
        if let Some(r) = table.partitions.remove(&msg.tp) {
            tracing::error!(tp = %msg.tp, reason = %msg.reason, "replica offline until restart; it answers KAFKA_STORAGE_ERROR");
            table.offline.insert(msg.tp, r.log_dir);
            self.publish(table);
        }
    }
}

impl Handler<ApplyPartitionChanges> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: ApplyPartitionChanges, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        self.apply_in_order(msg.changes, None, ctx);
    }
}

impl Handler<crate::metadata::PartitionsChanged> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: crate::metadata::PartitionsChanged, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let changes = msg
            .partitions
            .into_iter()
            .map(PartitionChange::from)
            .collect();
        self.apply_in_order(changes, Some(msg.image), ctx);
        for t in msg.topic_configs {
            self.set_topic_overrides(&t.topic_name, Some(t.config_overrides));
            let table = self.table.clone();
            self.push_configs(
                table
                    .partitions
                    .iter()
                    .filter(|(tp, _)| tp.topic == t.topic_name),
            );
        }
    }
}

impl Handler<crate::metadata::BrokerConfigsChanged> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: crate::metadata::BrokerConfigsChanged, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        // Kafka's precedence: this broker's dynamic value, the cluster default, the static file.
        let mut config = self.static_broker_config.clone();
        config.extend(msg.cluster_default);
        config.extend(msg.this_broker);
        self.set_broker_config(config);
    }
}

impl Handler<UpdateTopicConfig> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: UpdateTopicConfig, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        self.set_topic_overrides(&msg.topic, Some(msg.config_overrides));
        let table = self.table.clone();
        self.push_configs(
            table
                .partitions
                .iter()
                .filter(|(tp, _)| tp.topic == msg.topic),
        );
    }
}

impl Handler<UpdateBrokerLogConfig> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: UpdateBrokerLogConfig, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        self.set_broker_config(msg.broker_config);
    }
}

impl Handler<MarkStrayLogs> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, msg: MarkStrayLogs, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let node = self.broker_id;
        // Stray: the caught-up image doesn't place the partition on this node, or the log
        // belongs to an earlier topic of the same name (deleted and re-created while down).
        let is_stray = |tp: &TopicPartition, log_topic_id: Option<Uuid>| {
            let Some(topic) = msg.image.topics.get_by_name(&tp.topic) else {
                return true;
            };
            let hosted = topic
                .partitions
                .get(&tp.partition)
                .is_some_and(|p| p.replicas.contains(&node));
            !hosted || log_topic_id.is_some_and(|id| id != topic.id)
        };
        match self.factory.mark_strays(&is_stray) {
            Ok(paths) => {
                for p in paths {
                    tracing::warn!(path = %p.display(), "log not assigned to this broker renamed as stray");
                }
            }
            Err(e) => tracing::error!(error = %e, "stray logs not marked"),
        }
    }
}

impl Handler<SubscribePartitionTable> for ReplicaManagerActor {
    type Result = MessageResult<SubscribePartitionTable>;
    fn handle(&mut self, _: SubscribePartitionTable, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.publisher.subscribe())
    }
}

/// Log manager → registry: write the recovery-point / log-start-offset checkpoints
/// (`log.flush.offset.checkpoint.interval.ms`). Lost: recovery after a crash redoes more work.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct CheckpointLogDirs;

impl ReplicaManagerActor {
    /// Every hosted replica's numbers, asked of all actors at once (one that does not answer
    /// is left out), with the topic id each was hosted under.
    fn describe_replicas(
        &self,
    ) -> impl std::future::Future<Output = Vec<(TopicPartition, Uuid, ReplicaInfo)>> + 'static {
        let asks: Vec<_> = self
            .table
            .partitions
            .iter()
            .map(|(tp, r)| {
                let (tp, topic_id, addr) = (tp.clone(), r.topic_id, r.addr.clone());
                async move {
                    let info = addr.send(DescribeReplica).await.ok()?;
                    Some((tp, topic_id, info))
                }
            })
            .collect();
        let all = join_all(asks);
        async move { all.await.into_iter().flatten().collect() }
    }

    /// The answers of replicas still hosted under the same topic id: one deleted (or
    /// re-created) while the round ran must not get its old numbers written back.
    fn still_hosted(
        &self,
        infos: Vec<(TopicPartition, Uuid, ReplicaInfo)>,
    ) -> Vec<(TopicPartition, ReplicaInfo)> {
        infos
            .into_iter()
            .filter(|(tp, id, _)| self.table.partitions.get(tp).map(|r| r.topic_id) == Some(*id))
            .map(|(tp, _, info)| (tp, info))
            .collect()
    }
}

impl ReplicaManagerActor {
    /// One checkpoint round: asks every hosted replica for its numbers, then hands those of
    /// replicas still hosted to `write`. Nothing once shutdown has begun (the table is empty
    /// then, and the shutdown writes the checkpoints itself).
    fn checkpoint_round(
        &mut self,
        write: fn(&mut Self, Vec<(TopicPartition, ReplicaInfo)>),
    ) -> ResponseActFuture<Self, ()> {
        if self.shutting_down {
            return Box::pin(actix::fut::ready(()));
        }
        Box::pin(
            self.describe_replicas()
                .into_actor(self)
                .map(move |infos, act, _| {
                    if !act.shutting_down {
                        let infos = act.still_hosted(infos);
                        write(act, infos);
                    }
                }),
        )
    }
}

impl Handler<CheckpointLogDirs> for ReplicaManagerActor {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: CheckpointLogDirs, _: &mut Context<Self>) -> Self::Result {
        self.checkpoint_round(|act, infos| {
            let sizes = &super::metrics::partition_metrics().log_size_bytes;
            for (tp, info) in &infos {
                sizes
                    .with_label_values(&[&tp.topic, &tp.partition.to_string()])
                    .set(info.size_bytes as i64);
            }
            if let Err(e) = act.factory.checkpoint(&infos) {
                tracing::error!(error = %e, "writing log dir checkpoints failed");
            }
        })
    }
}

/// Log manager → registry: write `replication-offset-checkpoint`
/// (`replica.high.watermark.checkpoint.interval.ms`). Lost: a replica restarted after a crash
/// starts from an older high watermark (safe: it only moves up again).
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct CheckpointHighWatermarks;

impl Handler<CheckpointHighWatermarks> for ReplicaManagerActor {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _: CheckpointHighWatermarks, _: &mut Context<Self>) -> Self::Result {
        self.checkpoint_round(|act, infos| {
            let hws: Vec<(TopicPartition, i64)> = infos
                .iter()
                .map(|(tp, info)| (tp.clone(), info.high_watermark))
                .collect();
            if let Err(e) = act.factory.checkpoint_high_watermarks(&hws) {
                tracing::error!(error = %e, "writing replication-offset-checkpoint failed");
            }
        })
    }
}

impl Handler<ShutdownReplicas> for ReplicaManagerActor {
    type Result = ResponseActFuture<Self, Result<(), String>>;
    fn handle(&mut self, _: ShutdownReplicas, _: &mut Context<Self>) -> Self::Result {
        let replicas: Vec<MeteredAddr<PartitionActor>> = self
            .table
            .partitions
            .values()
            .map(|r| r.addr.clone())
            .collect();
        // No periodic checkpoint from now on: it would see the emptied table.
        self.shutting_down = true;
        // The high watermarks are read before the replicas stop (a stopped replica hands back
        // only its log); a later advance missed here is safe, as in a periodic checkpoint.
        let described = self.describe_replicas();
        let mut table = (*self.table).clone();
        table.partitions.clear();
        self.publish(table);
        Box::pin(
            async move {
                let hws: Vec<(TopicPartition, i64)> = described
                    .await
                    .into_iter()
                    .map(|(tp, _, info)| (tp, info.high_watermark))
                    .collect();
                let mut logs = Vec::with_capacity(replicas.len());
                for addr in replicas {
                    if let Ok(Some(log)) = addr.send(StopReplica { delete: false }).await {
                        logs.push(log);
                    }
                }
                (logs, hws)
            }
            .into_actor(self)
            .map(|(logs, hws), act, _| act.factory.shutdown(logs, &hws)),
        )
    }
}

/// Log manager → registry: remove log directories left renamed for deletion by the previous
/// run. Lost: they stay until the next start.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub struct PurgeDeletedLogs;

impl Handler<PurgeDeletedLogs> for ReplicaManagerActor {
    type Result = ();
    fn handle(&mut self, _: PurgeDeletedLogs, _: &mut Context<Self>) {
        self.factory.purge_deleted();
    }
}

/// Tests / DescribeLogDirs → registry: the configured log dirs.
#[derive(actix::Message)]
#[rtype(result = "Vec<String>")]
pub struct GetLogDirs;

impl Handler<GetLogDirs> for ReplicaManagerActor {
    type Result = MessageResult<GetLogDirs>;
    fn handle(&mut self, _: GetLogDirs, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.factory.log_dirs())
    }
}
