//! The delayed-operation bookkeeping (Kafka's `DelayedOperationPurgatory` with `DelayedProduce`
//! and `DelayedFetch`), pure: operations keyed by topic-partition, completed by high watermark
//! events, by leadership loss, or expired by the actor's timers.

use kactor_protocol::errors;
use std::collections::{HashMap, HashSet};

use crate::partition::core::TopicPartition;

/// An acks=all produce waits until `high_watermark >= required_offset` (last offset + 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceWatch {
    pub tp: TopicPartition,
    pub required_offset: i64,
    /// The high watermark the append itself reported; closes the race with an event sent
    /// before this operation was registered.
    pub observed_high_watermark: i64,
    /// The leader epoch of the append: a wait registered after that leadership ended (the
    /// loss event overtook it) fails at once instead of waiting for events that will never
    /// come, or worse, for a later leadership's high watermark over a log that was truncated
    /// meanwhile (Kafka's `tryCompleteElseWatch` finds the partition no longer led).
    pub leader_epoch: i32,
}

/// A fetch partition: the high watermark the handler's read saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchWatch {
    pub tp: TopicPartition,
    pub observed_high_watermark: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Per partition: NONE, REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER.
    Produce {
        id: u64,
        results: Vec<(TopicPartition, i16)>,
    },
    /// The fetch should re-read and respond (enough bytes, leadership change, or max wait).
    Fetch { id: u64, expired: bool },
}

#[derive(Debug)]
struct DelayedProduce {
    pending: Vec<(TopicPartition, i64)>,
    done: Vec<(TopicPartition, i16)>,
}

#[derive(Debug)]
struct DelayedFetch {
    tps: Vec<TopicPartition>,
    min_bytes: usize,
    accumulated_bytes: usize,
    /// A follower's fetch: it reads up to the log end, so appends (not only high watermark
    /// moves) make bytes readable for it.
    follower: bool,
}

#[derive(Debug, Default)]
pub struct Purgatory {
    high_watermarks: HashMap<TopicPartition, i64>,
    /// Log end offsets leaders reported, for follower fetches (same race rule as above).
    log_ends: HashMap<TopicPartition, i64>,
    produces: HashMap<u64, DelayedProduce>,
    fetches: HashMap<u64, DelayedFetch>,
    watchers: HashMap<TopicPartition, HashSet<u64>>,
    /// Per partition, the newest leader epoch whose leadership ended here.
    lost_leaderships: HashMap<TopicPartition, i32>,
}

