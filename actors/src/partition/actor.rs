//! `PartitionActor`: one hosted replica (Kafka's `Partition` with its `UnifiedLog`), the shell
//! around [`Partition`]. Started by the `ReplicaManagerActor` on the partition arbiter chosen by
//! hash(topic-partition); tells the purgatory when its high watermark moves.

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, MessageResult, Supervised, WrapFuture,
};

use super::core::{
    AppendOutcome, IsrChange, IsrChangeOutcome, Partition, PartitionError, PartitionLog, Role,
    TopicPartition,
};
use super::messages::*;
use crate::purgatory::{HighWatermarkAdvanced, LeadershipLost, LogEndAdvanced};
use crate::runtime::{ActorMetrics, MeteredAddr, MeteredRecipient, SupervisedActor};
use bytes::Bytes;
use kactor_protocol::errors;
use kactor_protocol::records::AppendOrigin;
use prometheus::{IntCounter, IntGauge};

/// Wall-clock milliseconds, the only clock the partition paths need.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Where a partition reports high watermark moves and leadership loss (the purgatory).
#[derive(Clone)]
pub struct PurgatoryLink {
    // Metered, so the purgatory's mailbox depth counts these sends as its handlers count
    // their dequeues (unmetered, the gauge went negative).
    pub high_watermark: MeteredRecipient<HighWatermarkAdvanced>,
    pub log_end: MeteredRecipient<LogEndAdvanced>,
    pub leadership_lost: MeteredRecipient<LeadershipLost>,
}

pub struct PartitionActor {
    /// `None` after `StopReplica` handed the log away or the replica went offline.
    core: Option<Partition<Box<dyn PartitionLog>>>,
    /// Why the replica went offline (its log dir failed), if it did: requests already on
    /// their way when the registry dropped it from the table get KAFKA_STORAGE_ERROR, as the
    /// ones after do, not NOT_LEADER_OR_FOLLOWER (a client would retry a dead dir).
    offline: Option<String>,
    /// This replica reported its log dir failed (a later I/O error, e.g. a flush that was in
    /// flight, reports nothing more).
    dir_failure_reported: bool,
    tp: TopicPartition,
    purgatory: Option<PurgatoryLink>,
    flush_in_flight: bool,
    metrics: ActorMetrics,
    /// This topic's series of the per-topic counters, looked up on first use (so a topic's
    /// series still appear only once it has traffic) instead of by label on every append.
    topic_counters: Option<TopicCounters>,
    /// Where failures of this replica are reported (the registry), and its log dir.
    registry: Option<(MeteredAddr<super::registry::ReplicaManagerActor>, String)>,
    /// Where ISR changes go (the controller channel), with this partition's topic id.
    isr_channel: Option<(kactor_protocol::Uuid, MeteredRecipient<AlterIsr>)>,
}

/// One topic's `kactor_partition_{bytes,messages}_in_total` / `bytes_out_total` series, and
/// this partition's transaction gauges.
struct TopicCounters {
    bytes_in: IntCounter,
    messages_in: IntCounter,
    bytes_out: IntCounter,
    last_stable_offset_lag: IntGauge,
    producers: IntGauge,
}

impl TopicCounters {
    fn of(tp: &TopicPartition) -> Self {
        let m = super::metrics::partition_metrics();
        let topic = tp.topic.as_str();
        let partition = [topic, &tp.partition.to_string()];
        TopicCounters {
            bytes_in: m.bytes_in_total.with_label_values(&[topic]),
            messages_in: m.messages_in_total.with_label_values(&[topic]),
            bytes_out: m.bytes_out_total.with_label_values(&[topic]),
            last_stable_offset_lag: m.last_stable_offset_lag.with_label_values(&partition),
            producers: m.producers.with_label_values(&partition),
        }
    }
}

impl PartitionActor {
    pub fn new(core: Partition<Box<dyn PartitionLog>>, purgatory: Option<PurgatoryLink>) -> Self {
        PartitionActor {
            tp: core.tp.clone(),
            core: Some(core),
            offline: None,
            dir_failure_reported: false,
            purgatory,
            flush_in_flight: false,
            metrics: ActorMetrics::new("PartitionActor"),
            topic_counters: None,
            registry: None,
            isr_channel: None,
        }
    }

