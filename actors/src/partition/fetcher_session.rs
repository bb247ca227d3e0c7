//! The follower's side of an incremental fetch session (KIP-227; Kafka's
//! `FetchSessionHandler`, which its replica fetchers use): after one full fetch the leader
//! keeps the fetcher's partition set, so later fetches list only partitions whose fetch state
//! changed (and the ones left out since, as forgotten), and the leader answers only partitions
//! with news. With many partitions and little traffic this keeps every request and response
//! small instead of naming every partition twice a round. Pure: the fetcher carries it from
//! round to round.

use std::collections::{HashMap, HashSet};

use kactor_protocol::{errors, Uuid};

use super::core::TopicPartition;
use super::fetch_session::{INITIAL_EPOCH, INVALID_SESSION_ID};

/// What a fetch request says about one partition; a partition whose state is unchanged since
/// the last request the leader accepted is left out (Kafka's `PartitionData` equality).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentPartition {
    pub topic_id: Uuid,
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    pub high_watermark: i64,
}

/// One request's session fields and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    pub session_id: i32,
    pub epoch: i32,
    /// Partitions to list in the request (all of them in a full fetch).
    pub include: HashSet<TopicPartition>,
    /// Partitions the leader's session has that this round leaves out, and ones whose topic
    /// was re-created under the same name (the old id is forgotten, the new one listed).
    pub forgotten: Vec<(TopicPartition, Uuid)>,
}

impl SessionRequest {
    pub fn is_full(&self) -> bool {
        self.epoch == INITIAL_EPOCH
    }
}

/// How to go on after the leader's answer to a sessioned fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAnswer {
    /// The answer's partitions apply.
    Use,
    /// The leader lost the session or disagreed on its epoch: the next fetch, at once, is a
    /// full one in a new session. Nothing in the answer applies.
    StartOver,
    /// Another top-level error: nothing applies, the partitions back off as for a refused
    /// sessionless fetch (the next fetch is a full one in a new session too).
    Refused,
}

#[derive(Debug, Default)]
pub struct FollowerSession {
    /// The leader's session id; 0: none yet (the next fetch is full).
    id: i32,
    /// The epoch the next incremental fetch carries.
    epoch: i32,
    /// The next fetch closes the session `id` and opens a new one (after an error).
    close_existing: bool,
    /// The partitions the leader's session holds, as last sent.
    sent: HashMap<TopicPartition, SentPartition>,
    /// Partitions of the session whose last answer failed or could not be applied (see
    /// [`FollowerSession::answer_failed`]).
    failed: HashSet<TopicPartition>,
}

impl FollowerSession {
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The session fields for a fetch of `next` (every partition this round fetches).
    pub fn build(&mut self, next: &[(TopicPartition, SentPartition)]) -> SessionRequest {
        let full = self.id == INVALID_SESSION_ID
            || self.close_existing
            || next.iter().any(|(tp, _)| self.failed.contains(tp));
        let request = if full {
            SessionRequest {
                session_id: self.id,
                epoch: INITIAL_EPOCH,
                include: next.iter().map(|(tp, _)| tp.clone()).collect(),
                forgotten: Vec::new(),
            }
        } else {
            let names: HashSet<&TopicPartition> = next.iter().map(|(tp, _)| tp).collect();
            let mut forgotten: Vec<(TopicPartition, Uuid)> = self
                .sent
                .iter()
                .filter(|(tp, _)| !names.contains(tp))
                .map(|(tp, d)| (tp.clone(), d.topic_id))
                .collect();
            let mut include = HashSet::new();
            for (tp, data) in next {
                match self.sent.get(tp) {
                    Some(old) if old == data => {}
                    Some(old) => {
                        if old.topic_id != data.topic_id {
                            forgotten.push((tp.clone(), old.topic_id));
                        }
                        include.insert(tp.clone());
                    }
                    None => {
                        include.insert(tp.clone());
                    }
                }
            }
            SessionRequest {
                session_id: self.id,
                epoch: self.epoch,
                include,
                forgotten,
            }
        };
        self.sent = next.iter().cloned().collect();
        self.failed.clear();
        request
    }

