//! The one way to send to a supervised actor (Kafka has no counterpart: its request handler
//! threads catch everything a request throws, and nothing else restarts in-process).
//!
//! Every message reaches a supervised actor inside an [`Envelope`]: a closure, made by the
//! sender's [`MeteredAddr`] / [`MeteredRecipient`], that calls the actor's own `Handler<M>`.
//! That gives the runtime one place, around every handler of every actor type, to
//!
//! - count the mailbox depth exactly: +1 when an envelope is queued, -1 when it is opened (a
//!   timer or `ctx.notify` never enters the mailbox and never moves the gauge, a raw address
//!   cannot reach the actor at all: actors handle envelopes only, see [`supervised_mailbox!`]);
//! - catch a handler's panic (release builds unwind too): the panic is logged with the actor
//!   and message type, counted in `kactor_actor_restarts_total`, and the actor stopped, which
//!   its `actix::Supervisor` answers by restarting it with the same mailbox after its
//!   `restarting` hook has rebuilt its state from its durable source. Restarts beyond an
//!   intensity escalate to the actor's [`SupervisedActor::escalate`];
//! - inject a fault in tests (`KACTOR_FAULT_INJECTION=1`, `runtime::fault_injection`).
//!
//! Mailboxes are bounded (capacity per actor type, [`SupervisedActor::MAILBOX_CAPACITY`]). Two
//! policies, chosen by the sender per message class:
//! - [`MeteredAddr::send`] (request/response) waits for space: backpressure to the sender;
//! - [`MeteredAddr::do_send`] (notification, fire and forget) is for control messages that must
//!   not be lost and whose rate is bounded by their source (metadata changes, leadership,
//!   stop); it is queued even when the mailbox is full. Notifications that may be refused use
//!   [`MeteredAddr::try_send`], which hands the message back when the mailbox is full.

use std::any::type_name;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use futures_util::future::BoxFuture;

use super::metrics::ActorMetrics;

type BoundHandler<A> = Box<dyn FnOnce(&mut A, &mut <A as Actor>::Context) + Send>;

/// A message bound to its handler, the only message type a supervised actor's mailbox holds.
/// It leaves the mailbox depth exactly once: opened, or dropped unopened (the actor gone).
pub struct Envelope<A: Actor> {
    handler: Option<BoundHandler<A>>,
    metrics: ActorMetrics,
}

impl<A: Actor> Message for Envelope<A> {
    type Result = ();
}

impl<A: Actor> Envelope<A> {
    /// Queued: counted in the mailbox depth until opened or dropped.
    fn new(metrics: ActorMetrics, handler: BoundHandler<A>) -> Self {
        metrics.sent();
        Envelope {
            handler: Some(handler),
            metrics,
        }
    }

    /// Opens the envelope: runs the handler it carries (see the module doc).
    pub fn open(mut self, act: &mut A, ctx: &mut A::Context) {
        let handler = self.handler.take().expect("an envelope is opened once");
        self.metrics.dequeued();
        handler(act, ctx)
    }
}

impl<A: Actor> Drop for Envelope<A> {
    fn drop(&mut self) {
        if self.handler.is_some() {
            self.metrics.dequeued();
        }
    }
}

/// Implements `Handler<Envelope<Self>>` for a supervised actor type: the one handler its
/// mailbox reaches. Every actor started with [`super::start_supervised`] needs it.
#[macro_export]
macro_rules! supervised_mailbox {
    ($actor:ty) => {
        impl ::actix::Handler<$crate::runtime::Envelope<$actor>> for $actor {
            type Result = ();
            fn handle(
                &mut self,
                envelope: $crate::runtime::Envelope<$actor>,
                ctx: &mut ::actix::Context<Self>,
            ) {
                envelope.open(self, ctx)
            }
        }
    };
}

/// How many restarts of one actor type within [`RESTART_WINDOW`] are tolerated before the
/// failure escalates (Erlang's supervisor intensity): a handler that panics on every message
/// would otherwise restart forever while its clients see nothing but retries.
pub const MAX_RESTARTS: usize = 10;
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// An actor under the runtime's supervision: its metrics, its mailbox bound, and what happens
/// when restarts are not enough. Started with [`super::start_supervised`] (it must also be
/// `actix::Supervised`) a panic restarts it; started with [`super::start_unsupervised`] (a
/// connection, whose state cannot be rebuilt) a panic stops it for good.
pub trait SupervisedActor: Actor<Context = Context<Self>> + Handler<Envelope<Self>> {
    /// The most envelopes its mailbox holds before [`MeteredAddr::send`] waits.
    const MAILBOX_CAPACITY: usize;

