//! Events instead of polling: an actor follows a `tokio::sync::watch` channel (the partition
//! table, the metadata image) and runs a callback each time a new value is published, under the
//! same panic policy as its handlers.

use actix::fut::wrap_future;
use actix::prelude::*;
use tokio::sync::watch;

use super::mailbox::{run_caught, SupervisedActor};
use super::metrics::ActorMetrics;

/// Runs `on_change` in `A`'s context after every publication on `rx` that follows this call.
/// Clone the receiver *before* reading the current value for the actor's initial state: a
/// value published in between is then seen as a change, never missed. Several publications
/// while the callback runs coalesce into one call, which reads the latest value. The
/// following stops with the actor (and is set up again in `started()` after a restart).
pub fn follow_watch<A, T>(
    ctx: &mut Context<A>,
    rx: watch::Receiver<T>,
    metrics: ActorMetrics,
    what: &'static str,
    on_change: fn(&mut A, &mut Context<A>),
) where
    A: SupervisedActor,
    T: Send + Sync + 'static,
{
    let next = async move {
        let mut rx = rx;
        let open = rx.changed().await.is_ok();
        (rx, open)
    };
    ctx.spawn(wrap_future::<_, A>(next).map(move |(rx, open), act, ctx| {
        if !open {
            // The publisher is gone: the process is shutting down.
            return;
        }
        run_caught(act, ctx, &metrics, what, on_change);
        follow_watch(ctx, rx, metrics, what, on_change);
    }));
}