    /// Reports this replica's failures to `registry` (with the replica's log dir).
    pub fn reporting_to(
        mut self,
        registry: Option<(MeteredAddr<super::registry::ReplicaManagerActor>, String)>,
    ) -> Self {
        self.registry = registry;
        self
    }

    /// An I/O error on this replica's log: the log no longer matches what the core believes,
    /// so the replica stops serving now and its log dir goes offline (Kafka's
    /// `LogDirFailureChannel`), instead of the error being logged and the next write tried.
    fn log_dir_failed(&mut self, what: &str, error: &str) {
        if self.dir_failure_reported {
            return; // Its dir is offline already; once is enough.
        }
        let Some((to, log_dir)) = &self.registry else {
            tracing::error!(tp = %self.tp, error, "{what} failed");
            return;
        };
        tracing::error!(tp = %self.tp, log_dir = %log_dir, error, "{what} failed; taking the log dir offline");
        self.dir_failure_reported = true;
        to.do_send(LogDirFailed {
            log_dir: log_dir.clone(),
            reason: format!("{what} of {}: {error}", self.tp),
        });
        self.go_offline(error);
    }

    fn go_offline(&mut self, reason: &str) {
        self.offline.get_or_insert_with(|| reason.to_string());
        if let Some(mut core) = self.core.take() {
            core.stop();
            self.leadership_lost(core.leader_epoch(), false);
        }
    }

    fn topic_counters(&mut self) -> &TopicCounters {
        let tp = &self.tp;
        self.topic_counters
            .get_or_insert_with(|| TopicCounters::of(tp))
    }

    /// Refreshes the partition's LSO lag and producer gauges after a write that may have
    /// opened or closed a transaction or added a producer (two atomic stores).
    fn update_txn_gauges(&mut self) {
        let Some(c) = self.core.as_ref() else {
            return;
        };
        let lag = c.high_watermark() - c.last_stable_offset();
        let producers = c.producer_state().producer_count() as i64;
        let g = self.topic_counters();
        g.last_stable_offset_lag.set(lag);
        g.producers.set(producers);
    }

    pub(super) fn core(
        &mut self,
    ) -> Result<&mut Partition<Box<dyn PartitionLog>>, super::core::PartitionError> {
        match (&mut self.core, &self.offline) {
            (Some(core), _) => Ok(core),
            (None, Some(reason)) => {
                Err(super::core::PartitionError::ReplicaOffline(reason.clone()))
            }
            (None, None) => Err(super::core::PartitionError::NotLeaderOrFollower),
        }
    }

    fn hw_advanced(&self, high_watermark: i64, bytes: usize) {
        let under_min_isr = self.core.as_ref().is_some_and(|c| c.is_under_min_isr());
        if let Some(p) = &self.purgatory {
            p.high_watermark.do_send(HighWatermarkAdvanced {
                tp: self.tp.clone(),
                high_watermark,
                bytes,
                under_min_isr,
            });
        }
    }