impl Purgatory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn delayed_produce_count(&self) -> usize {
        self.produces.len()
    }
    pub fn delayed_fetch_count(&self) -> usize {
        self.fetches.len()
    }

    fn note_hw(&mut self, tp: &TopicPartition, hw: i64) -> i64 {
        let e = self.high_watermarks.entry(tp.clone()).or_insert(hw);
        *e = (*e).max(hw);
        *e
    }

    fn watch(&mut self, tp: &TopicPartition, id: u64) {
        self.watchers.entry(tp.clone()).or_default().insert(id);
    }

    fn unwatch(&mut self, tps: Vec<TopicPartition>, id: u64) {
        for tp in tps {
            if let Some(set) = self.watchers.get_mut(&tp) {
                set.remove(&id);
                if set.is_empty() {
                    self.watchers.remove(&tp);
                }
            }
        }
    }

    /// Parks an acks=all produce; completes it at once if every partition is already there.
    pub fn add_produce(&mut self, id: u64, watches: Vec<ProduceWatch>) -> Option<Completion> {
        let mut op = DelayedProduce {
            pending: Vec::new(),
            done: Vec::new(),
        };
        for w in watches {
            if self
                .lost_leaderships
                .get(&w.tp)
                .is_some_and(|lost| *lost >= w.leader_epoch)
            {
                op.done.push((w.tp, errors::NOT_LEADER_OR_FOLLOWER));
                continue;
            }
            let hw = self.note_hw(&w.tp, w.observed_high_watermark);
            if hw >= w.required_offset {
                op.done.push((w.tp, errors::NONE));
            } else {
                op.pending.push((w.tp, w.required_offset));
            }
        }
        if op.pending.is_empty() {
            return Some(Completion::Produce {
                id,
                results: op.done,
            });
        }
        for (tp, _) in op.pending.clone() {
            self.watch(&tp, id);
        }
        self.produces.insert(id, op);
        None
    }

    /// Parks a long-poll fetch; completes it at once if it already has enough bytes or a
    /// partition's high watermark moved since the handler read it. For a follower's fetch
    /// (`follower`), `observed_high_watermark` is the log end offset its read saw.
    pub fn add_fetch(
        &mut self,
        id: u64,
        watches: Vec<FetchWatch>,
        min_bytes: usize,
        accumulated_bytes: usize,
        follower: bool,
    ) -> Option<Completion> {
        let known = if follower {
            &self.log_ends
        } else {
            &self.high_watermarks
        };
        let moved = watches.iter().any(|w| {
            known
                .get(&w.tp)
                .is_some_and(|hw| *hw > w.observed_high_watermark)
        });
        if accumulated_bytes >= min_bytes || moved {
            return Some(Completion::Fetch { id, expired: false });
        }
        let tps: Vec<TopicPartition> = watches.into_iter().map(|w| w.tp).collect();
        for tp in &tps {
            self.watch(tp, id);
        }
        self.fetches.insert(
            id,
            DelayedFetch {
                tps,
                min_bytes,
                accumulated_bytes,
                follower,
            },
        );
        None
    }

    /// A leader appended: `bytes` more are readable up to `log_end_offset` for followers.
    /// Only follower fetches wake; consumers wait for the high watermark.
    pub fn on_log_end(
        &mut self,
        tp: &TopicPartition,
        log_end_offset: i64,
        bytes: usize,
    ) -> Vec<Completion> {
        let e = self.log_ends.entry(tp.clone()).or_insert(log_end_offset);
        *e = (*e).max(log_end_offset);
        let ids: Vec<u64> = self
            .watchers
            .get(tp)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        for id in ids {
            if let Some(op) = self.fetches.get_mut(&id) {
                if !op.follower {
                    continue;
                }
                op.accumulated_bytes = op.accumulated_bytes.saturating_add(bytes.max(1));
                if op.accumulated_bytes >= op.min_bytes {
                    out.push(self.finish_fetch(id, false));
                }
            }
        }
        out
    }

    /// A partition's high watermark advanced, making `bytes` more bytes readable. Produces it
    /// completes succeed, or get NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR has fallen below
    /// `min.insync.replicas` (`under_min_isr`, Kafka's `checkEnoughReplicasReachOffset`).
    pub fn on_high_watermark(
        &mut self,
        tp: &TopicPartition,
        hw: i64,
        bytes: usize,
        under_min_isr: bool,
    ) -> Vec<Completion> {
        let code = if under_min_isr {
            errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        } else {
            errors::NONE
        };
        self.note_hw(tp, hw);
        let ids: Vec<u64> = self
            .watchers
            .get(tp)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        for id in ids {
            if let Some(op) = self.produces.get_mut(&id) {
                let mut i = 0;
                while i < op.pending.len() {
                    if op.pending[i].0 == *tp && hw >= op.pending[i].1 {
                        let (t, _) = op.pending.swap_remove(i);
                        op.done.push((t, code));
                    } else {
                        i += 1;
                    }
                }
                if op.pending.is_empty() {
                    let op = self.produces.remove(&id).expect("present");
                    self.unwatch(op.done.iter().map(|(t, _)| t.clone()).collect(), id);
                    out.push(Completion::Produce {
                        id,
                        results: op.done,
                    });
                }
            } else if let Some(op) = self.fetches.get_mut(&id) {
                op.accumulated_bytes = op.accumulated_bytes.saturating_add(bytes.max(1));
                if op.accumulated_bytes >= op.min_bytes {
                    out.push(self.finish_fetch(id, false));
                }
            }
        }
        out
    }

    /// The leadership of `tp` in `leader_epoch` (and any before) ended here: waiting produces
    /// fail for it, fetches answer now (Kafka's DelayedProduce / DelayedFetch check leadership
    /// in `tryComplete`), and later waits from those epochs fail on arrival. A `deleted`
    /// replica's epochs are forgotten (a topic of the same name starts over at 0).
    pub fn on_leadership_lost(
        &mut self,
        tp: &TopicPartition,
        leader_epoch: i32,
        deleted: bool,
    ) -> Vec<Completion> {
        if deleted {
            self.lost_leaderships.remove(tp);
        } else {
            let lost = self
                .lost_leaderships
                .entry(tp.clone())
                .or_insert(leader_epoch);
            *lost = (*lost).max(leader_epoch);
        }
        self.high_watermarks.remove(tp);
        self.log_ends.remove(tp);
        let ids: Vec<u64> = self
            .watchers
            .get(tp)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        for id in ids {
            if let Some(op) = self.produces.get_mut(&id) {
                op.pending.retain(|(t, _)| t != tp);
                op.done.push((tp.clone(), errors::NOT_LEADER_OR_FOLLOWER));
                if op.pending.is_empty() {
                    let op = self.produces.remove(&id).expect("present");
                    self.unwatch(op.done.iter().map(|(t, _)| t.clone()).collect(), id);
                    out.push(Completion::Produce {
                        id,
                        results: op.done,
                    });
                }
            } else if self.fetches.contains_key(&id) {
                out.push(self.finish_fetch(id, false));
            }
        }
        self.watchers.remove(tp);
        out
    }

    fn finish_fetch(&mut self, id: u64, expired: bool) -> Completion {
        if let Some(op) = self.fetches.remove(&id) {
            self.unwatch(op.tps, id);
        }
        Completion::Fetch { id, expired }
    }

    /// Every parked operation ends now: produces with REQUEST_TIMED_OUT where still waiting,
    /// fetches as expired (the actor restarts and its expiry timers are gone).
    pub fn expire_all(&mut self) -> Vec<Completion> {
        let produces: Vec<u64> = self.produces.keys().copied().collect();
        let fetches: Vec<u64> = self.fetches.keys().copied().collect();
        let mut out: Vec<Completion> = produces
            .into_iter()
            .filter_map(|id| self.expire_produce(id))
            .collect();
        out.extend(fetches.into_iter().filter_map(|id| self.expire_fetch(id)));
        out
    }

    /// `request.timeout.ms` passed: partitions still waiting get REQUEST_TIMED_OUT.
    pub fn expire_produce(&mut self, id: u64) -> Option<Completion> {
        let mut op = self.produces.remove(&id)?;
        let all = (op.pending.iter().map(|(t, _)| t.clone()))
            .chain(op.done.iter().map(|(t, _)| t.clone()))
            .collect();
        self.unwatch(all, id);
        for (tp, _) in op.pending.drain(..) {
            op.done.push((tp, errors::REQUEST_TIMED_OUT));
        }
        Some(Completion::Produce {
            id,
            results: op.done,
        })
    }

    /// `max_wait_ms` passed.
    pub fn expire_fetch(&mut self, id: u64) -> Option<Completion> {
        self.fetches
            .contains_key(&id)
            .then(|| self.finish_fetch(id, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    /// Completions in operation id order.
    fn by_id(mut c: Vec<Completion>) -> Vec<Completion> {
        c.sort_by_key(|c| match c {
            Completion::Produce { id, .. } | Completion::Fetch { id, .. } => *id,
        });
        c
    }

    fn pw(p: i32, required: i64, observed: i64) -> ProduceWatch {
        ProduceWatch {
            tp: tp(p),
            required_offset: required,
            observed_high_watermark: observed,
            leader_epoch: 0,
        }
    }

    #[test]
    fn produce_already_satisfied_completes_at_once() {
        let mut g = Purgatory::new();
        let c = g.add_produce(1, vec![pw(0, 5, 5)]).unwrap();
        assert_eq!(
            c,
            Completion::Produce {
                id: 1,
                results: vec![(tp(0), errors::NONE)]
            }
        );
        assert_eq!(g.delayed_produce_count(), 0);
    }

    #[test]
    fn produce_completes_when_every_partition_reaches_its_offset() {
        let mut g = Purgatory::new();
        assert!(g.add_produce(1, vec![pw(0, 5, 3), pw(1, 2, 0)]).is_none());
        assert!(g.on_high_watermark(&tp(0), 5, 10, false).is_empty());
        let c = g.on_high_watermark(&tp(1), 2, 10, false);
        assert_eq!(c.len(), 1);
        let Completion::Produce { results, .. } = &c[0] else {
            panic!()
        };
        assert!(results.iter().all(|(_, e)| *e == errors::NONE));
        assert_eq!(g.delayed_produce_count(), 0);
    }

    #[test]
    fn produce_timeout_marks_waiting_partitions() {
        let mut g = Purgatory::new();
        g.add_produce(1, vec![pw(0, 5, 3), pw(1, 2, 0)]);
        g.on_high_watermark(&tp(0), 5, 10, false);
        let Some(Completion::Produce { mut results, .. }) = g.expire_produce(1) else {
            panic!()
        };
        results.sort();
        assert_eq!(
            results,
            vec![(tp(0), errors::NONE), (tp(1), errors::REQUEST_TIMED_OUT)]
        );
        assert!(g.expire_produce(1).is_none());
        assert!(g.on_high_watermark(&tp(1), 9, 1, false).is_empty());
    }

    #[test]
    fn an_event_before_registration_is_not_lost() {
        let mut g = Purgatory::new();
        g.on_high_watermark(&tp(0), 7, 100, false);
        assert!(g.add_produce(1, vec![pw(0, 7, 3)]).is_some());
        assert!(g
            .add_fetch(
                2,
                vec![FetchWatch {
                    tp: tp(0),
                    observed_high_watermark: 3
                }],
                10,
                0,
                false
            )
            .is_some());
    }

    #[test]
    fn fetch_waits_for_min_bytes_or_expiry() {
        let mut g = Purgatory::new();
        let w = || {
            vec![FetchWatch {
                tp: tp(0),
                observed_high_watermark: 0,
            }]
        };
        assert!(g.add_fetch(1, w(), 100, 0, false).is_none());
        assert!(g.on_high_watermark(&tp(0), 1, 40, false).is_empty());
        assert_eq!(
            g.on_high_watermark(&tp(0), 2, 70, false),
            vec![Completion::Fetch {
                id: 1,
                expired: false
            }]
        );
        assert!(g
            .add_fetch(
                2,
                vec![FetchWatch {
                    tp: tp(0),
                    observed_high_watermark: 2
                }],
                100,
                0,
                false
            )
            .is_none());
        assert_eq!(
            g.expire_fetch(2),
            Some(Completion::Fetch {
                id: 2,
                expired: true
            })
        );
        assert_eq!(g.delayed_fetch_count(), 0);
        // Enough bytes at registration: no wait.
        assert!(g.add_fetch(3, w(), 1, 1, false).is_some());
    }

    #[test]
    fn a_produce_completed_under_min_isr_is_not_enough_replicas_after_append() {
        let mut g = Purgatory::new();
        assert!(g.add_produce(1, vec![pw(0, 5, 3)]).is_none());
        assert_eq!(
            g.on_high_watermark(&tp(0), 5, 10, true),
            vec![Completion::Produce {
                id: 1,
                results: vec![(tp(0), errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND)]
            }]
        );
    }

    #[test]
    fn follower_fetches_wake_on_appends_consumer_fetches_do_not() {
        let mut g = Purgatory::new();
        let w = |observed| {
            vec![FetchWatch {
                tp: tp(0),
                observed_high_watermark: observed,
            }]
        };
        assert!(g.add_fetch(1, w(0), 1, 0, false).is_none());
        assert!(g.add_fetch(2, w(10), 1, 0, true).is_none());
        assert_eq!(
            g.on_log_end(&tp(0), 11, 50),
            vec![Completion::Fetch {
                id: 2,
                expired: false
            }]
        );
        assert_eq!(g.delayed_fetch_count(), 1, "the consumer still waits");
        // A follower parking after an append it did not see completes at once.
        assert!(g.add_fetch(3, w(10), 1, 0, true).is_some());
    }

    #[test]
    fn leadership_loss_completes_waiters() {
        let mut g = Purgatory::new();
        g.add_produce(1, vec![pw(0, 5, 3)]);
        g.add_fetch(
            2,
            vec![FetchWatch {
                tp: tp(0),
                observed_high_watermark: 3,
            }],
            100,
            0,
            false,
        );
        let c = by_id(g.on_leadership_lost(&tp(0), 0, false));
        assert_eq!(
            c,
            vec![
                Completion::Produce {
                    id: 1,
                    results: vec![(tp(0), errors::NOT_LEADER_OR_FOLLOWER)]
                },
                Completion::Fetch {
                    id: 2,
                    expired: false
                }
            ]
        );
    }

    #[test]
    fn a_wait_registered_after_its_leadership_ended_fails_at_once() {
        let mut g = Purgatory::new();
        // Appended in epoch 0; the loss event overtook the registration.
        assert!(g.on_leadership_lost(&tp(0), 0, false).is_empty());
        let late = |epoch| ProduceWatch {
            leader_epoch: epoch,
            ..pw(0, 5, 3)
        };
        assert_eq!(
            g.add_produce(1, vec![late(0), pw(1, 5, 5)]),
            Some(Completion::Produce {
                id: 1,
                results: vec![
                    (tp(0), errors::NOT_LEADER_OR_FOLLOWER),
                    (tp(1), errors::NONE)
                ]
            })
        );
        // A later leadership's waits park as usual, and a later high watermark of that
        // leadership never completes an older epoch's wait.
        assert_eq!(g.add_produce(2, vec![late(2)]), None);
        assert_eq!(g.delayed_produce_count(), 1);
        // A deleted replica forgets its epochs: a topic of the same name starts at 0 again.
        g.on_leadership_lost(&tp(0), 2, true);
        assert_eq!(g.add_produce(3, vec![late(0)]), None);
    }

    #[test]
    fn a_restart_ends_every_parked_operation() {
        let mut g = Purgatory::new();
        assert_eq!(g.add_produce(1, vec![pw(0, 5, 3)]), None);
        g.add_fetch(
            2,
            vec![FetchWatch {
                tp: tp(1),
                observed_high_watermark: 3,
            }],
            100,
            0,
            false,
        );
        let c = by_id(g.expire_all());
        assert_eq!(
            c,
            vec![
                Completion::Produce {
                    id: 1,
                    results: vec![(tp(0), errors::REQUEST_TIMED_OUT)]
                },
                Completion::Fetch {
                    id: 2,
                    expired: true
                }
            ]
        );
        assert_eq!((g.delayed_produce_count(), g.delayed_fetch_count()), (0, 0));
    }
}