    /// What a caught panic does to this actor type.
    const ON_PANIC: OnPanic = OnPanic::Restart;

    /// Restarts exceeded [`MAX_RESTARTS`] within [`RESTART_WINDOW`]: the default stops the
    /// process with one clear line (Kubernetes restarts the pod and recovery reads the logs).
    /// Actors with a narrower way out (a partition: take it offline) override it.
    fn escalate(&mut self, reason: String, _ctx: &mut Context<Self>) {
        super::fault::report_fatal(reason);
    }
}

/// The restart policy of an actor type, for a caught panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPanic {
    /// Stop; its supervisor restarts it from its durable state, and restarts beyond the
    /// intensity escalate.
    Restart,
    /// Stop for good (an actor whose state cannot be rebuilt, such as a client connection).
    Stop,
    /// Escalate at once (an actor the process cannot run without, such as the socket server).
    Escalate,
}

/// The restart times of one actor type, for the intensity check.
#[derive(Default)]
pub(crate) struct RestartWindow(Mutex<VecDeque<Instant>>);

impl RestartWindow {
    /// Records a restart now; true when that is one too many within the window.
    fn record(&self, now: Instant) -> bool {
        let mut times = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            times.pop_front();
        }
        times.push_back(now);
        times.len() > MAX_RESTARTS
    }
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a non-string panic payload)")
}

/// The handler for one `M`: runs `Handler<M>` (and its reply) with panics caught, and on a
/// panic stops the actor for its supervisor to restart.
fn bind<A, M>(
    metrics: ActorMetrics,
    msg: M,
    reply: Option<OneshotSender<M::Result>>,
) -> BoundHandler<A>
where
    A: SupervisedActor + Handler<M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    Box::new(move |act: &mut A, ctx: &mut Context<A>| {
        run_caught(act, ctx, &metrics, type_name::<M>(), |act, ctx| {
            let response = <A as Handler<M>>::handle(act, msg, ctx);
            response.handle(ctx, reply);
        })
    })
}

/// Runs `work` (a handler, or a timer's callback, which actix runs outside any handler) with
/// panics caught; a panic is handled by the actor type's [`OnPanic`] policy exactly as in a
/// message handler. `what` names the work in the log line.
pub fn run_caught<A: SupervisedActor>(
    act: &mut A,
    ctx: &mut Context<A>,
    metrics: &ActorMetrics,
    what: &'static str,
    work: impl FnOnce(&mut A, &mut Context<A>),
) {
    let running = super::watchdog::enter(metrics.actor(), what);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        super::fault_injection::maybe_panic(metrics.actor());
        work(act, ctx)
    }));
    drop(running);
    let Err(payload) = outcome else { return };
    let reason = format!(
        "{} panicked handling {}: {}",
        metrics.actor(),
        what,
        panic_text(payload.as_ref())
    );
    match A::ON_PANIC {
        OnPanic::Stop => {
            tracing::error!(actor = metrics.actor(), "{reason}; stopping it");
            ctx.stop();
            return;
        }
        OnPanic::Escalate => {
            tracing::error!(actor = metrics.actor(), "{reason}: escalating");
            act.escalate(reason, ctx);
            return;
        }
        OnPanic::Restart => {}
    }
    if metrics.restart_window().record(Instant::now()) {
        // Not restarted: escalate() either makes the actor inert (a partition going
        // offline) or ends the process.
        let reason = format!(
            "{reason}; more than {MAX_RESTARTS} restarts of {} within {} s",
            metrics.actor(),
            RESTART_WINDOW.as_secs()
        );
        tracing::error!(actor = metrics.actor(), "{reason}: escalating");
        act.escalate(reason, ctx);
        return;
    }
    tracing::error!(actor = metrics.actor(), "{reason}; restarting it");
    metrics.restarted();
    ctx.stop();
}

/// An actor's address that only sends envelopes (see the module doc).
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

impl<A: Actor> PartialEq for MeteredAddr<A> {
    /// The same actor (metrics are per type, so they never tell two addresses apart).
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}

impl<A: Actor> Eq for MeteredAddr<A> {}

/// The mailbox was full and the message was not queued ([`MeteredAddr::try_send`]).
#[derive(Debug)]
pub struct MailboxFull<M>(pub M);

impl<A: SupervisedActor> MeteredAddr<A> {
    pub fn new(addr: Addr<A>, metrics: ActorMetrics) -> Self {
        MeteredAddr { addr, metrics }
    }

    pub fn connected(&self) -> bool {
        self.addr.connected()
    }

