//! Fault injection for supervision tests (`fault-injection` cargo feature, off in release
//! builds): a test arms an actor type, and the next `n` messages that type handles panic inside
//! the handler, exactly as a bug would. Without the feature every call compiles to nothing.
//!
//! Armed through [`arm`] in Rust tests, or over the metrics endpoint
//! (`POST /debug/panic?actor=PartitionActor&count=1`, see `metrics::http`) in process tests.

#[cfg(feature = "fault-injection")]
mod armed {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::Duration;

    /// What the next `count` handlers of an actor type do: panic, or hold their thread.
    #[derive(Clone, Copy)]
    struct Fault {
        count: u32,
        stall: Option<Duration>,
    }

    fn table() -> &'static Mutex<HashMap<String, Fault>> {
        static T: OnceLock<Mutex<HashMap<String, Fault>>> = OnceLock::new();
        T.get_or_init(Default::default)
    }

    pub fn arm(actor: &str, count: u32) {
        arm_fault(actor, count, None)
    }

    pub fn arm_fault(actor: &str, count: u32, stall: Option<Duration>) {
        table()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(actor.to_string(), Fault { count, stall });
    }

    pub fn maybe_panic(actor: &str) {
        let fire = {
            let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
            match t.get_mut(actor) {
                Some(f) if f.count > 0 => {
                    f.count -= 1;
                    Some(f.stall)
                }
                _ => None,
            }
        };
        match fire {
            Some(Some(stall)) => std::thread::sleep(stall),
            Some(None) => panic!("fault injection: {actor} panics on this message"),
            None => {}
        }
    }
}

/// Makes the next `count` messages handled by actor type `actor` panic.
#[cfg(feature = "fault-injection")]
pub use armed::arm;

/// Called by the runtime before every handler: panics if a test armed this actor type.
#[inline(always)]
pub fn maybe_panic(_actor: &str) {
    #[cfg(feature = "fault-injection")]
    armed::maybe_panic(_actor);
}

/// Arms from the query of `POST /debug/panic?actor=NAME&count=N[&stall_ms=MS]` (count defaults
/// to 1; with `stall_ms` the handlers hold their thread that long instead of panicking). The
/// answer is the text the endpoint replies with; `None` when this build cannot inject faults,
/// so that the endpoint does not exist at all in release builds.
pub fn arm_from_query(query: &str) -> Option<Result<String, String>> {
    if !ENABLED {
        return None;
    }
    let mut actor = None;
    let mut count = 1u32;
    let mut stall_ms: Option<u64> = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("actor", v)) if !v.is_empty() => actor = Some(v.to_string()),
            Some(("count", v)) => match v.parse() {
                Ok(n) => count = n,
                Err(_) => return Some(Err(format!("count must be a number, not {v:?}"))),
            },
            Some(("stall_ms", v)) => match v.parse() {
                Ok(n) => stall_ms = Some(n),
                Err(_) => return Some(Err(format!("stall_ms must be a number, not {v:?}"))),
            },
            _ => return Some(Err(format!("unknown parameter {pair:?}"))),
        }
    }
    let Some(actor) = actor else {
        return Some(Err("actor=NAME is required".into()));
    };
    #[cfg(feature = "fault-injection")]
    armed::arm_fault(
        &actor,
        count,
        stall_ms.map(std::time::Duration::from_millis),
    );
    Some(Ok(match stall_ms {
        Some(ms) => format!("{actor} holds its thread {ms} ms in its next {count} message(s)"),
        None => format!("{actor} panics on its next {count} message(s)"),
    }))
}

/// Whether this build can inject faults.
pub const ENABLED: bool = cfg!(feature = "fault-injection");
