//! Starting supervised actors (Kafka restarts nothing in-process; its threads die with the
//! JVM). An actor runs under actix's `Supervisor` on its arbiter with a bounded mailbox; when a
//! handler panics (caught by the runtime, `runtime::mailbox`) or the actor stops itself, the
//! supervisor restarts it with the same mailbox after its `restarting` hook has rebuilt its
//! state from what it persisted (the log, the metadata image, the coordinator topic).

use actix::prelude::*;
use actix::Supervisor;

use super::mailbox::{MeteredAddr, SupervisedActor};
use super::metrics::ActorMetrics;

/// Starts `make()` under a `Supervisor` on `arbiter`, with a mailbox of
/// [`SupervisedActor::MAILBOX_CAPACITY`], and returns its metered address.
pub fn start_supervised<A, F>(
    arbiter: &ArbiterHandle,
    metrics: ActorMetrics,
    make: F,
) -> MeteredAddr<A>
where
    A: SupervisedActor + Supervised,
    F: FnOnce(&mut Context<A>) -> A + Send + 'static,
{
    let addr = Supervisor::start_in_arbiter(arbiter, move |ctx: &mut Context<A>| {
        ctx.set_mailbox_capacity(A::MAILBOX_CAPACITY);
        make(ctx)
    });
    MeteredAddr::new(addr, metrics)
}

/// [`start_supervised`] on the current arbiter (tests, and components started in place).
pub fn start_supervised_here<A, F>(metrics: ActorMetrics, make: F) -> MeteredAddr<A>
where
    A: SupervisedActor + Supervised,
    F: FnOnce(&mut Context<A>) -> A + Send + 'static,
{
    start_supervised(&Arbiter::current(), metrics, make)
}

/// Starts `make()` on `arbiter` without a supervisor: a caught panic (or any stop) ends it. For
/// actors whose state cannot be rebuilt, such as a client connection.
pub fn start_unsupervised<A, F>(
    arbiter: &ArbiterHandle,
    metrics: ActorMetrics,
    make: F,
) -> MeteredAddr<A>
where
    A: SupervisedActor,
    F: FnOnce(&mut Context<A>) -> A + Send + 'static,
{
    let addr = A::start_in_arbiter(arbiter, move |ctx: &mut Context<A>| {
        ctx.set_mailbox_capacity(A::MAILBOX_CAPACITY);
        make(ctx)
    });
    MeteredAddr::new(addr, metrics)
}

/// Starts `actor` unsupervised on the current arbiter, its metrics labelled with its type's
/// name: tests and their doubles.
pub fn start_here<A: SupervisedActor>(actor: A) -> MeteredAddr<A> {
    let name = std::any::type_name::<A>()
        .rsplit("::")
        .next()
        .unwrap_or("TestActor");
    let addr = A::create(move |ctx| {
        ctx.set_mailbox_capacity(A::MAILBOX_CAPACITY);
        actor
    });
    MeteredAddr::new(addr, ActorMetrics::new(name))
}
