//! `PurgatoryActor`: the shell around [`Purgatory`]: holds the waiting callers' reply channels
//! and one timer per operation.

use std::collections::HashMap;
use std::time::Duration;

use actix::{Actor, AsyncContext, Context, Handler, Supervised};
use tokio::sync::oneshot;

use super::core::{Completion, Purgatory};
use super::messages::*;
use crate::runtime::{ActorMetrics, SupervisedActor};

pub struct PurgatoryActor {
    core: Purgatory,
    next_id: u64,
    produce_waiters: HashMap<u64, oneshot::Sender<ProduceWaitResult>>,
    fetch_waiters: HashMap<u64, oneshot::Sender<bool>>,
    metrics: ActorMetrics,
}

impl Default for PurgatoryActor {
    fn default() -> Self {
        Self::new()
    }
}

impl PurgatoryActor {
    pub fn new() -> Self {
        PurgatoryActor {
            core: Purgatory::new(),
            next_id: 0,
            produce_waiters: HashMap::new(),
            fetch_waiters: HashMap::new(),
            metrics: ActorMetrics::new("PurgatoryActor"),
        }
    }

    fn complete(&mut self, c: Completion) {
        match c {
            Completion::Produce { id, results } => {
                if let Some(tx) = self.produce_waiters.remove(&id) {
                    // The caller may have gone (connection closed); nothing to do then.
                    let _ = tx.send(results);
                }
            }
            Completion::Fetch { id, expired } => {
                if let Some(tx) = self.fetch_waiters.remove(&id) {
                    let _ = tx.send(expired);
                }
            }
        }
        self.report_size();
    }

    fn report_size(&self) {
        let m = &crate::partition::metrics::partition_metrics().purgatory_size;
        m.with_label_values(&["produce"])
            .set(self.core.delayed_produce_count() as i64);
        m.with_label_values(&["fetch"])
            .set(self.core.delayed_fetch_count() as i64);
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

impl Actor for PurgatoryActor {
    type Context = Context<Self>;
}

impl Supervised for PurgatoryActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // A restart drops the context's timers, so the parked operations would never expire:
        // they end now instead (produces REQUEST_TIMED_OUT, clients retry; fetches answer
        // with what they have).
        for c in self.core.expire_all() {
            self.complete(c);
        }
        self.report_size();
    }
}

impl SupervisedActor for PurgatoryActor {
    const MAILBOX_CAPACITY: usize = 4096;
}

crate::supervised_mailbox!(PurgatoryActor);

impl Handler<WatchProduce> for PurgatoryActor {
    type Result = ();
    fn handle(&mut self, msg: WatchProduce, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let id = self.id();
        self.produce_waiters.insert(id, msg.done);
        match self.core.add_produce(id, msg.watches) {
            Some(c) => self.complete(c),
            None => {
                self.report_size();
                ctx.run_later(Duration::from_millis(msg.timeout_ms), move |act, _| {
                    if let Some(c) = act.core.expire_produce(id) {
                        act.complete(c);
                    }
                });
            }
        }
    }
}

impl Handler<WatchFetch> for PurgatoryActor {
    type Result = ();
    fn handle(&mut self, msg: WatchFetch, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let id = self.id();
        self.fetch_waiters.insert(id, msg.done);
        match self.core.add_fetch(
            id,
            msg.watches,
            msg.min_bytes,
            msg.accumulated_bytes,
            msg.follower,
        ) {
            Some(c) => self.complete(c),
            None => {
                self.report_size();
                ctx.run_later(Duration::from_millis(msg.max_wait_ms), move |act, _| {
                    if let Some(c) = act.core.expire_fetch(id) {
                        act.complete(c);
                    }
                });
            }
        }
    }
}

impl Handler<HighWatermarkAdvanced> for PurgatoryActor {
    type Result = ();
    fn handle(&mut self, msg: HighWatermarkAdvanced, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        for c in
            self.core
                .on_high_watermark(&msg.tp, msg.high_watermark, msg.bytes, msg.under_min_isr)
        {
            self.complete(c);
        }
    }
}

impl Handler<LogEndAdvanced> for PurgatoryActor {
    type Result = ();
    fn handle(&mut self, msg: LogEndAdvanced, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        for c in self.core.on_log_end(&msg.tp, msg.log_end_offset, msg.bytes) {
            self.complete(c);
        }
    }
}

impl Handler<LeadershipLost> for PurgatoryActor {
    type Result = ();
    fn handle(&mut self, msg: LeadershipLost, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        for c in self
            .core
            .on_leadership_lost(&msg.tp, msg.leader_epoch, msg.deleted)
        {
            self.complete(c);
        }
    }
}

impl Handler<DescribePurgatory> for PurgatoryActor {
    type Result = PurgatorySize;
    fn handle(&mut self, _: DescribePurgatory, _: &mut Context<Self>) -> PurgatorySize {
        PurgatorySize {
            delayed_produce: self.core.delayed_produce_count(),
            delayed_fetch: self.core.delayed_fetch_count(),
        }
    }
}