    /// Sends an ISR change the core proposed to the controller and hands the answer back to
    /// the core (which ignores it if leadership moved on meanwhile).
    fn send_isr_change(&mut self, change: Option<IsrChange>, ctx: &mut Context<Self>) {
        let Some(change) = change else {
            return;
        };
        let Some((topic_id, channel)) = self.isr_channel.clone() else {
            // No controller to ask (a broker without one wired): forget the proposal so that
            // the state does not stay pending forever.
            if let Some(c) = self.core.as_mut() {
                c.complete_isr_change(
                    &change,
                    IsrChangeOutcome::Failed(errors::UNKNOWN_SERVER_ERROR),
                );
            }
            return;
        };
        tracing::info!(tp = %self.tp, isr = ?change.new_isr, leader_epoch = change.leader_epoch, partition_epoch = change.partition_epoch, "proposing an ISR change");
        let msg = AlterIsr {
            tp: self.tp.clone(),
            topic_id,
            change: change.clone(),
        };
        ctx.spawn(channel.send(msg).into_actor(self).map(move |res, act, _| {
            let outcome = res.unwrap_or(IsrChangeOutcome::Failed(errors::REQUEST_TIMED_OUT));
            if let IsrChangeOutcome::Failed(code) = &outcome {
                tracing::info!(tp = %act.tp, code, "ISR change not accepted; proposing again later");
            }
            if let IsrChangeOutcome::Committed { isr, .. } = &outcome {
                let before = act.core.as_ref().map_or(0, |c| c.isr().len());
                let m = super::metrics::partition_metrics();
                if isr.len() < before {
                    m.isr_shrinks_total.inc();
                } else if isr.len() > before {
                    m.isr_expands_total.inc();
                }
            }
            let moved = act
                .core
                .as_mut()
                .is_some_and(|c| c.complete_isr_change(&change, outcome));
            if moved {
                act.report_hw();
            }
        }));
    }

    /// Tells the purgatory the current high watermark (it moved).
    fn report_hw(&mut self) {
        if let Some(hw) = self.core.as_ref().map(|c| c.high_watermark()) {
            self.hw_advanced(hw, 1);
            self.update_txn_gauges();
        }
    }

    /// Tells the purgatory that the leadership in `leader_epoch` ended (its waits end).
    fn leadership_lost(&self, leader_epoch: i32, deleted: bool) {
        if let Some(p) = &self.purgatory {
            p.leadership_lost.do_send(LeadershipLost {
                tp: self.tp.clone(),
                leader_epoch,
                deleted,
            });
        }
    }
}

impl PartitionActor {
    /// Starts a due flush (or a rolled segment's) on the blocking pool; one at a time.
    fn schedule_flush(&mut self, ctx: &mut Context<Self>, force: bool) {
        if self.flush_in_flight {
            return;
        }
        let now = now_ms();
        let tp = self.tp.clone();
        let Some(core) = self.core.as_mut() else {
            return;
        };
        let work = match core.take_roll_flush() {
            Some(rolled_at) => core.log_mut().prepare_flush(rolled_at).map(Ok),
            None => None,
        };
        let work = match work {
            Some(w) => w,
            None => match core.prepare_flush(now, force) {
                Ok(Some(w)) => Ok(w),
                Ok(None) => return,
                Err(e) => Err(e),
            },
        };
        let work = match work {
            Ok(w) => w,
            Err(e) => {
                self.log_dir_failed("flush", &e.to_string());
                return;
            }
        };
        // The roll's producer snapshot goes first, as Kafka's scheduled flush does it: the
        // recovery point must not pass a roll whose snapshot may still be torn.
        let snapshot = core.take_roll_snapshot();
        self.flush_in_flight = true;
        let fut = async move {
            tokio::task::spawn_blocking(move || {
                let synced = snapshot
                    .as_deref()
                    .map_or(Ok(()), crate::producer::snapshot::sync_snapshot);
                let r = match synced {
                    Ok(()) => work.run(),
                    Err(e) => Err(format!("producer snapshot fsync: {e}")),
                };
                (work, r)
            })
            .await
        };
        ctx.spawn(fut.into_actor(self).map(move |joined, act, ctx| {
            act.flush_in_flight = false;
            match joined {
                Ok((work, Ok(()))) => {
                    if let Some(core) = act.core.as_mut() {
                        core.complete_flush(work, now_ms());
                    }
                    // More may have become due meanwhile (e.g. another roll).
                    act.schedule_flush(ctx, false);
                }
                // An fsync failure means the disk lost acknowledged data's durability: the log
                // dir goes offline, as in Kafka. The recovery point stays put, so recovery
                // after a restart re-checks everything above it.
                Ok((_, Err(e))) => act.log_dir_failed("fsync", &e),
                Err(e) => tracing::error!(%tp, error = %e, "flush task panicked"),
            }
        }));
    }
}

impl Actor for PartitionActor {
    type Context = Context<Self>;
}

