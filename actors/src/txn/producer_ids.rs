//! Producer ids for InitProducerId (Kafka's `RPCProducerIdManager`): ids come from blocks of
//! 1000 the controller allocates with AllocateProducerIds (a `ProducerIdsRecord` in the metadata
//! log), so they never repeat across restarts or brokers. The next block is fetched once 90% of
//! the current one is used, so a busy broker rarely waits. Pure core: no actix, no clock.

use std::collections::VecDeque;

/// Kafka's `ProducerIdManager` prefetch threshold: ask for the next block at 90% use.
const PREFETCH_PERCENT: i64 = 90;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub first_id: i64,
    pub size: i32,
}

impl ProducerIdBlock {
    fn end(&self) -> i64 {
        self.first_id + self.size as i64
    }
}

/// What the actor must do after a call: ask the controller for a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBlock(pub bool);

/// The id blocks of one broker and the callers waiting for an id.
#[derive(Debug)]
pub struct ProducerIdManager<W> {
    current: Option<ProducerIdBlock>,
    next_id: i64,
    prefetched: Option<ProducerIdBlock>,
    requesting: bool,
    waiters: VecDeque<W>,
    max_waiters: usize,
}

/// Why no id can be given now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerIdUnavailable {
    /// Too many callers already wait for a block: retriable (Kafka answers
    /// COORDINATOR_LOAD_IN_PROGRESS while its block request is in flight).
    #[error("producer id block request in flight and the wait queue is full")]
    Busy,
    /// The controller refused or could not be reached.
    #[error("the controller could not allocate producer ids (error {0})")]
    Failed(i16),
}

impl<W> ProducerIdManager<W> {
    pub fn new(max_waiters: usize) -> Self {
        ProducerIdManager {
            current: None,
            next_id: 0,
            prefetched: None,
            requesting: false,
            waiters: VecDeque::new(),
            max_waiters,
        }
    }

    fn take_id(&mut self) -> Option<i64> {
        loop {
            if let Some(block) = self.current {
                if self.next_id < block.end() {
                    let id = self.next_id;
                    self.next_id += 1;
                    return Some(id);
                }
            }
            let next = self.prefetched.take()?;
            self.current = Some(next);
            self.next_id = next.first_id;
        }
    }

    fn wants_prefetch(&self) -> bool {
        if self.requesting || self.prefetched.is_some() {
            return false;
        }
        match self.current {
            None => true,
            Some(b) => {
                let used = self.next_id - b.first_id;
                used * 100 >= b.size as i64 * PREFETCH_PERCENT
            }
        }
    }

    fn maybe_request(&mut self) -> RequestBlock {
        if self.wants_prefetch() {
            self.requesting = true;
            RequestBlock(true)
        } else {
            RequestBlock(false)
        }
    }

    /// Hands out an id now (`Ok(Some)`), or parks `waiter` until a block arrives (`Ok(None)`).
    pub fn generate(
        &mut self,
        waiter: W,
    ) -> (
        Result<Option<(W, i64)>, ProducerIdUnavailable>,
        RequestBlock,
    ) {
        if let Some(id) = self.take_id() {
            let req = self.maybe_request();
            return (Ok(Some((waiter, id))), req);
        }
        if self.waiters.len() >= self.max_waiters {
            return (Err(ProducerIdUnavailable::Busy), self.maybe_request());
        }
        self.waiters.push_back(waiter);
        (Ok(None), self.maybe_request())
    }

    /// The controller allocated `block`: returns the waiters served from it, and whether to ask
    /// for another block (many waiters, or the new block already 90% used).
    pub fn on_block(&mut self, block: ProducerIdBlock) -> (Vec<(W, i64)>, RequestBlock) {
        self.requesting = false;
        if block.size <= 0 {
            let failed = self.on_block_failed(-1);
            return (Vec::new(), failed.1);
        }
        self.prefetched = Some(block);
        let mut served = Vec::new();
        while !self.waiters.is_empty() {
            let Some(id) = self.take_id() else { break };
            let w = self.waiters.pop_front().expect("non-empty");
            served.push((w, id));
        }
        (served, self.maybe_request())
    }

    /// The block request failed: every waiter gets the error (the client retries).
    pub fn on_block_failed(&mut self, error_code: i16) -> (Vec<W>, RequestBlock) {
        self.requesting = false;
        let _ = error_code;
        (self.waiters.drain(..).collect(), RequestBlock(false))
    }

    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_call_waits_for_a_block_then_ids_are_sequential() {
        let mut m = ProducerIdManager::new(10);
        let (r, req) = m.generate("a");
        assert_eq!(r, Ok(None));
        assert_eq!(req, RequestBlock(true));
        // A second caller while the request is in flight does not ask again.
        let (r, req) = m.generate("b");
        assert_eq!(r, Ok(None));
        assert_eq!(req, RequestBlock(false));
        let (served, req) = m.on_block(ProducerIdBlock {
            first_id: 1000,
            size: 1000,
        });
        assert_eq!(served, vec![("a", 1000), ("b", 1001)]);
        assert_eq!(req, RequestBlock(false));
        assert_eq!(m.generate("c").0, Ok(Some(("c", 1002))));
    }

    #[test]
    fn prefetches_at_ninety_percent_and_switches_blocks() {
        let mut m = ProducerIdManager::new(10);
        let _ = m.generate(0);
        m.on_block(ProducerIdBlock {
            first_id: 0,
            size: 10,
        });
        // ids 0..=8 handed out: the 9th id makes 90% used.
        let mut asked = false;
        for _ in 0..8 {
            let (_, req) = m.generate(0);
            asked |= req.0;
        }
        assert!(asked, "prefetch requested at 90%");
        let (r, req) = m.generate(0);
        assert_eq!(r, Ok(Some((0, 9))));
        assert!(!req.0, "already requesting");
        let (r, _) = m.generate(0);
        assert_eq!(r, Ok(None), "block exhausted, waits");
        let (served, _) = m.on_block(ProducerIdBlock {
            first_id: 10,
            size: 10,
        });
        assert_eq!(served, vec![(0, 10)]);
    }

    #[test]
    fn failure_releases_waiters_and_full_queue_is_busy() {
        let mut m = ProducerIdManager::new(1);
        let _ = m.generate(1);
        assert_eq!(m.generate(2).0, Err(ProducerIdUnavailable::Busy));
        let (released, req) = m.on_block_failed(15);
        assert_eq!(released, vec![1]);
        assert!(!req.0);
        // The next call asks again.
        assert_eq!(m.generate(3).1, RequestBlock(true));
    }
}
