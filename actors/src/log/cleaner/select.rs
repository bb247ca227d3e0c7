//! Which log to clean and how far (Kafka's `LogCleanerManager`: `cleanableOffsets`,
//! `calculateCleanableBytes`, `maxCompactionDelay`, `grabFilthiestCompactedLog`). Pure: the
//! caller passes `now_ms` and the log's view.

use super::LogView;

/// The dirty range a cleaning may cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanableOffsets {
    pub first_dirty_offset: i64,
    pub first_uncleanable_dirty_offset: i64,
    /// The checkpointed offset was outside the log: the caller rewrites it.
    pub force_update_checkpoint: bool,
}

/// A candidate for this round (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    pub first_dirty_offset: i64,
    /// Base offset of the first segment that is not cleaned this round.
    pub first_uncleanable_offset: i64,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    pub total_bytes: u64,
    pub cleanable_ratio: f64,
    /// `max.compaction.lag.ms` passed for some dirty segment: clean whatever the ratio.
    pub need_compaction_now: bool,
    pub force_update_checkpoint: bool,
}

/// Segments (index into `view.segments`, inactive only) from the one holding `from` up to
/// those starting before `to` (Kafka's `LogSegments.values(from, to)`).
fn segment_range(view: &LogView, from: i64, to: i64) -> std::ops::Range<usize> {
    if from >= to {
        return 0..0;
    }
    let segs = &view.segments;
    // The floor segment of `from`: the last one with base <= from (or the first).
    let start = segs
        .partition_point(|s| s.base_offset <= from)
        .saturating_sub(1);
    let end = segs.partition_point(|s| s.base_offset < to);
    start..end.max(start)
}

/// Kafka's `cleanableOffsets`.
pub fn cleanable_offsets(view: &LogView, checkpoint: Option<i64>, now_ms: i64) -> CleanableOffsets {
    let lso = view.log_start_offset;
    let checkpointed = checkpoint.unwrap_or(lso);
    let (first_dirty, force) = if checkpointed < lso || checkpointed > view.log_end_offset {
        (lso, true)
    } else {
        (checkpointed, false)
    };
    let mut uncleanable = view.last_stable_offset.min(view.active_base_offset);
    let min_lag = view.config.min_compaction_lag_ms.max(0);
    if min_lag > 0 {
        // The first dirty inactive segment with a record younger than the lag.
        for s in &view.segments[segment_range(view, first_dirty, view.active_base_offset)] {
            if s.largest_timestamp > now_ms - min_lag {
                uncleanable = uncleanable.min(s.base_offset);
                break;
            }
        }
    }
    CleanableOffsets {
        first_dirty_offset: first_dirty,
        first_uncleanable_dirty_offset: first_dirty.max(uncleanable),
        force_update_checkpoint: force,
    }
}

/// Kafka's `maxCompactionDelay`: how long past `max.compaction.lag.ms` the oldest dirty
/// inactive segment's first batch is (0 = not overdue).
pub fn max_compaction_delay(view: &LogView, first_dirty_offset: i64, now_ms: i64) -> i64 {
    let earliest = view.segments[segment_range(view, first_dirty_offset, view.active_base_offset)]
        .iter()
        .filter_map(|s| s.first_batch_timestamp)
        .filter(|ts| *ts > 0)
        .min()
        .unwrap_or(i64::MAX);
    let clean_until = now_ms.saturating_sub(view.config.max_compaction_lag_ms.max(0));
    if earliest < clean_until {
        clean_until - earliest
    } else {
        0
    }
}

/// Kafka's `calculateCleanableBytes`: the base of the segment holding the uncleanable offset
/// (or the active segment) and the bytes of the segments from the dirty one up to it.
pub fn cleanable_bytes(view: &LogView, first_dirty: i64, uncleanable: i64) -> (i64, u64) {
    let first_uncleanable = if uncleanable < view.active_base_offset {
        let r = segment_range(view, uncleanable, view.active_base_offset);
        view.segments
            .get(r.start)
            .map_or(view.active_base_offset, |s| s.base_offset)
    } else {
        view.active_base_offset
    };
    let bytes = view.segments
        [segment_range(view, first_dirty.min(first_uncleanable), first_uncleanable)]
    .iter()
    .map(|s| s.size)
    .sum();
    (first_uncleanable, bytes)
}

/// The candidate for `view`, given its checkpointed first dirty offset.
pub fn log_to_clean(view: &LogView, checkpoint: Option<i64>, now_ms: i64) -> LogToClean {
    let offsets = cleanable_offsets(view, checkpoint, now_ms);
    let delay = max_compaction_delay(view, offsets.first_dirty_offset, now_ms);
    // Segments wholly before the dirty offset; the one holding it counts as clean and dirty.
    let clean_bytes: u64 = view
        .segments
        .iter()
        .take_while(|s| s.base_offset < offsets.first_dirty_offset)
        .map(|s| s.size)
        .sum::<u64>()
        + if view.active_base_offset < offsets.first_dirty_offset {
            view.active_size
        } else {
            0
        };
    let (first_uncleanable, cleanable) = cleanable_bytes(
        view,
        offsets.first_dirty_offset,
        offsets.first_uncleanable_dirty_offset,
    );
    let total = clean_bytes + cleanable;
    LogToClean {
        first_dirty_offset: offsets.first_dirty_offset,
        first_uncleanable_offset: first_uncleanable,
        clean_bytes,
        cleanable_bytes: cleanable,
        total_bytes: total,
        cleanable_ratio: if total == 0 {
            0.0
        } else {
            cleanable as f64 / total as f64
        },
        need_compaction_now: delay > 0,
        force_update_checkpoint: offsets.force_update_checkpoint,
    }
}

/// Whether a candidate is due this round (Kafka's filter in `grabFilthiestCompactedLog`).
pub fn is_cleanable(c: &LogToClean, min_cleanable_ratio: f64) -> bool {
    c.total_bytes > 0
        && ((c.need_compaction_now && c.cleanable_bytes > 0)
            || c.cleanable_ratio > min_cleanable_ratio)
}

/// The index of the dirtiest due candidate, `(candidate, min.cleanable.dirty.ratio)` each.
pub fn filthiest(candidates: &[(LogToClean, f64)]) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .filter(|(_, (c, ratio))| is_cleanable(c, *ratio))
        .max_by(|(_, (a, _)), (_, (b, _))| a.cleanable_ratio.total_cmp(&b.cleanable_ratio))
        .map(|(i, _)| i)
}
