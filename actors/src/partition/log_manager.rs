//! `LogManagerActor` (the scheduled half of Kafka's `LogManager`): periodic retention
//! (`log.retention.check.interval.ms`), time-based flush checks (`log.flush.scheduler.interval.ms`),
//! producer-id expiry (`producer.id.expiration.check.interval.ms`, Kafka's per-log
//! `PeriodicProducerExpirationCheck`),
//! recovery-point / log-start-offset checkpoints (`log.flush.offset.checkpoint.interval.ms`),
//! high-watermark checkpoints (`replica.high.watermark.checkpoint.interval.ms`, Kafka's
//! `ReplicaManager.checkpointHighWatermarks`),
//! removal of logs left renamed for deletion (`log.segment.delete.delay.ms`), and the clean
//! shutdown that writes `.kafka_cleanshutdown`. The work itself happens in the partition actors
//! (they own the logs) and in the registry's log factory (it owns the log dirs).

use std::time::Duration;

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, ResponseActFuture, Supervised,
    WrapFuture,
};

use super::messages::{FlushTick, ProducerExpirationTick, RetentionTick, ShutdownReplicas};
use super::registry::{
    CheckpointHighWatermarks, CheckpointLogDirs, PartitionTableReader, PurgeDeletedLogs,
    ReplicaManagerActor,
};
use crate::runtime::{run_caught, ActorMetrics, MeteredAddr, SupervisedActor};

/// Intervals in milliseconds; `i64::MAX` (Kafka's default for the flush scheduler) = never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogManagerConfig {
    pub retention_check_interval_ms: i64,
    pub flush_scheduler_interval_ms: i64,
    pub flush_offset_checkpoint_interval_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub high_watermark_checkpoint_interval_ms: i64,
    pub segment_delete_delay_ms: i64,
    /// How often every partition forgets producers idle past `producer.id.expiration.ms`
    /// (that value itself is per partition: it follows dynamic broker config changes).
    pub producer_id_expiration_check_interval_ms: i64,
}

impl Default for LogManagerConfig {
    fn default() -> Self {
        LogManagerConfig {
            retention_check_interval_ms: 300_000,
            flush_scheduler_interval_ms: i64::MAX,
            flush_offset_checkpoint_interval_ms: 60_000,
            high_watermark_checkpoint_interval_ms: 5_000,
            segment_delete_delay_ms: 60_000,
            producer_id_expiration_check_interval_ms:
                crate::producer::DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
        }
    }
}

impl LogManagerConfig {
    /// Reads Kafka's broker keys, keeping defaults for absent or unparseable ones.
    pub fn from_broker_config(c: &std::collections::BTreeMap<String, String>) -> Self {
        let d = Self::default();
        let get = |k: &str, default: i64| {
            c.get(k)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        LogManagerConfig {
            retention_check_interval_ms: get(
                "log.retention.check.interval.ms",
                d.retention_check_interval_ms,
            ),
            flush_scheduler_interval_ms: get(
                "log.flush.scheduler.interval.ms",
                d.flush_scheduler_interval_ms,
            ),
            flush_offset_checkpoint_interval_ms: get(
                "log.flush.offset.checkpoint.interval.ms",
                d.flush_offset_checkpoint_interval_ms,
            ),
            high_watermark_checkpoint_interval_ms: get(
                "replica.high.watermark.checkpoint.interval.ms",
                d.high_watermark_checkpoint_interval_ms,
            ),
            segment_delete_delay_ms: get("log.segment.delete.delay.ms", d.segment_delete_delay_ms),
            producer_id_expiration_check_interval_ms: get(
                "producer.id.expiration.check.interval.ms",
                d.producer_id_expiration_check_interval_ms,
            ),
        }
    }
}

/// A timer interval, or None for "never" (values beyond a day of days are treated as off).
fn interval(ms: i64) -> Option<Duration> {
    (ms > 0 && ms < 1_000_000_000_000).then(|| Duration::from_millis(ms as u64))
}

pub struct LogManagerActor {
    config: LogManagerConfig,
    registry: MeteredAddr<ReplicaManagerActor>,
    partitions: PartitionTableReader,
    shut_down: bool,
    metrics: ActorMetrics,
}

impl LogManagerActor {
    pub fn new(
        config: LogManagerConfig,
        registry: MeteredAddr<ReplicaManagerActor>,
        partitions: PartitionTableReader,
    ) -> Self {
        LogManagerActor {
            config,
            registry,
            partitions,
            shut_down: false,
            metrics: ActorMetrics::new("LogManagerActor"),
        }
    }

