//! Stuck handlers: every handler run by the runtime ([`super::run_caught`]) is recorded in its
//! thread's slot while it runs, and a watchdog thread reports a handler that has held its
//! thread past [`STUCK_AFTER`]: one error line naming the actor type and the message, the
//! `kactor_actor_stuck_handlers` gauge while it lasts, and a line when it finally returns.
//! An actor's thread runs its other actors too, so one stuck handler stalls all of them; the
//! report is what tells an operator which one.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus::IntGauge;

/// How long one handler may hold its thread before it is reported.
pub const STUCK_AFTER: Duration = Duration::from_secs(5);

/// What a thread is handling now.
struct Running {
    actor: &'static str,
    what: &'static str,
    since: Instant,
    reported: bool,
}

type Slot = Arc<Mutex<Option<Running>>>;

fn slots() -> &'static Mutex<Vec<Slot>> {
    static SLOTS: OnceLock<Mutex<Vec<Slot>>> = OnceLock::new();
    SLOTS.get_or_init(Default::default)
}

thread_local! {
    static MINE: Slot = {
        let slot = Slot::default();
        slots().lock().unwrap_or_else(|e| e.into_inner()).push(slot.clone());
        slot
    };
}

/// Records that this thread runs `actor`'s handler for `what` until the guard drops.
pub(crate) fn enter(actor: &'static str, what: &'static str) -> Guard {
    MINE.with(|slot| {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Running {
            actor,
            what,
            since: Instant::now(),
            reported: false,
        });
        Guard(slot.clone())
    })
}

pub(crate) struct Guard(Slot);

impl Drop for Guard {
    fn drop(&mut self) {
        let done = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(r) = done.filter(|r| r.reported) {
            stuck_gauge().dec();
            tracing::warn!(
                actor = r.actor,
                "{} finished handling {} after {:.1} s",
                r.actor,
                r.what,
                r.since.elapsed().as_secs_f64()
            );
        }
    }
}

fn stuck_gauge() -> &'static IntGauge {
    static G: OnceLock<IntGauge> = OnceLock::new();
    G.get_or_init(|| {
        crate::metrics::register(
            IntGauge::new(
                "kactor_actor_stuck_handlers",
                "Handlers that have held their thread longer than 5 s, now.",
            )
            .expect("a valid metric"),
        )
    })
}

/// One pass over the slots: reports the handlers running longer than `after`, once each.
fn check(after: Duration) {
    let slots = slots().lock().unwrap_or_else(|e| e.into_inner()).clone();
    for slot in slots {
        let mut running = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = running.as_mut() {
            if !r.reported && r.since.elapsed() >= after {
                r.reported = true;
                stuck_gauge().inc();
                tracing::error!(
                    actor = r.actor,
                    "{} has been handling {} for {:.1} s: its thread and every actor on it are stalled",
                    r.actor,
                    r.what,
                    r.since.elapsed().as_secs_f64()
                );
            }
        }
    }
}

/// Starts the watchdog thread (once per process).
pub fn start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        stuck_gauge();
        std::thread::Builder::new()
            .name("kactor-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_secs(1));
                check(STUCK_AFTER);
            })
            .expect("the watchdog thread starts");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported_here() -> Option<bool> {
        MINE.with(|slot| {
            slot.lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|r| r.reported)
        })
    }

    #[test]
    fn a_long_handler_is_reported_once_and_cleared_when_it_returns() {
        let guard = enter("WatchdogTestActor", "SlowMessage");
        check(Duration::from_secs(3600));
        assert_eq!(reported_here(), Some(false), "not yet past the bound");
        check(Duration::ZERO);
        assert_eq!(reported_here(), Some(true));
        drop(guard);
        assert_eq!(reported_here(), None, "cleared when the handler returns");
    }
}
