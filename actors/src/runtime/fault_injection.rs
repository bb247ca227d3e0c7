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

    fn table() -> &'static Mutex<HashMap<String, u32>> {
        static T: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
        T.get_or_init(Default::default)
    }

    pub fn arm(actor: &str, count: u32) {
        table()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(actor.to_string(), count);
    }

    pub fn maybe_panic(actor: &str) {
        let fire = {
            let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
            match t.get_mut(actor) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        };
        if fire {
            panic!("fault injection: {actor} panics on this message");
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

/// Arms from the query of `POST /debug/panic?actor=NAME&count=N` (count defaults to 1). The
/// answer is the text the endpoint replies with; `None` when this build cannot inject faults,
/// so that the endpoint does not exist at all in release builds.
pub fn arm_from_query(query: &str) -> Option<Result<String, String>> {
    if !ENABLED {
        return None;
    }
    let mut actor = None;
    let mut count = 1u32;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("actor", v)) if !v.is_empty() => actor = Some(v.to_string()),
            Some(("count", v)) => match v.parse() {
                Ok(n) => count = n,
                Err(_) => return Some(Err(format!("count must be a number, not {v:?}"))),
            },
            _ => return Some(Err(format!("unknown parameter {pair:?}"))),
        }
    }
    let Some(actor) = actor else {
        return Some(Err("actor=NAME is required".into()));
    };
    #[cfg(feature = "fault-injection")]
    arm(&actor, count);
    Some(Ok(format!("{actor} panics on its next {count} message(s)")))
}

/// Whether this build can inject faults.
pub const ENABLED: bool = cfg!(feature = "fault-injection");
