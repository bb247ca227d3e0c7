//! Per-actor metrics (Kafka's per-thread-pool `RequestChannel`/`KafkaRequestHandler` metrics,
//! generalised to every actor type): mailbox depth, messages handled, handle time, restarts,
//! in families named `kactor_actor_*` with an `actor` label (the actor type's name).
//!
//! actix does not expose a mailbox's length, so depth is counted at the edges: senders go
//! through [`MeteredAddr`] / [`MeteredRecipient`] (+1 on send), handlers hold a [`HandleGuard`]
//! from [`ActorMetrics::handle`] (−1 when the handler starts, duration observed when it ends).
//!
//! ```ignore
//! struct PartitionActor { metrics: ActorMetrics, /* ... */ }
//! impl Handler<AppendRecords> for PartitionActor {
//!     type Result = /* ... */;
//!     fn handle(&mut self, msg: AppendRecords, _: &mut Context<Self>) -> Self::Result {
//!         let _m = self.metrics.handle();   // counts and times this message
//!         /* ... */
//!     }
//! }
//! // sender side, wired in the topology:
//! let addr = MeteredAddr::new(PartitionActor::start(..), ActorMetrics::new("PartitionActor"));
//! addr.do_send(AppendRecords { .. });
//! ```

use std::sync::OnceLock;
use std::time::Instant;

use actix::dev::ToEnvelope;
use actix::prelude::*;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};

use crate::metrics::{register, LATENCY_BUCKETS};

pub struct ActorFamilies {
    pub mailbox_depth: IntGaugeVec,
    pub messages_handled_total: IntCounterVec,
    pub handle_duration_seconds: HistogramVec,
    pub restarts_total: IntCounterVec,
}

/// The `kactor_actor_*` families, registered on first use.
pub fn families() -> &'static ActorFamilies {
    static F: OnceLock<ActorFamilies> = OnceLock::new();
    F.get_or_init(|| ActorFamilies {
        mailbox_depth: register(
            IntGaugeVec::new(
                Opts::new(
                    "kactor_actor_mailbox_depth",
                    "Messages sent but not yet handled, by actor type.",
                ),
                &["actor"],
            )
            .expect("valid family"),
        ),
        messages_handled_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_actor_messages_handled_total",
                    "Messages handled, by actor type.",
                ),
                &["actor"],
            )
            .expect("valid family"),
        ),
        handle_duration_seconds: register(
            HistogramVec::new(
                HistogramOpts::new(
                    "kactor_actor_handle_duration_seconds",
                    "Time spent in a handler (synchronous part), by actor type.",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
                &["actor"],
            )
            .expect("valid family"),
        ),
        restarts_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_actor_restarts_total",
                    "Supervisor restarts, by actor type.",
                ),
                &["actor"],
            )
            .expect("valid family"),
        ),
    })
}

/// The metric handles of one actor type; cheap to clone (a few `Arc`s).
#[derive(Clone)]
pub struct ActorMetrics {
    actor: &'static str,
    depth: IntGauge,
    handled: IntCounter,
    duration: Histogram,
    restarts: IntCounter,
}

impl std::fmt::Debug for ActorMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorMetrics")
            .field("actor", &self.actor)
            .finish()
    }
}

impl ActorMetrics {
    /// `actor` is the actor type's name, e.g. `"PartitionActor"` (label values stay few:
    /// per type, not per instance).
    pub fn new(actor: &'static str) -> Self {
        let f = families();
        ActorMetrics {
            actor,
            depth: f.mailbox_depth.with_label_values(&[actor]),
            handled: f.messages_handled_total.with_label_values(&[actor]),
            duration: f.handle_duration_seconds.with_label_values(&[actor]),
            restarts: f.restarts_total.with_label_values(&[actor]),
        }
    }

    pub fn actor(&self) -> &'static str {
        self.actor
    }

    /// A message was put into the mailbox.
    pub fn sent(&self) {
        self.depth.inc();
    }

    /// A message could not be delivered (mailbox closed): undo [`sent`](Self::sent).
    pub fn send_failed(&self) {
        self.depth.dec();
    }

    /// Call first thing in a handler; the guard records the handling when dropped.
    /// The guard owns its handles (two `Arc` clones), so the handler may still use `&mut self`.
    pub fn handle(&self) -> HandleGuard {
        self.depth.dec();
        HandleGuard {
            handled: self.handled.clone(),
            duration: self.duration.clone(),
            start: Instant::now(),
        }
    }

    /// Call from `Supervised::restarting`.
    pub fn restarted(&self) {
        self.restarts.inc();
    }

    pub fn mailbox_depth(&self) -> i64 {
        self.depth.get()
    }
    pub fn handled_count(&self) -> u64 {
        self.handled.get()
    }
    pub fn restart_count(&self) -> u64 {
        self.restarts.get()
    }
}

