//! Writing a transaction's commit/abort markers, on both sides of Kafka's WriteTxnMarkers.
//!
//! The partition leader's side ([`LocalMarkers::write`], Kafka's
//! `handleWriteTxnMarkersRequest`): the marker is appended to each partition led here and
//! answered once the high watermark passes it, as Kafka appends markers with acks=all; a
//! marker acknowledged before it is replicated could vanish in a failover and leave the
//! transaction open on that partition for good. A committed `__consumer_offsets` marker makes
//! the group shard apply the transaction's offsets.
//!
//! The coordinator's side ([`MarkerSender::send`], Kafka's `TransactionMarkerChannelManager`):
//! each partition of a finished transaction goes to its current leader, written in place when
//! that is this broker and sent over the inter-broker channel otherwise. What fails is
//! retried by the coordinator shard; a partition that no longer exists, or whose producer
//! moved past the epoch, needs no marker.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::join_all;
use kactor_protocol::errors;
use kactor_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};

use super::core::{MarkerJob, TxnPartition};
use crate::group::apis::OFFSETS_TOPIC;
use crate::network::inter_broker::InterBrokerClient;
use crate::partition::core::TopicPartition;
use crate::partition::messages::AppendTxnMarker;
use crate::partition::registry::PartitionTableReader;
use crate::producer::partition::TxnMarker;
use crate::purgatory::core::ProduceWatch;
use crate::purgatory::{await_replication, PurgatoryActor};
use crate::runtime::MeteredAddr;

/// Called after a commit/abort marker was appended and replicated to `__consumer_offsets` partition
/// `partition` for `producer_id` (`committed`: commit marker): the group shard of that
/// partition must apply or drop the producer's pending offsets (Kafka's
/// `GroupCoordinator.onTransactionCompleted`). Wired in the topology.
pub type GroupTxnCompletion = Arc<dyn Fn(i32, i64, bool) + Send + Sync>;

/// Appends markers to the partitions this broker leads.
#[derive(Clone)]
pub struct LocalMarkers {
    pub partitions: PartitionTableReader,
    /// Where the appends wait for their replication; without one (tests of a lone replica)
    /// the append's own high watermark is taken as is.
    pub purgatory: Option<MeteredAddr<PurgatoryActor>>,
    /// How long a marker may wait for its replication (`request.timeout.ms`, as Kafka's
    /// handler waits).
    pub timeout_ms: u64,
    pub group_completion: Option<GroupTxnCompletion>,
}

impl LocalMarkers {
    /// Writes `marker` to each of `partitions` and answers a code per partition: NONE once
    /// replicated, else the partition's error (UNKNOWN_TOPIC_OR_PARTITION when not hosted
    /// here, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...).
    pub async fn write(&self, marker: TxnMarker, partitions: &[TxnPartition]) -> Vec<i16> {
        let table = self.partitions.borrow().clone();
        let appends = partitions.iter().map(|(t, p)| {
            let hosted = table.get(t, *p).map(|h| h.addr.clone());
            async move {
                match hosted {
                    None => Err(errors::UNKNOWN_TOPIC_OR_PARTITION),
                    Some(addr) => match addr.send(AppendTxnMarker { marker }).await {
                        Ok(Ok(out)) => Ok(out),
                        Ok(Err(e)) => Err(e.code()),
                        Err(_) => Err(errors::KAFKA_STORAGE_ERROR),
                    },
                }
            }
        });
        let appended = join_all(appends).await;
        let mut watches = Vec::new();
        for ((t, p), r) in partitions.iter().zip(&appended) {
            if let Ok(out) = r {
                if out.high_watermark <= out.last_offset {
                    watches.push(ProduceWatch {
                        tp: TopicPartition::new(t, *p),
                        required_offset: out.last_offset + 1,
                        observed_high_watermark: out.high_watermark,
                        leader_epoch: out.leader_epoch,
                    });
                }
            }
        }
        let waited = match &self.purgatory {
            Some(purgatory) => await_replication(purgatory, watches, self.timeout_ms).await,
            None => Default::default(),
        };
        let codes: Vec<i16> = partitions
            .iter()
            .zip(appended)
            .map(|((t, p), r)| match r {
                Err(code) => code,
                Ok(out) if out.high_watermark > out.last_offset => errors::NONE,
                Ok(_) if self.purgatory.is_none() => errors::NONE,
                Ok(_) => waited
                    .get(&TopicPartition::new(t, *p))
                    .copied()
                    .unwrap_or(errors::REQUEST_TIMED_OUT),
            })
            .collect();
        if let Some(complete) = &self.group_completion {
            for ((t, p), code) in partitions.iter().zip(&codes) {
                if t == OFFSETS_TOPIC && *code == errors::NONE {
                    complete(*p, marker.producer_id, marker.commit);
                }
            }
        }
        codes
    }
}

