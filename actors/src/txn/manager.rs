//! `TransactionCoordinatorManagerActor` (Kafka's `TransactionCoordinator.onElection` /
//! `onResignation` driven by `__transaction_state` leadership): watches the published partition
//! table, starts a [`TransactionCoordinatorActor`] for every `__transaction_state` partition
//! this broker leads (a new one when the leader epoch changes, so the shard reloads by replay
//! and its markers carry the new coordinator epoch), resigns the ones it no longer leads, and
//! publishes the shard table the transaction API handlers route by ([`TxnShards`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Context, Handler, Message};
use tokio::sync::watch;

use super::actor::ProducerIdManagerActor;
use super::apis::{TxnShards, TRANSACTION_STATE_TOPIC};
use super::coordinator::{GroupTxnCompletion, ResignTxnCoordinator, TransactionCoordinatorActor};
use super::core::{TxnCoordinatorConfig, DEFAULT_TRANSACTION_MAX_TIMEOUT_MS};
use super::markers::MarkerSender;
use crate::network::inter_broker::InterBrokerClient;
use crate::partition::registry::PartitionTableReader;
use crate::purgatory::PurgatoryActor;
use crate::runtime::{follow_watch, ActorMetrics, MeteredAddr};

/// The transaction coordinator's settings (Kafka's `TransactionConfig`), by Kafka's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnManagerConfig {
    /// `transaction.state.log.num.partitions`
    pub num_partitions: i32,
    /// `transaction.max.timeout.ms`
    pub transaction_max_timeout_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_timed_out_interval_ms: u64,
    /// `transactional.id.expiration.ms`
    pub transactional_id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    pub remove_expired_interval_ms: u64,
}

impl Default for TxnManagerConfig {
    fn default() -> Self {
        TxnManagerConfig {
            num_partitions: 50,
            transaction_max_timeout_ms: DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            abort_timed_out_interval_ms: 10_000,
            transactional_id_expiration_ms:
                super::coordinator::DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            remove_expired_interval_ms: super::coordinator::DEFAULT_REMOVE_EXPIRED_INTERVAL_MS,
        }
    }
}

impl TxnManagerConfig {
    /// Reads Kafka's property names; absent or unparsable values keep Kafka's defaults.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Self {
        let mut c = TxnManagerConfig::default();
        fn get<T: std::str::FromStr>(props: &BTreeMap<String, String>, key: &str, into: &mut T) {
            if let Some(v) = props.get(key).and_then(|v| v.trim().parse().ok()) {
                *into = v;
            }
        }
        get(
            props,
            "transaction.state.log.num.partitions",
            &mut c.num_partitions,
        );
        get(
            props,
            "transaction.max.timeout.ms",
            &mut c.transaction_max_timeout_ms,
        );
        get(
            props,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            &mut c.abort_timed_out_interval_ms,
        );
        get(
            props,
            "transactional.id.expiration.ms",
            &mut c.transactional_id_expiration_ms,
        );
        get(
            props,
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            &mut c.remove_expired_interval_ms,
        );
        c
    }
}

struct Shard {
    addr: MeteredAddr<TransactionCoordinatorActor>,
    leader_epoch: i32,
}

pub struct TransactionCoordinatorManagerActor {
    broker_id: i32,
    config: TxnManagerConfig,
    partitions: PartitionTableReader,
    producer_ids: MeteredAddr<ProducerIdManagerActor>,
    /// What every shard writes its markers with.
    markers: MarkerSender,
    shards: HashMap<i32, Shard>,
    last_version: Option<u64>,
    publisher: watch::Sender<Arc<BTreeMap<i32, MeteredAddr<TransactionCoordinatorActor>>>>,
    metrics: ActorMetrics,
}

impl TransactionCoordinatorManagerActor {
    pub fn new(
        broker_id: i32,
        config: TxnManagerConfig,
        partitions: PartitionTableReader,
        producer_ids: MeteredAddr<ProducerIdManagerActor>,
    ) -> Self {
        let (publisher, _) = watch::channel(Arc::new(BTreeMap::new()));
        TransactionCoordinatorManagerActor {
            broker_id,
            config,
            markers: MarkerSender::here(broker_id, partitions.clone()),
            partitions,
            producer_ids,
            shards: HashMap::new(),
            last_version: None,
            publisher,
            metrics: ActorMetrics::new("TransactionCoordinatorManagerActor"),
        }
    }

    /// Who applies a finished transaction's offsets once its marker is in a
    /// `__consumer_offsets` partition (the group shard of that partition).
    pub fn with_group_completion(mut self, completion: GroupTxnCompletion) -> Self {
        self.markers.local.group_completion = Some(completion);
        self
    }

