//! Supervision (Kafka restarts nothing in-process; its threads die with the JVM). An actor
//! that stops itself after a failure is restarted by actix's `Supervisor` on its arbiter, and
//! rebuilds its state from what it persisted (the log, the metadata image) in `restarting`.
//! Every restart is counted in `kactor_actor_restarts_total`.

use actix::prelude::*;
use actix::Supervisor;

use super::metrics::{ActorMetrics, MeteredAddr};

/// An actor the runtime can supervise: it exposes its metrics so restarts are counted.
///
/// Implement `actix::Supervised` as usual and call [`ActorMetrics::restarted`] from
/// `restarting` (the helper below cannot do it for you: actix calls `restarting` on the
/// actor itself):
///
/// ```ignore
/// impl Supervised for PartitionActor {
///     fn restarting(&mut self, _: &mut Context<Self>) {
///         self.metrics.restarted();
///         self.reload_from_log();
///     }
/// }
/// impl SupervisedActor for PartitionActor {
///     fn metrics(&self) -> &ActorMetrics { &self.metrics }
/// }
/// ```
pub trait SupervisedActor: Actor<Context = Context<Self>> + Supervised {
    fn metrics(&self) -> &ActorMetrics;
}

/// Starts `make()` under a `Supervisor` on `arbiter` and returns its metered address.
pub fn start_supervised<A, F>(
    arbiter: &ArbiterHandle,
    metrics: ActorMetrics,
    make: F,
) -> MeteredAddr<A>
where
    A: SupervisedActor,
    F: FnOnce(&mut Context<A>) -> A + Send + 'static,
{
    let addr = Supervisor::start_in_arbiter(arbiter, make);
    MeteredAddr::new(addr, metrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct Fragile {
        metrics: ActorMetrics,
        generation: u32,
    }
    impl Actor for Fragile {
        type Context = Context<Self>;
    }
    impl Supervised for Fragile {
        fn restarting(&mut self, _: &mut Context<Self>) {
            self.metrics.restarted();
            self.generation += 1;
        }
    }
    impl SupervisedActor for Fragile {
        fn metrics(&self) -> &ActorMetrics {
            &self.metrics
        }
    }
    #[derive(Message)]
    #[rtype(result = "u32")]
    struct Crash;
    impl Handler<Crash> for Fragile {
        type Result = u32;
        fn handle(&mut self, _: Crash, ctx: &mut Context<Self>) -> u32 {
            let _m = self.metrics.handle();
            ctx.stop();
            self.generation
        }
    }

    #[actix_rt::test]
    async fn a_stopped_actor_is_restarted_and_counted() {
        let metrics = ActorMetrics::new("FragileTestActor");
        let m = metrics.clone();
        let arbiter = Arbiter::current();
        let addr = start_supervised(&arbiter, metrics.clone(), move |_| Fragile {
            metrics: m,
            generation: 0,
        });
        assert_eq!(addr.send(Crash).await.unwrap(), 0);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(addr.send(Crash).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(metrics.restart_count(), 2);
    }
}