/// What became of one partition's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerOutcome {
    Written,
    /// Nothing to write: the partition is gone or the producer moved on.
    Skipped,
    /// Try again later (no leader, leader unreachable, not replicated in time, ...).
    Failed,
}

impl MarkerOutcome {
    pub fn label(self) -> &'static str {
        match self {
            MarkerOutcome::Written => "written",
            MarkerOutcome::Skipped => "skipped",
            MarkerOutcome::Failed => "failed",
        }
    }

    /// A leader's answer for one partition (Kafka's
    /// `TransactionMarkerRequestCompletionHandler`): written; nothing to write for a
    /// producer already past this epoch or a format without markers; anything else (not
    /// leader, not enough replicas, timed out, storage error, fenced coordinator epoch) is
    /// retried.
    pub fn of_code(code: i16) -> MarkerOutcome {
        match code {
            errors::NONE => MarkerOutcome::Written,
            errors::INVALID_PRODUCER_EPOCH
            | errors::UNSUPPORTED_FOR_MESSAGE_FORMAT
            | errors::UNSUPPORTED_VERSION => MarkerOutcome::Skipped,
            _ => MarkerOutcome::Failed,
        }
    }
}

/// Where a partition's marker goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Here,
    Broker(i32),
    /// The partition was deleted: no marker.
    Gone,
    /// No leader right now: retry.
    NoLeader,
}

/// Routes one partition: to its leader in the image (this broker or another), or, with no
/// image (tests), to the replica hosted here.
pub fn route(node_id: i32, hosted_here: bool, exists: bool, leader_in_image: Option<i32>) -> Route {
    match leader_in_image {
        Some(l) if l == node_id => Route::Here,
        Some(l) if l >= 0 => Route::Broker(l),
        Some(_) => Route::NoLeader,
        None if hosted_here => Route::Here,
        None if exists => Route::NoLeader,
        None => Route::Gone,
    }
}

/// The coordinator's marker writer.
#[derive(Clone)]
pub struct MarkerSender {
    pub node_id: i32,
    pub local: LocalMarkers,
    /// Leaders on other brokers are reached through it; without one (a lone broker) such a
    /// partition is retried until it is led here.
    pub inter_broker: Option<InterBrokerClient>,
}

impl MarkerSender {
    /// A writer for a lone broker `node_id`: partitions led here only, appends taken as
    /// replicated when their own high watermark says so.
    pub fn here(node_id: i32, partitions: PartitionTableReader) -> Self {
        MarkerSender {
            node_id,
            local: LocalMarkers {
                partitions,
                purgatory: None,
                timeout_ms: 30_000,
                group_completion: None,
            },
            inter_broker: None,
        }
    }

