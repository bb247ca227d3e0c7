//! AlterPartitionManagerActor (Kafka's `AlterPartitionManager`): every partition leader's ISR
//! change goes through it to the active controller. Changes queued while a request is in
//! flight go together in the next AlterPartition, one request at a time, over a controller
//! channel of their own, so that a broker leading thousands of partitions sends a handful of
//! requests after a restart instead of one per partition, and its heartbeats never queue
//! behind them (a heartbeat stuck that long would get the broker fenced).
//!
//! The batching and the per-partition answers are pure functions below; the actor only
//! queues, sends and delivers.

use kactor_protocol::errors;
use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::actor::MetadataImageWatch;
use super::controller_channel::{ControllerChannelActor, SendAlterPartition};
use crate::controller::core::requests::{
    AlterPartition, AlterPartitionPartition, AlterPartitionReply, AlterPartitionTopic, IsrMember,
};
use crate::controller::messages::ControllerError;
use crate::metadata::MetadataImage;
use crate::partition::core::{IsrChangeOutcome, TopicPartition};
use crate::partition::messages::AlterIsr;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

/// The proposals to send now: the newest per partition (a partition has one change pending at
/// a time, but a retry may queue behind its unanswered predecessor), in queue order. Returns
/// the indexes kept and the indexes superseded.
pub fn next_batch(queue: &[AlterIsr]) -> (Vec<usize>, Vec<usize>) {
    let mut newest: HashMap<&TopicPartition, usize> = HashMap::new();
    for (i, q) in queue.iter().enumerate() {
        newest.insert(&q.tp, i);
    }
    (0..queue.len()).partition(|i| newest.get(&queue[*i].tp) == Some(i))
}

/// One AlterPartition for `batch`, grouped by topic, with each ISR member's broker epoch as it
/// last fetched (KIP-903: the controller refuses a member that registered again since; -1
/// where unknown) and this leader's own from the image.
pub fn batch_request(
    node_id: i32,
    image: Option<&MetadataImage>,
    batch: &[&AlterIsr],
) -> AlterPartition {
    let epoch_of = |id: i32| {
        image
            .and_then(|i| i.brokers.get(&id))
            .map_or(-1, |b| b.epoch)
    };
    let mut topics: Vec<AlterPartitionTopic> = Vec::new();
    for q in batch {
        let partition = AlterPartitionPartition {
            partition_index: q.tp.partition,
            leader_epoch: q.change.leader_epoch,
            new_isr: q
                .change
                .new_isr
                .iter()
                .enumerate()
                .map(|(i, id)| IsrMember {
                    broker_id: *id,
                    broker_epoch: if *id == node_id {
                        epoch_of(node_id)
                    } else {
                        q.change.broker_epochs.get(i).copied().unwrap_or(-1)
                    },
                })
                .collect(),
            leader_recovery_state: 0,
            partition_epoch: q.change.partition_epoch,
        };
        match topics.iter_mut().find(|t| t.topic_id == q.topic_id) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(AlterPartitionTopic {
                topic_id: q.topic_id,
                partitions: vec![partition],
            }),
        }
    }
    AlterPartition {
        broker_id: node_id,
        broker_epoch: epoch_of(node_id),
        topics,
    }
}

/// Each proposal's outcome from the controller's answer: its partition's committed state, the
/// partition's error, the request's error, or NOT_CONTROLLER when no controller answered (the
/// leader proposes again later).
pub fn outcomes(
    reply: &Result<AlterPartitionReply, ControllerError>,
    batch: &[&AlterIsr],
) -> Vec<IsrChangeOutcome> {
    batch
        .iter()
        .map(|q| match reply {
            Err(_) => IsrChangeOutcome::Failed(kactor_protocol::errors::NOT_CONTROLLER),
            Ok(r) if r.error.code != errors::NONE => IsrChangeOutcome::Failed(r.error.code),
            Ok(r) => r
                .topics
                .iter()
                .filter(|t| t.topic_id == q.topic_id)
                .flat_map(|t| &t.partitions)
                .find(|p| p.partition_index == q.tp.partition)
                .map_or(
                    IsrChangeOutcome::Failed(errors::UNKNOWN_SERVER_ERROR),
                    |p| {
                        if p.error_code == errors::NONE {
                            IsrChangeOutcome::Committed {
                                leader_epoch: p.leader_epoch,
                                partition_epoch: p.partition_epoch,
                                isr: p.isr.clone(),
                            }
                        } else {
                            IsrChangeOutcome::Failed(p.error_code)
                        }
                    },
                ),
        })
        .collect()
}