impl Supervised for PartitionActor {
    /// After a caught panic the core may be half-way through an append: the log is reopened
    /// from disk (recovery cuts a torn tail) and what the partition derives from it (producer
    /// state, high watermark bound) rebuilt; role, epochs and replicas are kept.
    fn restarting(&mut self, _: &mut Context<Self>) {
        let Some(core) = self.core.as_mut() else {
            return;
        };
        match core.reload_from_log(now_ms()) {
            Ok(()) => {
                tracing::info!(tp = %self.tp, log_end_offset = core.log_end_offset(), "partition reloaded from its log")
            }
            Err(e) => self.log_dir_failed("reload", &e.to_string()),
        }
    }
}

impl SupervisedActor for PartitionActor {
    /// Restarts beyond the intensity take this partition offline (KAFKA_STORAGE_ERROR), as
    /// Kafka takes offline a partition whose log it cannot trust, instead of the process.
    fn escalate(&mut self, reason: String, _: &mut Context<Self>) {
        tracing::error!(tp = %self.tp, "{reason}: taking the partition offline");
        self.go_offline(&reason);
        if let Some((registry, _)) = &self.registry {
            registry.do_send(ReplicaFailed {
                tp: self.tp.clone(),
                reason,
            });
        }
    }
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(PartitionActor);

impl PartitionActor {
    fn append(
        &mut self,
        records: Bytes,
        required_acks: i16,
        origin: AppendOrigin,
        ctx: &mut Context<Self>,
    ) -> Result<AppendOutcome, PartitionError> {
        let now = now_ms();
        let result = self
            .core()
            .and_then(|c| c.append_from(records, required_acks, now, origin));
        if let Err(PartitionError::Storage(e)) = &result {
            let e = e.clone();
            self.log_dir_failed("append", &e);
        }
        if result.is_ok() {
            // flush.messages is checked on the append path, as Kafka does; rolled segments are
            // flushed right away. Both run on the blocking pool.
            self.schedule_flush(ctx, false);
        }
        if let Ok(out) = &result {
            let c = self.topic_counters();
            c.bytes_in.inc_by(out.bytes);
            c.messages_in.inc_by(out.records_count);
            if out.high_watermark_advanced {
                self.hw_advanced(out.high_watermark, out.bytes as usize);
            }
            self.log_end_advanced(out.last_offset + 1, out.bytes as usize);
            self.update_txn_gauges();
        }
        result
    }

    /// Wakes followers' parked fetches after a leader append (only when there are followers:
    /// a single-replica partition sends nothing extra).
    fn log_end_advanced(&self, log_end_offset: i64, bytes: usize) {
        let has_followers = self
            .core
            .as_ref()
            .is_some_and(|c| c.role() == Role::Leader && c.replicas().len() > 1);
        if let (true, Some(p)) = (has_followers, &self.purgatory) {
            p.log_end.do_send(LogEndAdvanced {
                tp: self.tp.clone(),
                log_end_offset,
                bytes,
            });
        }
    }
}

impl Handler<AppendRecords> for PartitionActor {
    type Result = MessageResult<AppendRecords>;
    fn handle(&mut self, msg: AppendRecords, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let result = self.append(msg.records, msg.required_acks, AppendOrigin::Client, ctx);
        MessageResult(result.map_err(|error| {
            let log_start_offset = match &self.core {
                Some(core) if error.produce_reports_log_start_offset() => core.log_start_offset(),
                _ => -1,
            };
            AppendFailure {
                error,
                log_start_offset,
            }
        }))
    }
}

impl Handler<AppendCoordinatorRecords> for PartitionActor {
    type Result = MessageResult<AppendCoordinatorRecords>;
    fn handle(&mut self, msg: AppendCoordinatorRecords, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.append(
            msg.records,
            msg.required_acks,
            AppendOrigin::Coordinator,
            ctx,
        ))
    }
}

