//! `GroupCoordinatorManagerActor` (Kafka's `GroupCoordinatorService` shard lifecycle driven by
//! `onElection` / `onResignation`): watches the published partition table, starts a
//! `GroupCoordinatorActor` for every `__consumer_offsets` partition this broker leads (a new
//! one when the leader epoch changes, so the shard reloads), resigns the ones it no longer
//! leads, keeps their view of the cluster's topics and of the group configs current, and
//! publishes the shard table the group API handlers route by.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use actix::{Actor, Context, Handler, Message};
use kactor_protocol::Uuid;
use tokio::sync::watch;

use super::actor::GroupCoordinatorActor;
use super::apis::{GroupShardTable, GroupShardTableReader, OFFSETS_TOPIC};
use super::core::{GroupConfigOverrides, GroupConfigsView, GroupCoordinatorConfig, TopicsView};
use super::messages::{
    CoordinatorPartition, ResignGroupCoordinator, TopicsDeleted, UpdateGroupConfigs,
    UpdateGroupTopics,
};
use crate::controller::core::group_configs::{
    CONSUMER_ASSIGNMENT_INTERVAL_MS, CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS,
};
use crate::metadata::core::ConfigResourceType;
use crate::partition::registry::{PartitionTable, PartitionTableReader};
use crate::runtime::{follow_watch, ActorMetrics, MeteredAddr, SupervisedActor};

struct Shard {
    addr: MeteredAddr<GroupCoordinatorActor>,
    leader_epoch: i32,
}

pub struct GroupCoordinatorManagerActor {
    broker_id: i32,
    config: GroupCoordinatorConfig,
    partitions: PartitionTableReader,
    shards: HashMap<i32, Shard>,
    topics: TopicsView,
    group_configs: GroupConfigsView,
    /// The topic ids of the last metadata image seen, to tell which topics a new image deleted.
    image_topics: Option<BTreeMap<Uuid, String>>,
    last_version: Option<u64>,
    publisher: watch::Sender<Arc<GroupShardTable>>,
    /// Where the shards' writes wait for replication.
    purgatory: Option<crate::runtime::MeteredAddr<crate::purgatory::PurgatoryActor>>,
    metrics: ActorMetrics,
}

impl GroupCoordinatorManagerActor {
    pub fn new(
        broker_id: i32,
        config: GroupCoordinatorConfig,
        partitions: PartitionTableReader,
    ) -> Self {
        let (publisher, _) = watch::channel(Arc::new(GroupShardTable {
            offsets_topic_num_partitions: config.offsets_topic_num_partitions,
            shards: HashMap::new(),
            txn_completions: HashMap::new(),
        }));
        GroupCoordinatorManagerActor {
            broker_id,
            config,
            partitions,
            shards: HashMap::new(),
            topics: TopicsView::default(),
            group_configs: GroupConfigsView::default(),
            image_topics: None,
            last_version: None,
            publisher,
            purgatory: None,
            metrics: ActorMetrics::new("GroupCoordinatorManagerActor"),
        }
    }

    /// The broker's purgatory, where the shards' writes wait for their replication.
    pub fn with_purgatory(
        mut self,
        purgatory: crate::runtime::MeteredAddr<crate::purgatory::PurgatoryActor>,
    ) -> Self {
        self.purgatory = Some(purgatory);
        self
    }

    /// What the group API handlers route by (clone before starting the actor).
    pub fn shard_table(&self) -> GroupShardTableReader {
        self.publisher.subscribe()
    }

    fn sync(&mut self) {
        let table = self.partitions.borrow().clone();
        if self.last_version == Some(table.version) {
            return;
        }
        self.last_version = Some(table.version);
        let _m = self.metrics.handle();
        let topics = topics_view(&table);
        let topics_changed = topics != self.topics;
        self.topics = topics;
        let group_configs = group_configs_view(&table);
        let group_configs_changed = group_configs != self.group_configs;
        self.group_configs = group_configs;
        for p in 0..self.config.offsets_topic_num_partitions {
            let hosted = table
                .get(OFFSETS_TOPIC, p)
                .filter(|h| h.leader == self.broker_id);
            let current_epoch = self.shards.get(&p).map(|s| s.leader_epoch);
            match (hosted, current_epoch) {
                (Some(h), Some(epoch)) if h.leader_epoch == epoch => {}
                (Some(h), _) => {
                    if let Some(old) = self.shards.remove(&p) {
                        old.addr.do_send(ResignGroupCoordinator);
                    }
                    let shard = GroupCoordinatorActor::new(
                        p,
                        self.config.clone(),
                        CoordinatorPartition {
                            append: h.addr.recipient(),
                            read: h.addr.recipient(),
                            describe: h.addr.recipient(),
                            replication: self.purgatory.clone(),
                        },
                        self.topics.clone(),
                        self.group_configs.clone(),
                    )
                    .with_partition_table(self.partitions.clone(), self.broker_id);
                    let shard = crate::runtime::start_supervised_here(
                        ActorMetrics::new("GroupCoordinatorActor"),
                        move |_| shard,
                    );
                    tracing::info!(
                        partition = p,
                        leader_epoch = h.leader_epoch,
                        "group coordinator shard elected"
                    );
                    self.shards.insert(
                        p,
                        Shard {
                            addr: shard,
                            leader_epoch: h.leader_epoch,
                        },
                    );
                }
                (None, Some(_)) => {
                    if let Some(old) = self.shards.remove(&p) {
                        tracing::info!(partition = p, "group coordinator shard resigned");
                        old.addr.do_send(ResignGroupCoordinator);
                    }
                }
                (None, None) => {}
            }
        }
        if topics_changed {
            for s in self.shards.values() {
                s.addr.do_send(UpdateGroupTopics {
                    topics: self.topics.clone(),
                    version: table.version,
                });
            }
        }
        if group_configs_changed {
            for s in self.shards.values() {
                s.addr.do_send(UpdateGroupConfigs {
                    configs: self.group_configs.clone(),
                });
            }
        }
        let deleted = self.deleted_topics(&table);
        if !deleted.is_empty() {
            // Shards started in this sync get it too: they stash it until they have loaded.
            for s in self.shards.values() {
                s.addr.do_send(TopicsDeleted {
                    topics: deleted.clone(),
                });
            }
        }
        self.publisher.send_replace(Arc::new(GroupShardTable {
            offsets_topic_num_partitions: self.config.offsets_topic_num_partitions,
            shards: self
                .shards
                .iter()
                .map(|(p, s)| (*p, s.addr.recipient()))
                .collect(),
            txn_completions: self
                .shards
                .iter()
                .map(|(p, s)| (*p, s.addr.recipient()))
                .collect(),
        }));
    }

