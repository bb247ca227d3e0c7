//! Fault injection for supervision tests: a test arms an actor type, and the next `n` messages
//! that type handles panic inside the handler (or hold their thread), exactly as a bug would.
//!
//! Off unless the process was started with `KACTOR_FAULT_INJECTION=1` in its environment: then
//! the metrics endpoint takes `POST /debug/panic?actor=PartitionActor&count=1` (see
//! `metrics::http`); otherwise that endpoint does not exist. A run-time switch rather than a
//! cargo feature, so that the tests run the binary that ships and CI compiles the actors crate
//! once instead of twice. The cost when off is one load of an initialised flag per handler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that turns fault injection on, read once.
pub const ENV: &str = "KACTOR_FAULT_INJECTION";

static ENABLED: OnceLock<bool> = OnceLock::new();
/// Set once anything was armed: until then handlers skip the table's lock.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Whether this process can inject faults (`KACTOR_FAULT_INJECTION=1` at start).
pub fn enabled() -> bool {
    *ENABLED.get_or_init(|| std::env::var(ENV).is_ok_and(|v| v == "1"))
}

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

fn arm_fault(actor: &str, count: u32, stall: Option<Duration>) {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(actor.to_string(), Fault { count, stall });
    ARMED.store(true, Ordering::Release);
}

/// Called by the runtime before every handler: panics (or stalls) if a test armed this actor
/// type.
#[inline]
pub fn maybe_panic(actor: &str) {
    if !ARMED.load(Ordering::Acquire) {
        return;
    }
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

/// Arms from the query of `POST /debug/panic?actor=NAME&count=N[&stall_ms=MS]` (count defaults
/// to 1; with `stall_ms` the handlers hold their thread that long instead of panicking). The
/// answer is the text the endpoint replies with; `None` when fault injection is off, so that
/// the endpoint does not exist at all then.
pub fn arm_from_query(query: &str) -> Option<Result<String, String>> {
    if !enabled() {
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
    arm_fault(&actor, count, stall_ms.map(Duration::from_millis));
    Some(Ok(match stall_ms {
        Some(ms) => format!("{actor} holds its thread {ms} ms in its next {count} message(s)"),
        None => format!("{actor} panics on its next {count} message(s)"),
    }))
}