    fn retention(&mut self) {
        if self.shut_down {
            return;
        }
        let table = self.partitions.borrow().clone();
        for r in table.partitions.values() {
            r.addr.do_send(RetentionTick);
        }
    }

    fn expire_producers(&mut self) {
        if self.shut_down {
            return;
        }
        let table = self.partitions.borrow().clone();
        for r in table.partitions.values() {
            r.addr.do_send(ProducerExpirationTick);
        }
    }

    fn flush(&mut self) {
        if self.shut_down {
            return;
        }
        let table = self.partitions.borrow().clone();
        for r in table.partitions.values() {
            r.addr.do_send(FlushTick { force: false });
        }
    }
}

impl Actor for LogManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(every) = interval(self.config.retention_check_interval_ms) {
            ctx.run_interval(every, |act, ctx| {
                let metrics = act.metrics.clone();
                let _m = metrics.handle();
                run_caught(act, ctx, &metrics, "the retention check", |act, _| {
                    act.retention()
                });
            });
        }
        if let Some(every) = interval(self.config.producer_id_expiration_check_interval_ms) {
            ctx.run_interval(every, |act, ctx| {
                let metrics = act.metrics.clone();
                let _m = metrics.handle();
                run_caught(
                    act,
                    ctx,
                    &metrics,
                    "the producer id expiration check",
                    |act, _| act.expire_producers(),
                );
            });
        }
        if let Some(every) = interval(self.config.flush_scheduler_interval_ms) {
            ctx.run_interval(every, |act, ctx| {
                let metrics = act.metrics.clone();
                let _m = metrics.handle();
                run_caught(act, ctx, &metrics, "the flush check", |act, _| act.flush());
            });
        }
        if let Some(every) = interval(self.config.flush_offset_checkpoint_interval_ms) {
            ctx.run_interval(every, |act, _| {
                if !act.shut_down {
                    act.registry.do_send(CheckpointLogDirs);
                }
            });
        }
        if let Some(every) = interval(self.config.high_watermark_checkpoint_interval_ms) {
            ctx.run_interval(every, |act, _| {
                if !act.shut_down {
                    act.registry.do_send(CheckpointHighWatermarks);
                }
            });
        }
        // Directories the previous run renamed for deletion go once the delay has passed.
        let delay = Duration::from_millis(self.config.segment_delete_delay_ms.max(0) as u64);
        ctx.run_later(delay, |act, _| act.registry.do_send(PurgeDeletedLogs));
    }
}

impl Supervised for LogManagerActor {
    /// Stateless between ticks: `started` schedules them again.
    fn restarting(&mut self, _: &mut Context<Self>) {}
}

impl SupervisedActor for LogManagerActor {
    const MAILBOX_CAPACITY: usize = 64;
}

crate::supervised_mailbox!(LogManagerActor);

/// Tests / operators → log manager: run a retention pass now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RunRetentionNow;

impl Handler<RunRetentionNow> for LogManagerActor {
    type Result = ();
    fn handle(&mut self, _: RunRetentionNow, _: &mut Context<Self>) {
        self.retention();
    }
}

/// Process shutdown → log manager: stop every replica, flush and close every log, checkpoint,
/// write the clean-shutdown marker. Lost: the next start runs recovery.
#[derive(Message)]
#[rtype(result = "Result<(), String>")]
pub struct ShutdownLogs;

impl Handler<ShutdownLogs> for LogManagerActor {
    type Result = ResponseActFuture<Self, Result<(), String>>;
    fn handle(&mut self, _: ShutdownLogs, _: &mut Context<Self>) -> Self::Result {
        let registry = self.registry.clone();
        Box::pin(
            async move {
                registry
                    .send(ShutdownReplicas)
                    .await
                    .map_err(|e| e.to_string())?
            }
            .into_actor(self)
            .map(|r, act, _| {
                // Nothing periodic may touch the closed logs (no ctx.stop(): a supervisor
                // would restart us).
                act.shut_down = true;
                r
            }),
        )
    }
}