    /// The leader answered `request` with this top-level error and session id.
    pub fn handle_response(
        &mut self,
        request: &SessionRequest,
        error_code: i16,
        session_id: i32,
    ) -> SessionAnswer {
        match error_code {
            errors::NONE if request.is_full() => {
                // A leader out of session slots answers 0: stay sessionless, full fetches.
                self.id = session_id;
                self.epoch = 1;
                self.close_existing = false;
                SessionAnswer::Use
            }
            // The leader closed the session (Kafka's handler reads id 0 so too): the answer
            // holds, the next fetch is full.
            errors::NONE if session_id == INVALID_SESSION_ID => {
                self.reset();
                SessionAnswer::Use
            }
            errors::NONE => {
                self.epoch = next_epoch(self.epoch);
                SessionAnswer::Use
            }
            errors::FETCH_SESSION_ID_NOT_FOUND => {
                self.reset();
                SessionAnswer::StartOver
            }
            errors::INVALID_FETCH_SESSION_EPOCH | errors::FETCH_SESSION_TOPIC_ID_ERROR => {
                self.failed();
                SessionAnswer::StartOver
            }
            _ => {
                self.failed();
                SessionAnswer::Refused
            }
        }
    }

    /// No answer (the connection failed): the leader may or may not have taken the request,
    /// so the next fetch closes the session and opens a new one.
    pub fn failed(&mut self) {
        self.close_existing = self.id != INVALID_SESSION_ID;
        self.sent.clear();
        self.failed.clear();
    }

    /// A partition's answer was an error or could not be applied. The leader's session keeps
    /// what it last answered for it, so listing it again unchanged would bring no answer (a
    /// high watermark it told could stay unapplied while the partition is idle). It usually
    /// backs off and so leaves the next round: then it is forgotten, and listed as new (and
    /// answered in full) when it comes back. If it is in the next round after all (every
    /// partition backed off together, so no fetch forgot it), that fetch is a full one in a
    /// new session.
    pub fn answer_failed(&mut self, tp: &TopicPartition) {
        if self.sent.contains_key(tp) {
            self.failed.insert(tp.clone());
        }
    }

    /// Forget the session (a new leader process).
    pub fn reset(&mut self) {
        *self = FollowerSession::default();
    }
}