/// Times one handler invocation; see [`ActorMetrics::handle`].
pub struct HandleGuard {
    handled: IntCounter,
    duration: Histogram,
    start: Instant,
}

impl Drop for HandleGuard {
    fn drop(&mut self) {
        self.handled.inc();
        self.duration.observe(self.start.elapsed().as_secs_f64());
    }
}

/// An `Addr<A>` that counts mailbox depth on send.
pub struct MeteredAddr<A: Actor> {
    addr: Addr<A>,
    metrics: ActorMetrics,
}

impl<A: Actor> Clone for MeteredAddr<A> {
    fn clone(&self) -> Self {
        MeteredAddr {
            addr: self.addr.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<A: Actor> MeteredAddr<A> {
    pub fn new(addr: Addr<A>, metrics: ActorMetrics) -> Self {
        MeteredAddr { addr, metrics }
    }

    pub fn addr(&self) -> &Addr<A> {
        &self.addr
    }

    /// Fire and forget, like `Addr::do_send` (ignores mailbox capacity, never fails loudly).
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: ToEnvelope<A, M>,
    {
        if self.addr.connected() {
            self.metrics.sent();
            self.addr.do_send(msg);
        }
    }

    /// Request/response, like `Addr::send`.
    pub async fn send<M>(&self, msg: M) -> Result<M::Result, MailboxError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: ToEnvelope<A, M>,
    {
        self.metrics.sent();
        let r = self.addr.send(msg).await;
        if matches!(r, Err(MailboxError::Closed)) {
            self.metrics.send_failed();
        }
        r
    }

    /// A metered recipient for one message type (what other components should hold).
    pub fn recipient<M>(&self) -> MeteredRecipient<M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: ToEnvelope<A, M>,
    {
        MeteredRecipient {
            recipient: self.addr.clone().recipient(),
            metrics: self.metrics.clone(),
        }
    }
}

/// A `Recipient<M>` that counts mailbox depth on send.
pub struct MeteredRecipient<M: Message + Send>
where
    M::Result: Send,
{
    recipient: Recipient<M>,
    metrics: ActorMetrics,
}

impl<M: Message + Send> Clone for MeteredRecipient<M>
where
    M::Result: Send,
{
    fn clone(&self) -> Self {
        MeteredRecipient {
            recipient: self.recipient.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<M: Message + Send + 'static> MeteredRecipient<M>
where
    M::Result: Send,
{
    pub fn new(recipient: Recipient<M>, metrics: ActorMetrics) -> Self {
        MeteredRecipient { recipient, metrics }
    }

    pub fn do_send(&self, msg: M) {
        if self.recipient.connected() {
            self.metrics.sent();
            self.recipient.do_send(msg);
        }
    }

    pub async fn send(&self, msg: M) -> Result<M::Result, MailboxError> {
        self.metrics.sent();
        let r = self.recipient.send(msg).await;
        if matches!(r, Err(MailboxError::Closed)) {
            self.metrics.send_failed();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo {
        metrics: ActorMetrics,
    }
    impl Actor for Echo {
        type Context = Context<Self>;
    }
    #[derive(Message)]
    #[rtype(result = "u32")]
    struct Ping(u32);
    impl Handler<Ping> for Echo {
        type Result = u32;
        fn handle(&mut self, msg: Ping, _: &mut Context<Self>) -> u32 {
            let _m = self.metrics.handle();
            msg.0 + 1
        }
    }

    #[actix_rt::test]
    async fn counts_depth_handled_and_time() {
        let metrics = ActorMetrics::new("EchoTestActor");
        let addr = MeteredAddr::new(
            Echo {
                metrics: metrics.clone(),
            }
            .start(),
            metrics.clone(),
        );
        for i in 0..5 {
            addr.do_send(Ping(i));
        }
        assert_eq!(metrics.mailbox_depth(), 5);
        assert_eq!(addr.send(Ping(41)).await.unwrap(), 42);
        assert_eq!(metrics.mailbox_depth(), 0);
        assert_eq!(metrics.handled_count(), 6);
        let text = crate::metrics::render();
        assert!(
            text.contains("kactor_actor_handle_duration_seconds_count{actor=\"EchoTestActor\"} 6"),
            "{text}"
        );
    }
}
