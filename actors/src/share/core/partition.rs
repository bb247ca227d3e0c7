//! One share-partition (Kafka's `SharePartition`): the delivery state of a share group's records
//! in one topic partition, kept by the partition's leader. Pure: the actor feeds it the offsets
//! of batches it read from the log, acknowledgements and the clock.
//!
//! Every offset from the share-partition start offset (SPSO) up to `end_offset` (exclusive) is
//! tracked: AVAILABLE to be acquired, ACQUIRED by one member until its lock expires,
//! ACKNOWLEDGED (accepted) or ARCHIVED (rejected, a gap, or delivered too often). Offsets at or
//! past `end_offset` have never been delivered. The start offset moves past a prefix of
//! ACKNOWLEDGED / ARCHIVED offsets, so the tracked window stays at most
//! `group.share.partition.max.record.locks` long.

use std::collections::BTreeMap;

use kactor_protocol::errors::{INVALID_RECORD_STATE, INVALID_REQUEST};

use crate::share::coordinator::core::{
    StateBatch, STATE_ACKNOWLEDGED, STATE_ARCHIVED, STATE_AVAILABLE,
};

/// Acknowledge types of ShareFetch / ShareAcknowledge (`AcknowledgeTypes`).
pub const ACK_GAP: i8 = 0;
pub const ACK_ACCEPT: i8 = 1;
pub const ACK_RELEASE: i8 = 2;
pub const ACK_REJECT: i8 = 3;
pub const ACK_RENEW: i8 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired { member: String, deadline_ms: i64 },
    Acknowledged,
    Archived,
}

impl RecordState {
    fn is_terminal(&self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
}

/// The settings a share-partition applies (broker configs, or the group's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `group.share.record.lock.duration.ms`
    pub lock_duration_ms: i64,
    /// `group.share.delivery.count.limit`: a record delivered this often is archived instead of
    /// being made available again.
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks`: the longest tracked window.
    pub max_in_flight: i64,
}

/// A contiguous range of offsets acquired with one delivery count (`AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// One batch read from the log, and whether its records are for delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub deliver: bool,
}

/// One acknowledgement batch: `types` has one entry for the whole range or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub types: Vec<i8>,
}

/// Why an acknowledgement was refused: an error code and its message.
pub type AckError = (i16, String);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    start_offset: i64,
    end_offset: i64,
    records: BTreeMap<i64, InFlight>,
}

impl SharePartition {
    /// A share-partition whose delivery starts at `start_offset` (from
    /// `share.auto.offset.reset`, or persisted state).
    pub fn new(start_offset: i64) -> Self {
        SharePartition {
            start_offset,
            end_offset: start_offset,
            records: BTreeMap::new(),
        }
    }

    /// A share-partition as its coordinator kept it: the start offset and the ranges past it.
    /// Offsets the ranges skip inside the window are available, never delivered.
    pub fn from_state(start_offset: i64, batches: &[StateBatch]) -> Self {
        let mut sp = SharePartition::new(start_offset);
        for b in batches {
            let state = match b.delivery_state {
                STATE_ACKNOWLEDGED => RecordState::Acknowledged,
                STATE_ARCHIVED => RecordState::Archived,
                _ => RecordState::Available,
            };
            for offset in b.first_offset.max(start_offset)..=b.last_offset {
                sp.records.insert(
                    offset,
                    InFlight {
                        state: state.clone(),
                        delivery_count: b.delivery_count.max(0),
                    },
                );
            }
            sp.end_offset = sp.end_offset.max(b.last_offset + 1);
        }
        for offset in start_offset..sp.end_offset {
            sp.records.entry(offset).or_insert(InFlight {
                state: RecordState::Available,
                delivery_count: 0,
            });
        }
        sp.advance_start();
        sp
    }

    /// The window as the coordinator keeps it: coalesced ranges of one state and delivery
    /// count. An acquired record is kept as available with its count, so after a failover it
    /// is delivered again (Kafka does not persist acquisition either).
    pub fn state_batches(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (offset, r) in &self.records {
            let state = match r.state {
                RecordState::Acknowledged => STATE_ACKNOWLEDGED,
                RecordState::Archived => STATE_ARCHIVED,
                _ => STATE_AVAILABLE,
            };
            match out.last_mut() {
                Some(b)
                    if b.last_offset + 1 == *offset
                        && b.delivery_state == state
                        && b.delivery_count == r.delivery_count =>
                {
                    b.last_offset = *offset;
                }
                _ => out.push(StateBatch {
                    first_offset: *offset,
                    last_offset: *offset,
                    delivery_state: state,
                    delivery_count: r.delivery_count,
                }),
            }
        }
        out
    }

    /// The share-partition start offset (SPSO): every offset below it is done with.
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// One past the last offset ever delivered.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Offsets in the window that are ACQUIRED now.
    pub fn acquired_count(&self) -> usize {
        self.records
            .values()
            .filter(|r| matches!(r.state, RecordState::Acquired { .. }))
            .count()
    }