impl Handler<AppendTxnMarker> for PartitionActor {
    type Result = MessageResult<AppendTxnMarker>;
    fn handle(&mut self, msg: AppendTxnMarker, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let now = now_ms();
        let result = self
            .core()
            .and_then(|c| c.append_txn_marker(&msg.marker, now));
        if let Ok(out) = &result {
            self.schedule_flush(ctx, false);
            if out.high_watermark_advanced {
                self.hw_advanced(out.high_watermark, out.bytes as usize);
            }
            self.log_end_advanced(out.last_offset + 1, out.bytes as usize);
            self.update_txn_gauges();
        }
        MessageResult(result)
    }
}

impl Handler<DescribeProducerState> for PartitionActor {
    type Result = MessageResult<DescribeProducerState>;
    fn handle(&mut self, _: DescribeProducerState, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.core().and_then(|c| {
            if c.role() != super::core::Role::Leader {
                return Err(super::core::PartitionError::NotLeaderOrFollower);
            }
            Ok(c.producer_state().entries())
        }))
    }
}

impl Handler<DescribeProducer> for PartitionActor {
    type Result = MessageResult<DescribeProducer>;
    fn handle(&mut self, msg: DescribeProducer, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.core().and_then(|c| {
            if c.role() != super::core::Role::Leader {
                return Err(super::core::PartitionError::NotLeaderOrFollower);
            }
            Ok(c.producer_state().producer(msg.producer_id).cloned())
        }))
    }
}

impl Handler<StartTxnVerification> for PartitionActor {
    type Result = MessageResult<StartTxnVerification>;
    fn handle(&mut self, msg: StartTxnVerification, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let now = now_ms();
        MessageResult(self.core().and_then(|c| {
            c.maybe_start_transaction_verification(
                msg.producer_id,
                msg.base_sequence,
                msg.producer_epoch,
                msg.supports_epoch_bump,
                now,
            )
        }))
    }
}

impl Handler<ConfirmTxnVerification> for PartitionActor {
    type Result = MessageResult<ConfirmTxnVerification>;
    fn handle(&mut self, msg: ConfirmTxnVerification, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(
            self.core()
                .and_then(|c| c.confirm_transaction_verification(msg.producer_id, msg.guard)),
        )
    }
}

impl Handler<ReadRecords> for PartitionActor {
    type Result = MessageResult<ReadRecords>;
    fn handle(&mut self, msg: ReadRecords, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let result = self
            .core()
            .and_then(|c| c.read_scoped(&msg.params, &msg.scope));
        if let Ok(r) = &result {
            if msg.params.replica_id < 0 && !r.records.is_empty() {
                let n = r.records.len() as u64;
                self.topic_counters().bytes_out.inc_by(n);
            }
        }
        // A follower's fetch tells the leader how far it is (the high watermark may move and
        // the follower may join the ISR) unless its log diverged: its fetch offset is then past
        // what it shares with this leader and must not count (Kafka's `fetchRecords` skips the
        // update when the read found a diverging epoch).
        if let Some(r) = result
            .as_ref()
            .ok()
            .filter(|r| msg.params.replica_id >= 0 && r.diverging_epoch.is_none())
        {
            let leo = r.log_end_offset;
            let (change, moved) = match self.core.as_mut() {
                Some(c) => (
                    c.record_follower_fetch(
                        msg.params.replica_id,
                        msg.params.fetch_offset,
                        leo,
                        now_ms(),
                        msg.isr_eligible,
                        msg.replica_epoch,
                        msg.scope.follower_log_start_offset,
                    ),
                    c.take_hw_moved_by_fetch(),
                ),
                None => (None, false),
            };
            if moved {
                self.report_hw();
            }
            self.send_isr_change(change, ctx);
        }
        MessageResult(result)
    }
}

impl Handler<ConnectIsrChannel> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectIsrChannel, _: &mut Context<Self>) {
        self.isr_channel = Some((msg.topic_id, msg.channel));
    }
}

impl Handler<MaybeShrinkIsr> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: MaybeShrinkIsr, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let change = self
            .core
            .as_mut()
            .and_then(|c| c.maybe_shrink_isr(now_ms(), msg.max_lag_ms));
        self.send_isr_change(change, ctx);
    }
}

