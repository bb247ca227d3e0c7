//! Per-actor metrics (Kafka's per-thread-pool `RequestChannel`/`KafkaRequestHandler` metrics,
//! generalised to every actor type): mailbox depth, messages handled, handle time, refusals,
//! restarts, in families named `kactor_actor_*` with an `actor` label (the actor type's name).
//!
//! actix does not expose a mailbox's length, so the depth is counted by the envelopes every
//! message travels in (`runtime::mailbox`): +1 when one is queued, -1 when it is opened or
//! dropped unopened. Handlers time themselves with a [`HandleGuard`] from
//! [`ActorMetrics::handle`]:
//!
//! ```ignore
//! impl Handler<AppendRecords> for PartitionActor {
//!     type Result = /* ... */;
//!     fn handle(&mut self, msg: AppendRecords, _: &mut Context<Self>) -> Self::Result {
//!         let _m = self.metrics.handle();   // counts and times this message
//!         /* ... */
//!     }
//! }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};

use super::mailbox::RestartWindow;
use crate::metrics::{register, LATENCY_BUCKETS};

pub struct ActorFamilies {
    pub mailbox_depth: IntGaugeVec,
    pub messages_handled_total: IntCounterVec,
    pub handle_duration_seconds: HistogramVec,
    pub restarts_total: IntCounterVec,
    pub messages_refused_total: IntCounterVec,
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
        messages_refused_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_actor_messages_refused_total",
                    "Notifications refused because the mailbox was full, by actor type.",
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
    refusals: IntCounter,
    restart_window: Arc<RestartWindow>,
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
            refusals: f.messages_refused_total.with_label_values(&[actor]),
            restart_window: restart_window(actor),
        }
    }

    pub fn actor(&self) -> &'static str {
        self.actor
    }

    /// An envelope was put into the mailbox.
    pub(crate) fn sent(&self) {
        self.depth.inc();
    }

    /// An envelope left the mailbox (opened, or dropped unopened).
    pub(crate) fn dequeued(&self) {
        self.depth.dec();
    }

    /// A notification was refused: the mailbox was full.
    pub(crate) fn refused(&self) {
        self.refusals.inc();
    }

    /// Call first thing in a handler; the guard records the handling when dropped.
    /// The guard owns its handles (two `Arc` clones), so the handler may still use `&mut self`.
    pub fn handle(&self) -> HandleGuard {
        HandleGuard {
            handled: self.handled.clone(),
            duration: self.duration.clone(),
            start: Instant::now(),
        }
    }

    pub(crate) fn restart_window(&self) -> &RestartWindow {
        &self.restart_window
    }

    /// A restart: counted by the runtime for a caught panic, by an actor's own `restarting`
    /// hook when it stopped itself on purpose.
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
    pub fn refused_count(&self) -> u64 {
        self.refusals.get()
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

/// One restart window per actor type, shared by every `ActorMetrics` of that type.
fn restart_window(actor: &'static str) -> Arc<RestartWindow> {
    static WINDOWS: OnceLock<Mutex<HashMap<&'static str, Arc<RestartWindow>>>> = OnceLock::new();
    WINDOWS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(actor)
        .or_default()
        .clone()
}