    /// Sends `job`'s marker to `partitions` (those still owed) and says what became of each.
    pub async fn send(
        &self,
        job: &MarkerJob,
        partitions: Vec<TxnPartition>,
    ) -> Vec<(TxnPartition, MarkerOutcome)> {
        let marker = TxnMarker {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch: job.coordinator_epoch,
        };
        let table = self.local.partitions.borrow().clone();
        let mut here = Vec::new();
        let mut remote: BTreeMap<i32, Vec<TxnPartition>> = BTreeMap::new();
        let mut out = Vec::new();
        for tp in partitions {
            let r = route(
                self.node_id,
                table.get(&tp.0, tp.1).is_some(),
                table.partition_exists(&tp.0, tp.1),
                table.leader_of(&tp.0, tp.1),
            );
            match r {
                Route::Here => here.push(tp),
                Route::Broker(b) if self.inter_broker.is_some() => {
                    remote.entry(b).or_default().push(tp)
                }
                Route::Broker(_) | Route::NoLeader => out.push((tp, MarkerOutcome::Failed)),
                Route::Gone => out.push((tp, MarkerOutcome::Skipped)),
            }
        }
        let local = async {
            let codes = self.local.write(marker, &here).await;
            here.into_iter()
                .zip(codes)
                .map(|(tp, c)| (tp, MarkerOutcome::of_code(c)))
                .collect::<Vec<_>>()
        };
        let sends = remote.into_iter().map(|(broker, tps)| {
            let client = self
                .inter_broker
                .clone()
                .expect("routed only with a client");
            let wire = wire_marker(job, &tps);
            async move {
                match client.write_txn_markers(broker, vec![wire]).await {
                    Ok(results) => {
                        let codes: BTreeMap<TxnPartition, i16> = results
                            .into_iter()
                            .flat_map(|m| m.topics)
                            .flat_map(|t| {
                                let name = t.name;
                                t.partitions
                                    .into_iter()
                                    .map(move |p| ((name.clone(), p.partition_index), p.error_code))
                            })
                            .collect();
                        tps.into_iter()
                            .map(|tp| {
                                let o = codes
                                    .get(&tp)
                                    .map_or(MarkerOutcome::Failed, |c| MarkerOutcome::of_code(*c));
                                (tp, o)
                            })
                            .collect::<Vec<_>>()
                    }
                    Err(e) => {
                        tracing::debug!(broker, error = %e, "transaction markers not delivered");
                        tps.into_iter()
                            .map(|tp| (tp, MarkerOutcome::Failed))
                            .collect()
                    }
                }
            }
        });
        let (local, remote) = futures_util::future::join(local, join_all(sends)).await;
        out.extend(local);
        out.extend(remote.into_iter().flatten());
        out
    }
}

/// The WriteTxnMarkers entry for `job`'s marker on `partitions`.
pub fn wire_marker(job: &MarkerJob, partitions: &[TxnPartition]) -> WritableTxnMarker {
    WritableTxnMarker {
        producer_id: job.producer_id,
        producer_epoch: job.producer_epoch,
        transaction_result: job.commit,
        topics: super::core::by_topic(partitions)
            .into_iter()
            .map(|(name, partition_indexes)| WritableTxnMarkerTopic {
                name: name.to_string(),
                partition_indexes,
                ..Default::default()
            })
            .collect(),
        coordinator_epoch: job.coordinator_epoch,
        transaction_version: job.transaction_version as i8,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_go_to_their_leader() {
        assert_eq!(route(1, true, true, Some(1)), Route::Here);
        // A follower here: the marker goes to the leader.
        assert_eq!(route(1, true, true, Some(2)), Route::Broker(2));
        assert_eq!(route(1, false, true, Some(3)), Route::Broker(3));
        assert_eq!(route(1, false, true, Some(-1)), Route::NoLeader);
        assert_eq!(route(1, true, true, None), Route::Here);
        assert_eq!(route(1, false, false, None), Route::Gone);
    }

    #[test]
    fn leader_answers_map_as_kafkas_completion_handler() {
        assert_eq!(MarkerOutcome::of_code(0), MarkerOutcome::Written);
        assert_eq!(MarkerOutcome::of_code(47), MarkerOutcome::Skipped);
        for retried in [3, 6, 7, 19, 20, 56, 52] {
            assert_eq!(MarkerOutcome::of_code(retried), MarkerOutcome::Failed);
        }
    }

    #[test]
    fn a_wire_marker_groups_partitions_by_topic() {
        let job = MarkerJob {
            transactional_id: "t".into(),
            producer_id: 9,
            producer_epoch: 2,
            commit: true,
            coordinator_epoch: 4,
            partitions: vec![],
            transaction_version: 2,
        };
        let m = wire_marker(&job, &[("b".into(), 1), ("a".into(), 0), ("b".into(), 0)]);
        assert_eq!(m.topics.len(), 2);
        assert_eq!(m.topics[1].name, "b");
        assert_eq!(m.topics[1].partition_indexes, vec![1, 0]);
        assert_eq!(
            (m.producer_id, m.coordinator_epoch, m.transaction_version),
            (9, 4, 2)
        );
    }
}