    /// Names of the topics whose ids were in the previous metadata image and are not in this
    /// one. Only images count: the view from hosted partitions alone (no image yet) lacks
    /// every topic this broker does not host, which is not a deletion. A topic deleted and
    /// created again between two images is caught by its id too.
    fn deleted_topics(&mut self, table: &PartitionTable) -> Vec<String> {
        let Some(image) = &table.image else {
            return Vec::new();
        };
        let now: BTreeMap<Uuid, String> = image
            .topics
            .by_id
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
        let before = self.image_topics.replace(now);
        let now = self.image_topics.as_ref().expect("just set");
        let mut deleted: Vec<String> = before
            .into_iter()
            .flatten()
            .filter(|(id, _)| !now.contains_key(id))
            .map(|(_, name)| name)
            .collect();
        deleted.sort();
        deleted.dedup();
        deleted
    }
}

/// The group configs the coordinator applies, from the image's GROUP config resources (the
/// controller validated them; a value that does not parse is left to the broker default).
fn group_configs_view(table: &PartitionTable) -> GroupConfigsView {
    let Some(image) = &table.image else {
        return GroupConfigsView::default();
    };
    image
        .configs
        .iter()
        .filter(|(r, _)| r.resource_type == ConfigResourceType::Group)
        .map(|(r, values)| {
            let int = |k: &str| values.get(k).and_then(|v| v.trim().parse().ok());
            let overrides = GroupConfigOverrides {
                consumer_session_timeout_ms: int(CONSUMER_SESSION_TIMEOUT_MS),
                consumer_heartbeat_interval_ms: int(CONSUMER_HEARTBEAT_INTERVAL_MS),
                consumer_assignment_interval_ms: int(CONSUMER_ASSIGNMENT_INTERVAL_MS),
            };
            (r.name.clone(), overrides)
        })
        .filter(|(_, o)| *o != GroupConfigOverrides::default())
        .collect()
}

/// Every topic the broker knows: from the metadata image when there is one, else from the
/// hosted partitions.
pub(super) fn topics_view(table: &PartitionTable) -> TopicsView {
    let mut view = TopicsView::new();
    if let Some(image) = &table.image {
        view.version = image.provenance.last_offset;
        for t in image.topics.by_id.values() {
            view.upsert(&t.name, t.id, t.partitions.len() as i32);
        }
        return view;
    }
    let mut counts: HashMap<&str, i32> = HashMap::new();
    for tp in table.partitions.keys() {
        let c = counts.entry(tp.topic.as_str()).or_default();
        *c = (*c).max(tp.partition + 1);
    }
    for (name, n) in counts {
        if let Some(id) = table.topic_ids.get(name) {
            view.upsert(name, *id, n);
        }
    }
    view
}

impl Actor for GroupCoordinatorManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Told of every new partition table (leadership, topics, configs) as it is published,
        // rather than looking every few milliseconds.
        let changes = self.partitions.clone();
        self.sync();
        follow_watch(
            ctx,
            changes,
            self.metrics.clone(),
            "a partition table change",
            |act, _| act.sync(),
        );
    }
}

impl actix::Supervised for GroupCoordinatorManagerActor {
    /// Its shard map may be half-updated after a caught panic: resign every shard and let
    /// `started` elect them again from the partition table.
    fn restarting(&mut self, _: &mut Context<Self>) {
        for (_, s) in self.shards.drain() {
            s.addr.do_send(ResignGroupCoordinator);
        }
        self.last_version = None;
    }
}

impl SupervisedActor for GroupCoordinatorManagerActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(GroupCoordinatorManagerActor);

/// Process shutdown → manager: resign every shard (parked requests get NOT_COORDINATOR).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct StopGroupCoordinators;

impl Handler<StopGroupCoordinators> for GroupCoordinatorManagerActor {
    type Result = ();
    fn handle(&mut self, _: StopGroupCoordinators, _: &mut Context<Self>) {
        for (_, s) in self.shards.drain() {
            s.addr.do_send(ResignGroupCoordinator);
        }
        self.publisher.send_replace(Arc::new(GroupShardTable {
            offsets_topic_num_partitions: self.config.offsets_topic_num_partitions,
            shards: HashMap::new(),
            txn_completions: HashMap::new(),
        }));
    }
}