/// Kafka's `FetchMetadata.nextEpoch`: 1 again after i32::MAX.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn at(offset: i64) -> SentPartition {
        SentPartition {
            topic_id: Uuid([1; 16]),
            fetch_offset: offset,
            log_start_offset: 0,
            current_leader_epoch: 3,
            last_fetched_epoch: 3,
            high_watermark: offset,
        }
    }

    #[test]
    fn full_then_only_changes_then_forgotten() {
        let mut s = FollowerSession::default();
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(7))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (0, 0, 2));
        assert_eq!(s.handle_response(&r, errors::NONE, 42), SessionAnswer::Use);

        // Partition 1 moved on, 0 did not: only 1 is listed, at epoch 1.
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!((r.session_id, r.epoch), (42, 1));
        assert_eq!(r.include, HashSet::from([tp(1)]));
        assert!(r.forgotten.is_empty());
        assert_eq!(s.handle_response(&r, errors::NONE, 42), SessionAnswer::Use);

        // Partition 0 leaves the round (backed off): forgotten; nothing changed otherwise.
        let r = s.build(&[(tp(1), at(9))]);
        assert_eq!(r.epoch, 2);
        assert!(r.include.is_empty());
        assert_eq!(r.forgotten, vec![(tp(0), Uuid([1; 16]))]);
        assert_eq!(s.handle_response(&r, errors::NONE, 42), SessionAnswer::Use);
        // It comes back: listed again.
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!((r.epoch, r.include.clone()), (3, HashSet::from([tp(0)])));
        s.handle_response(&r, errors::NONE, 42);
        // Its answer was an error and it backs off: forgotten, so the leader neither keeps
        // reading it nor keeps what it answered for it last; listed as new when it is back.
        s.answer_failed(&tp(0));
        let r = s.build(&[(tp(1), at(9))]);
        assert_eq!((r.session_id, r.epoch), (42, 4));
        assert!(r.include.is_empty());
        assert_eq!(r.forgotten, vec![(tp(0), Uuid([1; 16]))]);
        s.handle_response(&r, errors::NONE, 42);
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!((r.epoch, r.include.clone()), (5, HashSet::from([tp(0)])));
        s.handle_response(&r, errors::NONE, 42);
        // Failed, and in the next round after all (no fetch in between forgot it): that fetch
        // is full, in a new session.
        s.answer_failed(&tp(0));
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!(
            (r.session_id, r.epoch, r.include.len()),
            (42, INITIAL_EPOCH, 2)
        );
        assert_eq!(s.handle_response(&r, errors::NONE, 43), SessionAnswer::Use);
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!((r.session_id, r.epoch), (43, 1));
        assert!(r.include.is_empty());
        // A leader that closes the session in an answer: that answer holds, then a full fetch.
        assert_eq!(
            s.handle_response(&r, errors::NONE, INVALID_SESSION_ID),
            SessionAnswer::Use
        );
        let r = s.build(&[(tp(0), at(5)), (tp(1), at(9))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (0, 0, 2));
    }

    #[test]
    fn a_topic_recreated_under_its_name_forgets_the_old_id() {
        let mut s = FollowerSession::default();
        let r = s.build(&[(tp(0), at(5))]);
        s.handle_response(&r, errors::NONE, 42);
        let recreated = SentPartition {
            topic_id: Uuid([2; 16]),
            ..at(0)
        };
        let r = s.build(&[(tp(0), recreated)]);
        assert_eq!(r.include, HashSet::from([tp(0)]));
        assert_eq!(r.forgotten, vec![(tp(0), Uuid([1; 16]))]);
    }

    #[test]
    fn other_top_level_errors_back_off_and_start_over() {
        let mut s = FollowerSession::default();
        let r = s.build(&[(tp(0), at(5))]);
        s.handle_response(&r, errors::NONE, 42);
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!(
            s.handle_response(&r, errors::UNKNOWN_SERVER_ERROR, 42),
            SessionAnswer::Refused
        );
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (42, 0, 1));
    }

    #[test]
    fn session_errors_start_over() {
        let mut s = FollowerSession::default();
        let r = s.build(&[(tp(0), at(5))]);
        s.handle_response(&r, errors::NONE, 42);
        // The leader lost the session (restarted, evicted): a new one from scratch.
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!(
            s.handle_response(&r, errors::FETCH_SESSION_ID_NOT_FOUND, 0),
            SessionAnswer::StartOver
        );
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (0, 0, 1));
        s.handle_response(&r, errors::NONE, 43);
        // A wrong epoch (or no answer at all): close 43 and open a new one, full.
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!(
            s.handle_response(&r, errors::INVALID_FETCH_SESSION_EPOCH, 43),
            SessionAnswer::StartOver
        );
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (43, 0, 1));
        s.handle_response(&r, errors::NONE, 44);
        assert_eq!(s.id(), 44);
        s.build(&[(tp(0), at(6))]);
        s.failed();
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (44, 0, 1));
        // A leader without room answers a full fetch sessionless: full fetches go on.
        s.handle_response(&r, errors::NONE, 0);
        let r = s.build(&[(tp(0), at(6))]);
        assert_eq!((r.session_id, r.epoch, r.include.len()), (0, 0, 1));
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(1), 2);
    }
}
