//! Outbound request bookkeeping per destination (Kafka's `RequestManager`): at most one request
//! in flight per node, a request timeout after which the node is ready again, and a retry
//! backoff after a failed response. Responses whose correlation id is not the one in flight are
//! ignored, which is what makes duplicated or late responses harmless.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Awaiting { correlation_id: u64, sent_ms: i64 },
    BackingOff { failed_ms: i64 },
}

#[derive(Debug, Clone)]
pub struct RequestManager {
    conns: BTreeMap<i32, Conn>,
    request_timeout_ms: i64,
    retry_backoff_ms: i64,
    bootstrap: Vec<i32>,
}

impl RequestManager {
    pub fn new(bootstrap: Vec<i32>, request_timeout_ms: i64, retry_backoff_ms: i64) -> Self {
        RequestManager {
            conns: BTreeMap::new(),
            request_timeout_ms,
            retry_backoff_ms,
            bootstrap,
        }
    }

    fn timed_out(&self, c: &Conn, now: i64) -> bool {
        matches!(c, Conn::Awaiting { sent_ms, .. } if now >= sent_ms + self.request_timeout_ms)
    }
    fn backoff_done(&self, c: &Conn, now: i64) -> bool {
        matches!(c, Conn::BackingOff { failed_ms } if now >= failed_ms + self.retry_backoff_ms)
    }

    pub fn is_ready(&self, node: i32, now: i64) -> bool {
        match self.conns.get(&node) {
            None => true,
            Some(c) => self.timed_out(c, now) || self.backoff_done(c, now),
        }
    }
    pub fn is_backing_off(&self, node: i32, now: i64) -> bool {
        matches!(self.conns.get(&node), Some(c @ Conn::BackingOff { .. }) if !self.backoff_done(c, now))
    }
    pub fn has_timed_out(&self, node: i32, now: i64) -> bool {
        self.conns
            .get(&node)
            .is_some_and(|c| self.timed_out(c, now))
    }
    pub fn has_any_inflight(&self, now: i64) -> bool {
        self.conns
            .values()
            .any(|c| matches!(c, Conn::Awaiting { .. }) && !self.timed_out(c, now))
    }
    /// When the node can next be sent to (0 = now).
    pub fn wait_ms(&self, node: i32, now: i64) -> i64 {
        match self.conns.get(&node) {
            None => 0,
            Some(Conn::Awaiting { sent_ms, .. }) => {
                (sent_ms + self.request_timeout_ms - now).max(0)
            }
            Some(Conn::BackingOff { failed_ms }) => {
                (failed_ms + self.retry_backoff_ms - now).max(0)
            }
        }
    }

    pub fn is_response_expected(&self, node: i32, correlation_id: u64) -> bool {
        matches!(self.conns.get(&node), Some(Conn::Awaiting { correlation_id: c, .. }) if *c == correlation_id)
    }

    pub fn on_sent(&mut self, node: i32, correlation_id: u64, now: i64) {
        self.conns.insert(
            node,
            Conn::Awaiting {
                correlation_id,
                sent_ms: now,
            },
        );
    }

    /// A response (or a transport failure) for the request in flight: success frees the node,
    /// failure backs it off.
    pub fn on_result(&mut self, node: i32, correlation_id: u64, success: bool, now: i64) {
        if !self.is_response_expected(node, correlation_id) {
            return;
        }
        if success {
            self.conns.remove(&node);
        } else {
            self.conns.insert(node, Conn::BackingOff { failed_ms: now });
        }
    }

    pub fn reset(&mut self, node: i32) {
        self.conns.remove(&node);
    }
    pub fn reset_all(&mut self) {
        self.conns.clear();
    }

    /// Kafka's `findReadyBootstrapServer`: none while any request is in flight; otherwise the
    /// first ready bootstrap server from a random starting point.
    pub fn ready_bootstrap(&self, now: i64, start: usize) -> Option<i32> {
        if self.has_any_inflight(now) || self.bootstrap.is_empty() {
            return None;
        }
        let n = self.bootstrap.len();
        (0..n)
            .map(|i| self.bootstrap[(start + i) % n])
            .find(|b| self.is_ready(*b, now))
    }
    pub fn bootstrap_len(&self) -> usize {
        self.bootstrap.len()
    }
    /// Kafka's `backoffBeforeAvailableBootstrapServer`.
    pub fn backoff_before_bootstrap(&self, now: i64) -> i64 {
        self.bootstrap
            .iter()
            .map(|b| self.wait_ms(*b, now))
            .min()
            .unwrap_or(i64::MAX)
    }
}