    /// Markers wait for their replication in `purgatory` (up to `timeout_ms`,
    /// `request.timeout.ms`), and reach leaders on other brokers through `inter_broker`.
    pub fn with_marker_delivery(
        mut self,
        purgatory: MeteredAddr<PurgatoryActor>,
        inter_broker: InterBrokerClient,
        timeout_ms: u64,
    ) -> Self {
        self.markers.local.purgatory = Some(purgatory);
        self.markers.local.timeout_ms = timeout_ms;
        self.markers.inter_broker = Some(inter_broker);
        self
    }

    /// What the transaction API handlers route by (take it before starting the actor).
    pub fn shard_table(&self) -> TxnShards {
        self.publisher.subscribe()
    }

    fn sync(&mut self) {
        let table = self.partitions.borrow().clone();
        if self.last_version == Some(table.version) {
            return;
        }
        self.last_version = Some(table.version);
        let _m = self.metrics.handle();
        let mut changed = false;
        for p in 0..self.config.num_partitions {
            let hosted = table
                .get(TRANSACTION_STATE_TOPIC, p)
                .filter(|h| h.leader == self.broker_id);
            let current_epoch = self.shards.get(&p).map(|s| s.leader_epoch);
            match (hosted, current_epoch) {
                (Some(h), Some(epoch)) if h.leader_epoch == epoch => {}
                (Some(h), _) => {
                    if let Some(old) = self.shards.remove(&p) {
                        old.addr.do_send(ResignTxnCoordinator);
                    }
                    let shard = TransactionCoordinatorActor::new(
                        TxnCoordinatorConfig {
                            transaction_max_timeout_ms: self.config.transaction_max_timeout_ms,
                            // Markers carry the leader epoch of the state partition, so a
                            // partition can tell a stale coordinator's markers apart.
                            coordinator_epoch: h.leader_epoch,
                        },
                        h.addr.clone(),
                        self.producer_ids.clone(),
                        self.markers.clone(),
                    )
                    .with_partition_index(p)
                    .with_abort_interval(Duration::from_millis(
                        self.config.abort_timed_out_interval_ms.max(1),
                    ))
                    .with_expiration(
                        self.config.transactional_id_expiration_ms,
                        Duration::from_millis(self.config.remove_expired_interval_ms.max(1)),
                    );
                    tracing::info!(
                        partition = p,
                        leader_epoch = h.leader_epoch,
                        "transaction coordinator shard elected"
                    );
                    self.shards.insert(
                        p,
                        Shard {
                            addr: crate::runtime::start_supervised_here(
                                ActorMetrics::new("TransactionCoordinatorActor"),
                                move |_| shard,
                            ),
                            leader_epoch: h.leader_epoch,
                        },
                    );
                    changed = true;
                }
                (None, Some(_)) => {
                    if let Some(old) = self.shards.remove(&p) {
                        tracing::info!(partition = p, "transaction coordinator shard resigned");
                        old.addr.do_send(ResignTxnCoordinator);
                    }
                    changed = true;
                }
                (None, None) => {}
            }
        }
        if changed {
            self.publish();
        }
    }

    fn publish(&self) {
        self.publisher.send_replace(Arc::new(
            self.shards
                .iter()
                .map(|(p, s)| (*p, s.addr.clone()))
                .collect(),
        ));
    }
}

impl Actor for TransactionCoordinatorManagerActor {
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

impl actix::Supervised for TransactionCoordinatorManagerActor {
    /// Its shard map may be half-updated after a caught panic: resign every shard and let
    /// `started` elect them again from the partition table.
    fn restarting(&mut self, _: &mut Context<Self>) {
        for (_, s) in std::mem::take(&mut self.shards) {
            s.addr.do_send(ResignTxnCoordinator);
        }
        self.publish();
    }
}

impl crate::runtime::SupervisedActor for TransactionCoordinatorManagerActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(TransactionCoordinatorManagerActor);

/// Process shutdown → manager: resign every shard (waiting requests get NOT_COORDINATOR).
/// Lost: the shards stop with the arbiter anyway.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct StopTxnCoordinators;

impl Handler<StopTxnCoordinators> for TransactionCoordinatorManagerActor {
    type Result = ();
    fn handle(&mut self, _: StopTxnCoordinators, _: &mut Context<Self>) {
        for (_, s) in self.shards.drain() {
            s.addr.do_send(ResignTxnCoordinator);
        }
        self.publish();
    }
}