    /// Request/response; waits while the mailbox is full (backpressure). The future owns
    /// what it needs (it borrows nothing from `self`), like `Addr::send`'s.
    pub fn send<M>(
        &self,
        msg: M,
    ) -> impl std::future::Future<Output = Result<M::Result, MailboxError>> + 'static
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let handler = bind::<A, M>(self.metrics.clone(), msg, Some(tx));
        let queued = self.addr.send(Envelope::new(self.metrics.clone(), handler));
        async move {
            // Err: not queued (closed mailbox), or dropped unopened with the actor.
            queued.await?;
            // Opened; no reply means the handler panicked (or dropped its reply).
            rx.await.map_err(|_| MailboxError::Closed)
        }
    }

    /// A control notification: queued even when the mailbox is full (see the module doc).
    pub fn do_send<M>(&self, msg: M)
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        if self.addr.connected() {
            let handler = bind::<A, M>(self.metrics.clone(), msg, None);
            self.addr
                .do_send(Envelope::new(self.metrics.clone(), handler));
        }
    }

    /// A notification that may be refused: hands `msg` back when the mailbox is full or closed.
    pub fn try_send<M>(&self, msg: M) -> Result<(), MailboxFull<M>>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        // The envelope owns `msg`; it waits aside until the mailbox has accepted the envelope,
        // so that a refusal can hand it back.
        let slot = Arc::new(Mutex::new(Some(msg)));
        let taken = slot.clone();
        let metrics = self.metrics.clone();
        let handler: BoundHandler<A> = Box::new(move |act, ctx| {
            let msg = taken
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .expect("an accepted envelope carries its message");
            bind::<A, M>(metrics, msg, None)(act, ctx)
        });
        match self
            .addr
            .try_send(Envelope::new(self.metrics.clone(), handler))
        {
            Ok(()) => Ok(()),
            Err(_) => {
                self.metrics.refused();
                let msg = slot
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .expect("a refused envelope was never opened");
                Err(MailboxFull(msg))
            }
        }
    }

    /// A metered recipient for one message type (what other components hold).
    pub fn recipient<M>(&self) -> MeteredRecipient<M>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        MeteredRecipient(Arc::new(self.clone()))
    }
}

/// The sending half of [`MeteredRecipient`], for one message type, whatever the actor.
trait EnvelopeSender<M: Message>: Send + Sync {
    fn send(&self, msg: M) -> BoxFuture<'static, Result<M::Result, MailboxError>>;
    fn do_send(&self, msg: M);
    fn try_send(&self, msg: M) -> Result<(), MailboxFull<M>>;
    fn connected(&self) -> bool;
}

impl<A, M> EnvelopeSender<M> for MeteredAddr<A>
where
    A: SupervisedActor + Handler<M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    fn send(&self, msg: M) -> BoxFuture<'static, Result<M::Result, MailboxError>> {
        Box::pin(MeteredAddr::send(self, msg))
    }
    fn do_send(&self, msg: M) {
        MeteredAddr::do_send(self, msg)
    }
    fn try_send(&self, msg: M) -> Result<(), MailboxFull<M>> {
        MeteredAddr::try_send(self, msg)
    }
    fn connected(&self) -> bool {
        self.addr.connected()
    }
}

/// A supervised actor's address for one message type, with [`MeteredAddr`]'s sending rules.
pub struct MeteredRecipient<M: Message>(Arc<dyn EnvelopeSender<M>>);

impl<M: Message> Clone for MeteredRecipient<M> {
    fn clone(&self) -> Self {
        MeteredRecipient(self.0.clone())
    }
}

impl<M: Message> std::fmt::Debug for MeteredRecipient<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MeteredRecipient")
    }
}