impl Handler<GetFollowerPosition> for PartitionActor {
    type Result = MessageResult<GetFollowerPosition>;
    fn handle(&mut self, _: GetFollowerPosition, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core().and_then(|c| c.follower_position()))
    }
}

impl Handler<AppendAsFollower> for PartitionActor {
    type Result = MessageResult<AppendAsFollower>;
    fn handle(&mut self, msg: AppendAsFollower, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let bytes = msg.records.len() as u64;
        let hw_before = self.core.as_ref().map(|c| c.high_watermark());
        let result = self.core().and_then(|c| {
            c.append_as_follower(
                msg.records,
                msg.leader_high_watermark,
                msg.leader_log_start_offset,
                &msg.fetched_from,
                now_ms(),
            )
        });
        match &result {
            Err(PartitionError::Storage(e)) => {
                let e = e.clone();
                self.log_dir_failed("follower append", &e);
            }
            Ok(position) => {
                if bytes > 0 {
                    super::metrics::partition_metrics()
                        .replication_bytes_in_total
                        .inc_by(bytes);
                }
                // Consumers may long-poll a follower (KIP-392): wake them as its high
                // watermark, which the leader's answers carry, moves.
                if hw_before.is_some_and(|hw| position.high_watermark > hw) {
                    self.hw_advanced(position.high_watermark, bytes as usize);
                }
                self.update_txn_gauges();
                self.schedule_flush(ctx, false);
            }
            Err(_) => {}
        }
        MessageResult(result)
    }
}

impl Handler<TruncateToDivergingEpoch> for PartitionActor {
    type Result = MessageResult<TruncateToDivergingEpoch>;
    fn handle(&mut self, msg: TruncateToDivergingEpoch, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let result = self
            .core()
            .and_then(|c| c.truncate_to_diverging_epoch(msg.epoch, msg.end_offset, now_ms()));
        if let Err(PartitionError::Storage(e)) = &result {
            let e = e.clone();
            self.log_dir_failed("truncation", &e);
        }
        MessageResult(result)
    }
}

impl Handler<ResetToLeaderRange> for PartitionActor {
    type Result = MessageResult<ResetToLeaderRange>;
    fn handle(&mut self, msg: ResetToLeaderRange, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let result = self.core().and_then(|c| {
            c.reset_to_leader_range(
                msg.leader_log_start_offset,
                msg.leader_log_end_offset,
                now_ms(),
            )
        });
        if let Err(PartitionError::Storage(e)) = &result {
            let e = e.clone();
            self.log_dir_failed("truncation", &e);
        }
        MessageResult(result)
    }
}

impl Handler<GetOffsetForTimestamp> for PartitionActor {
    type Result = MessageResult<GetOffsetForTimestamp>;
    fn handle(&mut self, msg: GetOffsetForTimestamp, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.core().and_then(|c| {
            c.offset_for_timestamp(msg.timestamp, msg.isolation, msg.current_leader_epoch)
        }))
    }
}

impl Handler<DeleteRecordsBefore> for PartitionActor {
    type Result = MessageResult<DeleteRecordsBefore>;
    fn handle(&mut self, msg: DeleteRecordsBefore, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.core().and_then(|c| c.delete_records(msg.offset)))
    }
}

impl Handler<GetEndOffsetForEpoch> for PartitionActor {
    type Result = MessageResult<GetEndOffsetForEpoch>;
    fn handle(&mut self, msg: GetEndOffsetForEpoch, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        MessageResult(self.core().and_then(|c| {
            c.last_offset_for_leader_epoch(
                msg.current_leader_epoch,
                msg.leader_epoch,
                msg.fetch_only_from_leader,
            )
        }))
    }
}

impl Handler<GetReadableBytes> for PartitionActor {
    type Result = usize;
    fn handle(&mut self, msg: GetReadableBytes, _: &mut Context<Self>) -> usize {
        self.core
            .as_ref()
            .map(|c| c.readable_bytes(msg.fetch_offset, msg.max_bytes))
            .unwrap_or(0)
    }
}