    /// Offsets in the window that are ACKNOWLEDGED or ARCHIVED (done with, but above a record
    /// that is not).
    pub fn terminal_count(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.state.is_terminal())
            .count()
    }

    /// The state of one offset (tests, describe).
    pub fn state_of(&self, offset: i64) -> Option<(&RecordState, i16)> {
        self.records
            .get(&offset)
            .map(|r| (&r.state, r.delivery_count))
    }

    /// Where the next read of the log should start: the first AVAILABLE offset in the window,
    /// else the first offset never delivered.
    pub fn next_fetch_offset(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.end_offset, |(o, _)| *o)
    }

    /// Whether acquiring could give anything from a read at `next_fetch_offset` of a log whose
    /// readable end is `high_watermark`.
    pub fn has_acquirable(&self, high_watermark: i64, limits: &Limits) -> bool {
        self.records
            .values()
            .any(|r| r.state == RecordState::Available)
            || (self.end_offset < high_watermark
                && self.end_offset - self.start_offset < limits.max_in_flight)
    }

    /// The log's start moved to `log_start_offset` (retention, DeleteRecords): what lay below it
    /// can no longer be delivered.
    pub fn on_log_start(&mut self, log_start_offset: i64) {
        if log_start_offset <= self.start_offset {
            return;
        }
        self.records = self.records.split_off(&log_start_offset);
        self.start_offset = log_start_offset;
        self.end_offset = self.end_offset.max(log_start_offset);
        self.advance_start();
    }

    /// Acquires for `member` the offsets of `batches` (each `(base_offset, last_offset)` of a
    /// batch read from the log at `next_fetch_offset`, ascending) that are AVAILABLE or never
    /// delivered, whole batches at a time until `max_records` are acquired, within the window.
    /// Offsets between batches (removed by compaction) are archived on the way.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[(i64, i64)],
        max_records: usize,
        limits: &Limits,
        now_ms: i64,
    ) -> Vec<AcquiredRange> {
        let all: Vec<LogBatch> = batches
            .iter()
            .map(|&(base_offset, last_offset)| LogBatch {
                base_offset,
                last_offset,
                deliver: true,
            })
            .collect();
        self.acquire_batches(member, &all, max_records, limits, now_ms)
    }

    /// [`acquire`](Self::acquire) over batches some of which are not for delivery (aborted
    /// transactions and control batches under `read_committed`): those are archived where they
    /// stand, in log order, so the start offset can move past them.
    pub fn acquire_batches(
        &mut self,
        member: &str,
        batches: &[LogBatch],
        max_records: usize,
        limits: &Limits,
        now_ms: i64,
    ) -> Vec<AcquiredRange> {
        let deadline_ms = now_ms + limits.lock_duration_ms;
        let mut acquired: Vec<(i64, i16)> = Vec::new();
        'batches: for b in batches {
            if b.deliver && acquired.len() >= max_records.max(1) {
                break;
            }
            for offset in b.base_offset.max(self.start_offset)..=b.last_offset {
                if offset >= self.end_offset {
                    if offset - self.start_offset >= limits.max_in_flight {
                        break 'batches;
                    }
                    // Offsets the log no longer has between what was tracked and this batch.
                    for gap in self.end_offset..offset {
                        self.records.insert(
                            gap,
                            InFlight {
                                state: RecordState::Archived,
                                delivery_count: 0,
                            },
                        );
                    }
                    self.records.insert(
                        offset,
                        InFlight {
                            state: RecordState::Available,
                            delivery_count: 0,
                        },
                    );
                    self.end_offset = offset + 1;
                }
                let r = self.records.get_mut(&offset).expect("tracked offset");
                if r.state != RecordState::Available {
                    continue;
                }
                if !b.deliver {
                    r.state = RecordState::Archived;
                    continue;
                }
                r.delivery_count = r.delivery_count.saturating_add(1);
                r.state = RecordState::Acquired {
                    member: member.to_string(),
                    deadline_ms,
                };
                acquired.push((offset, r.delivery_count));
            }
        }
        self.advance_start();
        ranges(&acquired)
    }

    /// Applies `member`'s acknowledgements (their shape checked by `valid_ack_batches`): all
    /// of them, or none with the first error. Offsets must be ACQUIRED by `member`; batches
    /// wholly below the start offset are done with already and ignored.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[AckBatch],
        limits: &Limits,
        now_ms: i64,
    ) -> Result<(), AckError> {
        let refuse = |code, m: &str| Err((code, m.to_string()));
        for b in batches {
            if b.last_offset < self.start_offset {
                continue;
            }
            if self.records.is_empty() {
                return refuse(
                    INVALID_RECORD_STATE,
                    "Batch record not found. The request batch offsets are not found in the cache.",
                );
            }
            if b.first_offset >= self.end_offset {
                return refuse(
                    INVALID_REQUEST,
                    "Batch record not found. The first offset in request is past acquired records.",
                );
            }
            if b.last_offset >= self.end_offset {
                return refuse(
                    INVALID_REQUEST,
                    "Batch record not found. The last offset in request is past acquired records.",
                );
            }
            for offset in b.first_offset.max(self.start_offset)..=b.last_offset {
                match self.records.get(&offset).map(|r| &r.state) {
                    Some(RecordState::Acquired { member: m, .. }) if m == member => {}
                    Some(RecordState::Acquired { .. }) => {
                        return refuse(INVALID_RECORD_STATE, "Member is not the owner of batch record")
                    }
                    Some(_) => {
                        return refuse(
                            INVALID_RECORD_STATE,
                            "The batch cannot be acknowledged. The batch is not in the acquired state.",
                        )
                    }
                    None => {
                        return refuse(
                            INVALID_RECORD_STATE,
                            "Batch record not found. The request batch offsets are not found in the cache.",
                        )
                    }
                }
            }
        }
        for b in batches {
            for offset in b.first_offset.max(self.start_offset)..=b.last_offset {
                let ty = ack_type(b, offset);
                let Some(r) = self.records.get_mut(&offset) else {
                    continue;
                };
                r.state = match ty {
                    ACK_ACCEPT => RecordState::Acknowledged,
                    ACK_RELEASE => released(r.delivery_count, limits),
                    ACK_RENEW => match &r.state {
                        RecordState::Acquired { member, .. } => RecordState::Acquired {
                            member: member.clone(),
                            deadline_ms: now_ms + limits.lock_duration_ms,
                        },
                        other => other.clone(),
                    },
                    _ => RecordState::Archived,
                };
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Makes every record `member` holds available again (its session closed or it left the
    /// group). Returns how many were released.
    pub fn release_member(&mut self, member: &str, limits: &Limits) -> usize {
        let mut n = 0;
        for r in self.records.values_mut() {
            if matches!(&r.state, RecordState::Acquired { member: m, .. } if m == member) {
                r.state = released(r.delivery_count, limits);
                n += 1;
            }
        }
        self.advance_start();
        n
    }

    /// Releases every record whose acquisition lock expired by `now_ms`. Returns how many.
    pub fn expire_locks(&mut self, limits: &Limits, now_ms: i64) -> usize {
        let mut n = 0;
        for r in self.records.values_mut() {
            if matches!(r.state, RecordState::Acquired { deadline_ms, .. } if deadline_ms <= now_ms)
            {
                r.state = released(r.delivery_count, limits);
                n += 1;
            }
        }
        self.advance_start();
        n
    }

    /// The earliest acquisition lock deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        self.records
            .values()
            .filter_map(|r| match r.state {
                RecordState::Acquired { deadline_ms, .. } => Some(deadline_ms),
                _ => None,
            })
            .min()
    }

    /// Records still to be delivered and acknowledged below `high_watermark` (the lag
    /// DescribeShareGroupOffsets v1 reports).
    pub fn lag(&self, high_watermark: i64) -> i64 {
        if high_watermark <= self.start_offset {
            return 0;
        }
        let done = self
            .records
            .range(..high_watermark)
            .filter(|(_, r)| r.state.is_terminal())
            .count() as i64;
        (high_watermark - self.start_offset - done).max(0)
    }

    fn advance_start(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if !entry.get().state.is_terminal() {
                break;
            }
            let offset = *entry.key();
            entry.remove();
            self.start_offset = offset + 1;
        }
        if self.records.is_empty() {
            self.start_offset = self.start_offset.max(self.end_offset);
        }
    }
}

/// A released record is available again unless it was delivered `delivery_count_limit` times.
fn released(delivery_count: i16, limits: &Limits) -> RecordState {
    if delivery_count >= limits.delivery_count_limit {
        RecordState::Archived
    } else {
        RecordState::Available
    }
}

/// Kafka's checks of a partition's acknowledgement batches before they reach the
/// share-partition (INVALID_REQUEST, without a message, when they fail): each range in order
/// and not overlapping the previous one, one type for the range or one per offset, types known
/// at the request's version, RENEW only in a request that says it renews.
pub fn valid_ack_batches(batches: &[AckBatch], max_type: i8, renew_allowed: bool) -> bool {
    let mut previous_last: Option<i64> = None;
    for b in batches {
        if b.first_offset > b.last_offset || previous_last.is_some_and(|p| b.first_offset <= p) {
            return false;
        }
        previous_last = Some(b.last_offset);
        let len = b.last_offset - b.first_offset + 1;
        if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i64 != len) {
            return false;
        }
        if b.types
            .iter()
            .any(|t| *t < ACK_GAP || *t > max_type || (*t == ACK_RENEW && !renew_allowed))
        {
            return false;
        }
    }
    true
}

fn ack_type(b: &AckBatch, offset: i64) -> i8 {
    if b.types.len() == 1 {
        b.types[0]
    } else {
        b.types[(offset - b.first_offset) as usize]
    }
}

/// Contiguous offsets with one delivery count, as ranges.
fn ranges(acquired: &[(i64, i16)]) -> Vec<AcquiredRange> {
    let mut out: Vec<AcquiredRange> = Vec::new();
    for &(offset, count) in acquired {
        match out.last_mut() {
            Some(r) if r.last_offset + 1 == offset && r.delivery_count == count => {
                r.last_offset = offset;
            }
            _ => out.push(AcquiredRange {
                first_offset: offset,
                last_offset: offset,
                delivery_count: count,
            }),
        }
    }
    out
}