impl<M> MeteredRecipient<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    pub fn send(&self, msg: M) -> BoxFuture<'static, Result<M::Result, MailboxError>> {
        self.0.send(msg)
    }
    pub fn do_send(&self, msg: M) {
        self.0.do_send(msg)
    }
    pub fn try_send(&self, msg: M) -> Result<(), MailboxFull<M>> {
        self.0.try_send(msg)
    }
    pub fn connected(&self) -> bool {
        self.0.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Echo {
        metrics: ActorMetrics,
        generation: u32,
        escalated: Arc<AtomicBool>,
    }
    impl Actor for Echo {
        type Context = Context<Self>;
    }
    impl Supervised for Echo {
        fn restarting(&mut self, _: &mut Context<Self>) {
            self.generation += 1;
        }
    }
    impl SupervisedActor for Echo {
        const MAILBOX_CAPACITY: usize = 4;
        fn escalate(&mut self, _: String, _: &mut Context<Self>) {
            self.escalated.store(true, Ordering::SeqCst);
        }
    }
    crate::supervised_mailbox!(Echo);

    #[derive(Message)]
    #[rtype(result = "u32")]
    struct Ping(u32);
    impl Handler<Ping> for Echo {
        type Result = u32;
        fn handle(&mut self, msg: Ping, _: &mut Context<Self>) -> u32 {
            let _m = self.metrics.handle();
            msg.0 + self.generation
        }
    }

    #[derive(Message)]
    #[rtype(result = "()")]
    struct Crash;
    impl Handler<Crash> for Echo {
        type Result = ();
        fn handle(&mut self, _: Crash, _: &mut Context<Self>) {
            panic!("a bug");
        }
    }

    fn echo(name: &'static str) -> (MeteredAddr<Echo>, ActorMetrics, Arc<AtomicBool>) {
        let metrics = ActorMetrics::new(name);
        let escalated = Arc::new(AtomicBool::new(false));
        let (m, e) = (metrics.clone(), escalated.clone());
        let addr =
            super::super::supervision::start_supervised_here(metrics.clone(), move |_| Echo {
                metrics: m,
                generation: 0,
                escalated: e,
            });
        (addr, metrics, escalated)
    }

    #[actix_rt::test]
    async fn the_depth_is_exact_and_handlers_are_timed() {
        let (addr, metrics, _) = echo("EchoDepthTestActor");
        for i in 0..5 {
            addr.do_send(Ping(i));
        }
        assert_eq!(metrics.mailbox_depth(), 5);
        assert_eq!(addr.send(Ping(41)).await.unwrap(), 41);
        assert_eq!(metrics.mailbox_depth(), 0);
        assert_eq!(metrics.handled_count(), 6);
        let text = crate::metrics::render();
        assert!(
            text.contains(
                "kactor_actor_handle_duration_seconds_count{actor=\"EchoDepthTestActor\"} 6"
            ),
            "{text}"
        );
    }

    #[actix_rt::test]
    async fn a_panicking_handler_restarts_the_actor_which_keeps_its_mailbox() {
        let (addr, metrics, escalated) = echo("EchoPanicTestActor");
        addr.do_send(Crash);
        addr.do_send(Ping(10));
        // The crash's caller sees the mailbox error; the queued ping is served after restart.
        assert!(matches!(addr.send(Crash).await, Err(MailboxError::Closed)));
        assert_eq!(addr.send(Ping(100)).await.unwrap(), 102);
        assert_eq!(metrics.restart_count(), 2);
        assert_eq!(metrics.mailbox_depth(), 0);
        assert!(!escalated.load(Ordering::SeqCst));
    }

    #[actix_rt::test]
    async fn restarts_beyond_the_intensity_escalate() {
        let (addr, _, escalated) = echo("EchoEscalationTestActor");
        for _ in 0..MAX_RESTARTS {
            let _ = addr.send(Crash).await;
        }
        assert!(!escalated.load(Ordering::SeqCst));
        let _ = addr.send(Crash).await;
        assert!(escalated.load(Ordering::SeqCst));
    }

    #[actix_rt::test]
    async fn a_full_mailbox_refuses_try_send_and_hands_the_message_back() {
        let (addr, metrics, _) = echo("EchoFullTestActor");
        // Started (and its capacity set) once it has answered; then nothing runs until this
        // task yields, so the mailbox fills.
        assert_eq!(addr.send(Ping(0)).await.unwrap(), 0);
        let mut refused = None;
        for i in 0..100 {
            if let Err(MailboxFull(Ping(n))) = addr.try_send(Ping(i)) {
                refused = Some(n);
                break;
            }
        }
        let n = refused.expect("a bounded mailbox refuses at some point");
        assert!(
            n as usize <= Echo::MAILBOX_CAPACITY + 1,
            "refused only at {n}"
        );
        assert_eq!(metrics.refused_count(), 1);
        assert_eq!(addr.send(Ping(0)).await.unwrap(), 0);
        assert_eq!(metrics.mailbox_depth(), 0);
    }

    #[actix_rt::test]
    async fn envelopes_dropped_unopened_leave_the_depth_too() {
        let metrics = ActorMetrics::new("EchoDroppedTestActor");
        let m = metrics.clone();
        let escalated = Arc::new(AtomicBool::new(false));
        // Not supervised: a stop is final and the queued envelopes are dropped.
        let addr = MeteredAddr::new(
            Echo::create(|ctx| {
                ctx.stop();
                Echo {
                    metrics: m,
                    generation: 0,
                    escalated,
                }
            }),
            metrics.clone(),
        );
        for i in 0..3 {
            addr.do_send(Ping(i));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(metrics.mailbox_depth(), 0);
        assert!(addr.send(Ping(0)).await.is_err());
        assert_eq!(metrics.mailbox_depth(), 0);
    }
}