impl Handler<BecomeLeader> for PartitionActor {
    type Result = Result<(), super::core::PartitionError>;
    fn handle(&mut self, msg: BecomeLeader, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let c = self.core()?;
        c.set_config(msg.config);
        if c.become_leader(&msg.assignment, now_ms())? {
            let hw = c.high_watermark();
            self.hw_advanced(hw, 1);
        }
        Ok(())
    }
}

impl Handler<BecomeFollower> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: BecomeFollower, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        if let Ok(c) = self.core() {
            let was_leader = c.role() == Role::Leader;
            let epoch = c.leader_epoch();
            c.set_config(msg.config);
            c.become_follower(&msg.assignment);
            if was_leader {
                self.leadership_lost(epoch, false);
            }
        }
    }
}

impl Handler<UpdatePartitionConfig> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: UpdatePartitionConfig, _: &mut Context<Self>) {
        if let Ok(c) = self.core() {
            c.set_config(msg.config);
        }
    }
}

impl Handler<StopReplica> for PartitionActor {
    type Result = Option<Box<dyn PartitionLog>>;
    fn handle(&mut self, msg: StopReplica, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        if let Some(c) = self.core.as_ref() {
            self.leadership_lost(c.leader_epoch(), msg.delete);
        }
        // No ctx.stop(): a supervisor would restart it. Inert without its core, the actor ends
        // when the last snapshot holding its address is dropped.
        let mut core = self.core.take()?;
        core.stop();
        if !msg.delete {
            if let Err(e) = core.write_producer_snapshot() {
                tracing::warn!(tp = %self.tp, error = %e, "producer snapshot not written");
            }
        }
        let mut log = core.into_log();
        if msg.delete {
            if let Err(e) = log.delete() {
                tracing::error!(tp = %self.tp, error = %e, "failed to delete partition log");
            }
            None
        } else {
            Some(log)
        }
    }
}

impl Handler<TakeReplicaOffline> for PartitionActor {
    type Result = ();
    fn handle(&mut self, _: TakeReplicaOffline, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        self.go_offline("its log dir is offline");
    }
}

impl Handler<DescribeReplica> for PartitionActor {
    type Result = ReplicaInfo;
    fn handle(&mut self, _: DescribeReplica, _: &mut Context<Self>) -> ReplicaInfo {
        match &self.core {
            Some(c) => ReplicaInfo {
                is_leader: c.role() == Role::Leader,
                leader_epoch: c.leader_epoch(),
                log_start_offset: c.log_start_offset(),
                log_end_offset: c.log_end_offset(),
                high_watermark: c.high_watermark(),
                recovery_point: c.log().recovery_point(),
                size_bytes: c.log().size_bytes(),
            },
            None => ReplicaInfo {
                is_leader: false,
                leader_epoch: -1,
                log_start_offset: -1,
                log_end_offset: -1,
                high_watermark: -1,
                recovery_point: -1,
                size_bytes: 0,
            },
        }
    }
}

impl Handler<FlushTick> for PartitionActor {
    type Result = ();
    fn handle(&mut self, msg: FlushTick, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let now = now_ms();
        let tp = self.tp.clone();
        if let Ok(c) = self.core() {
            let r = if msg.force {
                c.flush(now).map(|_| true)
            } else {
                c.maybe_flush(now)
            };
            if let Err(e) = r {
                tracing::error!(tp = %tp, error = %e, "flush failed");
            }
        }
    }
}

impl Handler<ProducerExpirationTick> for PartitionActor {
    type Result = usize;
    fn handle(&mut self, _: ProducerExpirationTick, _: &mut Context<Self>) -> usize {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let now = now_ms();
        self.core()
            .map(|c| c.remove_expired_producers(now))
            .unwrap_or(0)
    }
}

impl Handler<RetentionTick> for PartitionActor {
    type Result = usize;
    fn handle(&mut self, _: RetentionTick, _: &mut Context<Self>) -> usize {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let tp = self.tp.clone();
        match self.core().and_then(|c| c.enforce_retention(now_ms())) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(tp = %tp, error = %e, "retention failed");
                0
            }
        }
    }
}