pub struct AlterPartitionManagerActor {
    node_id: i32,
    channel: MeteredAddr<ControllerChannelActor>,
    image: Option<MetadataImageWatch>,
    /// Bound on one request's round trip (`controller.quorum.request.timeout.ms` and a margin):
    /// past it the batch fails and the leaders propose again.
    timeout: Duration,
    queue: Vec<(AlterIsr, oneshot::Sender<IsrChangeOutcome>)>,
    in_flight: bool,
    metrics: ActorMetrics,
}

impl AlterPartitionManagerActor {
    pub fn new(
        node_id: i32,
        channel: MeteredAddr<ControllerChannelActor>,
        image: Option<MetadataImageWatch>,
        timeout: Duration,
        metrics: ActorMetrics,
    ) -> Self {
        AlterPartitionManagerActor {
            node_id,
            channel,
            image,
            timeout,
            queue: Vec::new(),
            in_flight: false,
            metrics,
        }
    }

    fn maybe_send(&mut self, ctx: &mut Context<Self>) {
        if self.in_flight || self.queue.is_empty() {
            return;
        }
        let queued = std::mem::take(&mut self.queue);
        let proposals: Vec<AlterIsr> = queued.iter().map(|(q, _)| q.clone()).collect();
        let (keep, superseded) = next_batch(&proposals);
        let mut waiting: Vec<Option<(AlterIsr, oneshot::Sender<IsrChangeOutcome>)>> =
            queued.into_iter().map(Some).collect();
        for i in superseded {
            if let Some((_, done)) = waiting[i].take() {
                let _ = done.send(IsrChangeOutcome::Failed(errors::OPERATION_NOT_ATTEMPTED));
            }
        }
        let batch: Vec<(AlterIsr, oneshot::Sender<IsrChangeOutcome>)> =
            keep.into_iter().filter_map(|i| waiting[i].take()).collect();
        let image = self.image.as_ref().map(|i| i.borrow().clone());
        let items: Vec<&AlterIsr> = batch.iter().map(|(q, _)| q).collect();
        let request = batch_request(self.node_id, image.as_deref(), &items);
        tracing::debug!(partitions = batch.len(), "sending AlterPartition");
        self.in_flight = true;
        let send = self.channel.send(SendAlterPartition { request });
        let timeout = self.timeout;
        ctx.spawn(
            async move {
                match tokio::time::timeout(timeout, send).await {
                    Ok(Ok(reply)) => reply,
                    _ => Err(ControllerError::NotController),
                }
            }
            .into_actor(self)
            .map(move |reply, act, ctx| {
                let items: Vec<&AlterIsr> = batch.iter().map(|(q, _)| q).collect();
                let results = outcomes(&reply, &items);
                for ((_, done), outcome) in batch.into_iter().zip(results) {
                    let _ = done.send(outcome);
                }
                act.in_flight = false;
                act.maybe_send(ctx);
            }),
        );
    }
}

impl Actor for AlterPartitionManagerActor {
    type Context = Context<Self>;
}

impl Supervised for AlterPartitionManagerActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Dropped senders answer their leaders REQUEST_TIMED_OUT; they propose again.
        self.queue.clear();
        self.in_flight = false;
    }
}

impl SupervisedActor for AlterPartitionManagerActor {
    const MAILBOX_CAPACITY: usize = 4096;
}

crate::supervised_mailbox!(AlterPartitionManagerActor);

impl Handler<AlterIsr> for AlterPartitionManagerActor {
    type Result = ResponseFuture<IsrChangeOutcome>;

