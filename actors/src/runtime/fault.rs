//! Fatal faults (Kafka's `ProcessTerminatingFaultHandler`): a failure the node cannot serve
//! through, such as an I/O error on the `__cluster_metadata` log. Kafka halts the process
//! when its Raft I/O thread fails; kactor reports the fault here and the process (`main`)
//! stops with a non-zero exit code and the reason in its log, instead of panicking or retrying
//! an append that can only fail again.
//!
//! One process-wide, write-once signal rather than a wired `Recipient`: it must reach the
//! process from wherever the fault happens, and it carries nothing but the reason.

use std::sync::OnceLock;

use tokio::sync::watch;

static FATAL: OnceLock<watch::Sender<Option<String>>> = OnceLock::new();

fn channel() -> &'static watch::Sender<Option<String>> {
    FATAL.get_or_init(|| watch::channel(None).0)
}

/// Reports a fault the node cannot continue after. The first reason is kept.
pub fn report_fatal(reason: impl Into<String>) {
    let reason = reason.into();
    channel().send_if_modified(|current| {
        if current.is_none() {
            *current = Some(reason);
            true
        } else {
            false
        }
    });
}

/// The first fatal fault reported, if any.
pub fn fatal_reason() -> Option<String> {
    channel().borrow().clone()
}

/// Resolves with the reason of the first fatal fault (at once if one was already reported).
pub async fn fatal_fault() -> String {
    let mut rx = channel().subscribe();
    loop {
        if let Some(reason) = rx.borrow_and_update().clone() {
            return reason;
        }
        if rx.changed().await.is_err() {
            // The sender lives in a static and is never dropped.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_reason_wins_and_late_waiters_see_it() {
        let waiter = tokio::spawn(fatal_fault());
        report_fatal("metadata log: No space left on device");
        report_fatal("a later fault");
        assert_eq!(
            waiter.await.unwrap(),
            "metadata log: No space left on device"
        );
        assert_eq!(fatal_fault().await, "metadata log: No space left on device");
        assert_eq!(
            fatal_reason().as_deref(),
            Some("metadata log: No space left on device")
        );
    }
}