    fn handle(&mut self, msg: AlterIsr, ctx: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let (done, rx) = oneshot::channel();
        self.queue.push((msg, done));
        self.maybe_send(ctx);
        Box::pin(async move {
            rx.await
                .unwrap_or(IsrChangeOutcome::Failed(errors::REQUEST_TIMED_OUT))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::core::errors::ApiError;
    use crate::controller::core::requests::{
        AlterPartitionPartitionReply, AlterPartitionTopicReply,
    };
    use crate::partition::core::IsrChange;
    use kactor_protocol::Uuid;

    fn proposal(topic: u8, partition: i32, isr: &[i32]) -> AlterIsr {
        AlterIsr {
            tp: TopicPartition::new(format!("t{topic}"), partition),
            topic_id: Uuid([topic; 16]),
            change: IsrChange {
                leader_epoch: 4,
                partition_epoch: 9,
                new_isr: isr.to_vec(),
                // Followers' fetch epochs: 100 + id; the leader's own slot is not used.
                broker_epochs: isr.iter().map(|id| 100 + *id as i64).collect(),
            },
        }
    }

    #[test]
    fn the_newest_proposal_per_partition_goes() {
        let q = [
            proposal(1, 0, &[1, 2]),
            proposal(1, 1, &[1]),
            proposal(1, 0, &[1, 2, 3]),
        ];
        assert_eq!(next_batch(&q), (vec![1, 2], vec![0]));
    }

    #[test]
    fn one_request_grouped_by_topic_with_broker_epochs() {
        let a = proposal(1, 0, &[1, 2]);
        let b = proposal(2, 3, &[1]);
        let c = proposal(1, 2, &[1, 3]);
        let r = batch_request(1, None, &[&a, &b, &c]);
        assert_eq!(r.broker_id, 1);
        assert_eq!(r.broker_epoch, -1);
        assert_eq!(r.topics.len(), 2);
        assert_eq!(r.topics[0].topic_id, Uuid([1; 16]));
        let parts: Vec<i32> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .collect();
        assert_eq!(parts, vec![0, 2]);
        assert_eq!(r.topics[1].partitions[0].partition_index, 3);
        let p = &r.topics[0].partitions[1];
        assert_eq!((p.leader_epoch, p.partition_epoch), (4, 9));
        assert_eq!(
            p.new_isr,
            vec![
                IsrMember {
                    broker_id: 1,
                    broker_epoch: -1
                },
                IsrMember {
                    broker_id: 3,
                    broker_epoch: 103
                }
            ]
        );
    }

    #[test]
    fn each_proposal_gets_its_partitions_answer() {
        let a = proposal(1, 0, &[1, 2]);
        let b = proposal(1, 1, &[1]);
        let c = proposal(2, 0, &[1]);
        let reply = Ok(AlterPartitionReply {
            error: ApiError::NONE,
            topics: vec![AlterPartitionTopicReply {
                topic_id: Uuid([1; 16]),
                partitions: vec![
                    AlterPartitionPartitionReply {
                        partition_index: 1,
                        error_code: kactor_protocol::errors::INELIGIBLE_REPLICA,
                        ..Default::default()
                    },
                    AlterPartitionPartitionReply {
                        partition_index: 0,
                        leader_id: 1,
                        leader_epoch: 4,
                        isr: vec![1, 2],
                        partition_epoch: 10,
                        ..Default::default()
                    },
                ],
            }],
        });
        assert_eq!(
            outcomes(&reply, &[&a, &b, &c]),
            vec![
                IsrChangeOutcome::Committed {
                    leader_epoch: 4,
                    partition_epoch: 10,
                    isr: vec![1, 2]
                },
                IsrChangeOutcome::Failed(kactor_protocol::errors::INELIGIBLE_REPLICA),
                // Not in the answer at all.
                IsrChangeOutcome::Failed(errors::UNKNOWN_SERVER_ERROR),
            ]
        );
        let refused = Ok(AlterPartitionReply::failed(ApiError::code(
            kactor_protocol::errors::STALE_BROKER_EPOCH,
        )));
        assert_eq!(
            outcomes(&refused, &[&a]),
            vec![IsrChangeOutcome::Failed(
                kactor_protocol::errors::STALE_BROKER_EPOCH
            )]
        );
        assert_eq!(
            outcomes(&Err(ControllerError::NotController), &[&a]),
            vec![IsrChangeOutcome::Failed(
                kactor_protocol::errors::NOT_CONTROLLER
            )]
        );
    }
}
