//! One cleaning of one log (Kafka's `Cleaner.doClean`, `buildOffsetMap`, `cleanSegments`,
//! `cleanInto`, and the batch rewrite of `MemoryRecords.filterTo`): builds the key → latest
//! offset map over the dirty range, then rewrites every segment before the map's end into
//! `.cleaned` files, one per group of small segments. Reads only through the view's file
//! handles and writes only new `.cleaned` files: the log itself is changed later, by
//! `Log::replace_with_cleaned` on its owner.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use kactor_protocol::records::varint::{read_varint, read_varlong, write_varint, write_varlong};
use kactor_protocol::records::{
    compress, decompress, write_crc, BatchHeader, Compression, ControlRecordType, RecordError,
    TimestampType, BATCH_HEADER_LEN, CONTROL_FLAG_MASK, DELETE_HORIZON_FLAG_MASK, LOG_OVERHEAD,
    MAGIC_V2, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
};

use super::offset_map::OffsetMap;
use super::select::LogToClean;
use super::txn::{CleanedTxnState, MarkerKind};
use super::{CleanOutcome, CleanedSegment, CleanerStats, LogView, SegmentView};
use crate::log::segment::{segment_file, CLEANED_SUFFIX, LOG_SUFFIX, TXN_INDEX_SUFFIX};
use crate::log::txn_index::TransactionIndex;

/// Decompressed batches larger than this are refused (a corrupt length, not data).
const DECOMPRESSION_LIMIT: usize = 256 * 1024 * 1024;
/// Cleaned bytes are written to the file in pieces of about this size.
const WRITE_CHUNK: usize = 1 << 20;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}
fn record_err(e: RecordError) -> io::Error {
    invalid(e.to_string())
}

/// Reads a segment's batches front to back through one growing buffer.
struct BatchReader<'a> {
    file: &'a File,
    size: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    buf_len: usize,
}

impl<'a> BatchReader<'a> {
    fn new(seg: &'a SegmentView) -> Self {
        BatchReader {
            file: &seg.file,
            size: seg.size,
            pos: 0,
            buf: vec![0; 1 << 20],
            buf_start: 0,
            buf_len: 0,
        }
    }

    fn ensure(&mut self, pos: u64, len: usize) -> io::Result<()> {
        if pos >= self.buf_start && pos + len as u64 <= self.buf_start + self.buf_len as u64 {
            return Ok(());
        }
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let want = (self.buf.len() as u64).min(self.size - pos) as usize;
        self.file.read_exact_at(&mut self.buf[..want], pos)?;
        self.buf_start = pos;
        self.buf_len = want;
        Ok(())
    }

    /// The next whole batch (header and bytes), or `None` at the end. The segment is below the
    /// recovery point and not active: a batch cut short is an error here.
    fn next_batch(&mut self) -> io::Result<Option<(BatchHeader, &[u8])>> {
        if self.pos + BATCH_HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let pos = self.pos;
        self.ensure(pos, BATCH_HEADER_LEN)?;
        let at = (pos - self.buf_start) as usize;
        let header =
            BatchHeader::parse(&self.buf[at..at + BATCH_HEADER_LEN]).map_err(record_err)?;
        let size = header.total_size();
        if pos + size as u64 > self.size {
            return Err(invalid(format!("batch at {pos} runs past the segment end")));
        }
        self.ensure(pos, size)?;
        self.pos = pos + size as u64;
        let at = (pos - self.buf_start) as usize;
        Ok(Some((header, &self.buf[at..at + size])))
    }
}

/// One record of a batch's (decompressed) records section, borrowed.
struct RawRecord<'a> {
    /// The record without its length prefix.
    body: &'a [u8],
    /// Where the timestamp delta ends in `body` (attributes byte, then the varlong).
    after_timestamp: usize,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    has_value: bool,
}

fn read_bytes_field<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, RecordError> {
    let len = read_varint(buf, pos)?;
    if len < 0 {
        return Ok(None);
    }
    let end = *pos + len as usize;
    if end > buf.len() {
        return Err(RecordError::InvalidRecord(
            "field past the record end".into(),
        ));
    }
    let b = &buf[*pos..end];
    *pos = end;
    Ok(Some(b))
}

/// Splits a records section into its records (the header's count of them).
fn parse_records(payload: &[u8], count: i32) -> Result<Vec<RawRecord<'_>>, RecordError> {
    let mut out = Vec::with_capacity(count.max(0) as usize);
    let mut pos = 0usize;
    for _ in 0..count.max(0) {
        let len = read_varint(payload, &mut pos)?;
        if len < 1 || pos + len as usize > payload.len() {
            return Err(RecordError::InvalidRecord(format!("record length {len}")));
        }
        let body = &payload[pos..pos + len as usize];
        pos += len as usize;
        let mut p = 1usize; // attributes
        let timestamp_delta = read_varlong(body, &mut p)?;
        let after_timestamp = p;
        let offset_delta = read_varint(body, &mut p)?;
        let key = read_bytes_field(body, &mut p)?;
        let has_value = read_bytes_field(body, &mut p)?.is_some();
        out.push(RawRecord {
            body,
            after_timestamp,
            timestamp_delta,
            offset_delta,
            key,
            has_value,
        });
    }
    Ok(out)
}

/// The records section of `batch`, decompressed when needed.
fn records_section<'a>(
    header: &BatchHeader,
    batch: &'a [u8],
) -> io::Result<std::borrow::Cow<'a, [u8]>> {
    let payload = &batch[BATCH_HEADER_LEN..];
    match header.compression().map_err(record_err)? {
        Compression::None => Ok(std::borrow::Cow::Borrowed(payload)),
        codec => Ok(std::borrow::Cow::Owned(
            decompress(codec, payload, DECOMPRESSION_LIMIT).map_err(record_err)?,
        )),
    }
}

fn marker_kind(header: &BatchHeader, records: &[RawRecord<'_>]) -> MarkerKind {
    match records.first().and_then(|r| r.key) {
        None if header.records_count == 0 || records.is_empty() => MarkerKind::Empty,
        None => MarkerKind::Other,
        Some(key) => match ControlRecordType::parse_key(key) {
            Ok(ControlRecordType::Abort) => MarkerKind::Abort,
            Ok(ControlRecordType::Commit) => MarkerKind::Commit,
            _ => MarkerKind::Other,
        },
    }
}

/// Kafka's `buildOffsetMap`: the latest offset of every key in `[start, end)`, skipping aborted
/// transactions. Stops early when the map reaches its load factor; its latest offset then says
/// how far this round can clean.
pub fn build_offset_map(
    view: &LogView,
    start: i64,
    end: i64,
    map: &mut OffsetMap,
    max_desired_entries: usize,
    stats: &mut CleanerStats,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<()> {
    map.clear();
    let mut txn = CleanedTxnState::default();
    txn.add_aborted(
        view.aborted
            .iter()
            .filter(|t| t.last_offset >= start && t.first_offset < end)
            .copied(),
    );
    let dirty: Vec<&SegmentView> = view
        .segments
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            s.base_offset < end
                && view
                    .segments
                    .get(i + 1)
                    .map_or(view.active_base_offset, |n| n.base_offset)
                    > start
        })
        .map(|(_, s)| s)
        .collect();
    for (i, seg) in dirty.iter().enumerate() {
        let next_start = dirty.get(i + 1).map_or(end, |n| n.base_offset);
        let mut reader = BatchReader::new(seg);
        while let Some((header, batch)) = reader.next_batch()? {
            stats.map_bytes_read += header.total_size() as u64;
            throttle(header.total_size() as u64);
            if header.last_offset() < start {
                continue;
            }
            let section = records_section(&header, batch)?;
            let records = parse_records(&section, header.records_count).map_err(record_err)?;
            if header.is_control() {
                txn.on_control_batch(
                    header.producer_id,
                    header.last_offset(),
                    marker_kind(&header, &records),
                );
                stats.map_messages_read += 1;
            } else if txn.on_data_batch(
                header.producer_id,
                header.last_offset(),
                header.is_transactional(),
            ) {
                stats.map_messages_read += records.len() as u64;
            } else {
                for r in &records {
                    let offset = header.base_offset + r.offset_delta as i64;
                    if let Some(key) = r.key {
                        if offset >= start {
                            if map.size() >= max_desired_entries {
                                return Ok(());
                            }
                            map.put(key, offset);
                        }
                    }
                    stats.map_messages_read += 1;
                }
            }
            if header.last_offset() >= start {
                map.update_latest_offset(header.last_offset());
            }
        }
        // Offsets with no batch (compacted away earlier) up to the next segment count as read.
        map.update_latest_offset(next_start - 1);
    }
    Ok(())
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose data and both indexes fit one
/// segment, and whose offsets stay within 2^31 of the group's base. Indices into `segs`.
pub fn group_segments_by_size(
    segs: &[&SegmentView],
    max_size: u64,
    max_index_size: u64,
    first_uncleanable_offset: i64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let start = i;
        let mut log_size = segs[i].size;
        let mut index_size = segs[i].offset_index_bytes;
        let mut time_index_size = segs[i].time_index_bytes;
        i += 1;
        while i < segs.len() {
            let s = segs[i];
            // The last offset the candidate can hold: the next base - 1 (or the bound - 1).
            let last_offset_estimate = segs
                .get(i + 1)
                .map_or(first_uncleanable_offset, |n| n.base_offset)
                - 1;
            let fits = log_size + s.size <= max_size
                && index_size + s.offset_index_bytes <= max_index_size
                && time_index_size + s.time_index_bytes <= max_index_size
                && (s.size == 0
                    || last_offset_estimate - segs[start].base_offset <= i32::MAX as i64);
            if !fits {
                break;
            }
            log_size += s.size;
            index_size += s.offset_index_bytes;
            time_index_size += s.time_index_bytes;
            i += 1;
        }
        groups.push(start..i);
    }
    groups
}

/// Per-record timestamp as stored (LogAppendTime batches: the batch's time for every record).
fn record_timestamp(header: &BatchHeader, r: &RawRecord<'_>) -> i64 {
    if header.timestamp_type() == TimestampType::LogAppendTime {
        header.max_timestamp
    } else {
        header.base_timestamp.wrapping_add(r.timestamp_delta)
    }
}

/// Writes a batch holding `retained` records of `header`'s batch, with `header`'s base offset,
/// last offset, producer fields and flags (Kafka's `buildRetainedRecordsInto`): timestamps are
/// re-based on the delete horizon when one is set.
fn write_retained_batch(
    out: &mut Vec<u8>,
    header: &BatchHeader,
    retained: &[&RawRecord<'_>],
    delete_horizon_ms: i64,
) -> io::Result<()> {
    let timestamps: Vec<i64> = retained
        .iter()
        .map(|r| record_timestamp(header, r))
        .collect();
    let base_timestamp = if delete_horizon_ms >= 0 {
        delete_horizon_ms
    } else {
        timestamps.first().copied().unwrap_or(NO_TIMESTAMP)
    };
    let mut records = Vec::new();
    let mut body = Vec::new();
    for (r, ts) in retained.iter().zip(&timestamps) {
        body.clear();
        body.push(r.body[0]);
        write_varlong(&mut body, ts.wrapping_sub(base_timestamp));
        body.extend_from_slice(&r.body[r.after_timestamp..]);
        write_varint(&mut records, body.len() as i32);
        records.extend_from_slice(&body);
    }
    let codec = header.compression().map_err(record_err)?;
    let payload = compress(codec, &records).map_err(record_err)?;
    let max_timestamp = if header.timestamp_type() == TimestampType::LogAppendTime {
        header.max_timestamp
    } else {
        timestamps.iter().copied().max().unwrap_or(NO_TIMESTAMP)
    };
    let mut attributes = codec.id()
        | (header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK));
    if delete_horizon_ms >= 0 {
        attributes |= DELETE_HORIZON_FLAG_MASK;
    }
    put_header(
        out,
        HeaderFields {
            header,
            length: BATCH_HEADER_LEN + payload.len(),
            attributes,
            base_timestamp,
            max_timestamp,
            count: retained.len() as i32,
        },
        &payload,
    )
}

struct HeaderFields<'a> {
    header: &'a BatchHeader,
    length: usize,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    count: i32,
}

fn put_header(out: &mut Vec<u8>, f: HeaderFields<'_>, payload: &[u8]) -> io::Result<()> {
    let start = out.len();
    let h = f.header;
    out.extend_from_slice(&h.base_offset.to_be_bytes());
    out.extend_from_slice(&((f.length - LOG_OVERHEAD) as i32).to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&f.attributes.to_be_bytes());
    out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&f.base_timestamp.to_be_bytes());
    out.extend_from_slice(&f.max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer_epoch.to_be_bytes());
    out.extend_from_slice(&h.base_sequence.to_be_bytes());
    out.extend_from_slice(&f.count.to_be_bytes());
    out.extend_from_slice(payload);
    write_crc(&mut out[start..]).map_err(record_err)
}

/// Kafka's `writeEmptyHeader`: a batch with no records that keeps its offsets and producer
/// fields (so producer state and the log's last offset survive the records' removal).
fn write_empty_batch(out: &mut Vec<u8>, header: &BatchHeader) -> io::Result<()> {
    let attributes =
        header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK);
    put_header(
        out,
        HeaderFields {
            header,
            length: BATCH_HEADER_LEN,
            attributes,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: header.max_timestamp,
            count: 0,
        },
        &[],
    )
}

/// What `checkBatchRetention` decided for a whole batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchRetention {
    Delete,
    RetainEmpty,
    DeleteEmpty,
}

/// Everything the per-record decisions of one round share.
struct RoundContext<'a> {
    view: &'a LogView,
    now_ms: i64,
    upper_bound_of_round: i64,
}

/// Kafka's `cleanInto` for one source segment: appends what survives to `out`.
fn clean_into(
    ctx: &RoundContext<'_>,
    seg: &SegmentView,
    map: &mut OffsetMap,
    txn: &mut CleanedTxnState,
    out: &mut Vec<u8>,
    stats: &mut CleanerStats,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<()> {
    let mut reader = BatchReader::new(seg);
    while let Some((header, batch)) = reader.next_batch()? {
        stats.bytes_read += batch.len() as u64;
        throttle(batch.len() as u64);
        let section = records_section(&header, batch)?;
        let records = parse_records(&section, header.records_count).map_err(record_err)?;
        stats.messages_read += records.len() as u64;

        let can_discard = if header.is_control() {
            txn.on_control_batch(
                header.producer_id,
                header.last_offset(),
                marker_kind(&header, &records),
            )
        } else {
            txn.on_data_batch(
                header.producer_id,
                header.last_offset(),
                header.is_transactional(),
            )
        };
        // A marker goes only after its tombstone-like retention: once its delete horizon passed.
        let discard_records = if header.is_control() {
            can_discard && header.has_delete_horizon() && header.base_timestamp <= ctx.now_ms
        } else {
            can_discard
        };
        let last_of_producer = header.has_producer_id()
            && ctx
                .view
                .active_producers
                .get(&header.producer_id)
                .is_some_and(|last| match last.last_data_offset {
                    Some(o) => header.last_offset() == o,
                    None => header.is_control() && header.producer_epoch == last.producer_epoch,
                });
        let retention = if last_of_producer || header.next_offset() == ctx.upper_bound_of_round {
            BatchRetention::RetainEmpty
        } else if discard_records {
            BatchRetention::Delete
        } else {
            BatchRetention::DeleteEmpty
        };
        let marker_for_empty_txn = can_discard && header.is_control();
        if retention == BatchRetention::Delete {
            continue;
        }

        let mut retained: Vec<&RawRecord<'_>> = Vec::with_capacity(records.len());
        let mut contains_tombstones = false;
        for r in &records {
            let keep = if discard_records {
                false
            } else if header.is_control() {
                true
            } else {
                should_retain_record(ctx, map, &header, r, stats)
            };
            if keep {
                contains_tombstones |= !r.has_value;
                retained.push(r);
            }
        }
        if !retained.is_empty() {
            let need_horizon =
                (contains_tombstones || marker_for_empty_txn) && !header.has_delete_horizon();
            let start = out.len();
            if retained.len() == records.len() && !need_horizon {
                out.extend_from_slice(batch);
            } else {
                let horizon = if need_horizon {
                    ctx.now_ms
                        .saturating_add(ctx.view.config.delete_retention_ms)
                } else if header.has_delete_horizon() {
                    header.base_timestamp
                } else {
                    NO_TIMESTAMP
                };
                write_retained_batch(out, &header, &retained, horizon)?;
            }
            stats.messages_written += retained.len() as u64;
            stats.bytes_written += (out.len() - start) as u64;
        } else if retention == BatchRetention::RetainEmpty {
            let start = out.len();
            write_empty_batch(out, &header)?;
            stats.bytes_written += (out.len() - start) as u64;
        }
    }
    Ok(())
}

/// Kafka's `shouldRetainRecord` (v2 only): past the map's reach, or the key's latest record and
/// either a value or a tombstone whose batch has not passed its delete horizon.
fn should_retain_record(
    ctx: &RoundContext<'_>,
    map: &mut OffsetMap,
    header: &BatchHeader,
    r: &RawRecord<'_>,
    stats: &mut CleanerStats,
) -> bool {
    let offset = header.base_offset + r.offset_delta as i64;
    if offset > map.latest_offset() {
        return true;
    }
    let Some(key) = r.key else {
        stats.invalid_messages_read += 1;
        return false;
    };
    let latest_for_key = offset >= map.get(key);
    let retain_delete = !header.has_delete_horizon() || ctx.now_ms < header.base_timestamp;
    latest_for_key && (r.has_value || retain_delete)
}

/// Kafka's `doClean`: the offset map over the dirty range, then every segment before the map's
/// end rewritten, group by group, into `<base>.log.cleaned` (and `<base>.txnindex.cleaned` when
/// aborted transactions keep markers). Returns the first offset not cleaned (the new
/// checkpoint) and the files for `Log::replace_with_cleaned`. `throttle(bytes)` is told of every
/// byte read and written (the caller sleeps there for `log.cleaner.io.max.bytes.per.second`,
/// see [`super::Throttler`]).
pub fn clean_log(
    view: &LogView,
    to_clean: &LogToClean,
    map: &mut OffsetMap,
    max_desired_entries: usize,
    now_ms: i64,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<CleanOutcome> {
    let mut stats = CleanerStats::default();
    build_offset_map(
        view,
        to_clean.first_dirty_offset,
        to_clean.first_uncleanable_offset,
        map,
        max_desired_entries,
        &mut stats,
        throttle,
    )?;
    let end_offset = map.latest_offset() + 1;
    stats.buffer_utilization = map.utilization();

    let to_rewrite: Vec<&SegmentView> = view
        .segments
        .iter()
        .filter(|s| s.base_offset < end_offset)
        .collect();
    let groups = group_segments_by_size(
        &to_rewrite,
        view.config.segment_bytes.max(0) as u64,
        view.config.segment_index_bytes.max(0) as u64,
        to_clean.first_uncleanable_offset,
    );
    let ctx = RoundContext {
        view,
        now_ms,
        upper_bound_of_round: to_clean.first_uncleanable_offset,
    };
    let mut txn = CleanedTxnState::default();
    let first_base = to_rewrite.first().map_or(0, |s| s.base_offset);
    // Every rewritten segment is rewritten whole, past the map's end too, so its transaction
    // index is rebuilt from the aborted transactions of its full range (Kafka's cleanSegments
    // collects them over [segment base, next segment base)); bounding them by the map's end
    // would drop the index entry of an abort after it, and read_committed consumers would
    // then get its records.
    let rewrite_end = view
        .segments
        .iter()
        .map(|s| s.base_offset)
        .find(|b| *b >= end_offset)
        .unwrap_or(to_clean.first_uncleanable_offset);
    txn.add_aborted(
        view.aborted
            .iter()
            .filter(|t| t.last_offset >= first_base && t.first_offset < rewrite_end)
            .copied(),
    );
    let mut cleaned = Vec::new();
    for group in groups {
        let segs = &to_rewrite[group];
        match clean_group(&ctx, segs, map, &mut txn, &mut stats, throttle) {
            Ok(c) => cleaned.push(c),
            Err(e) => {
                for c in &cleaned {
                    discard_cleaned(c);
                }
                return Err(e);
            }
        }
    }
    Ok(CleanOutcome {
        end_offset,
        cleaned,
        generation: view.generation,
        stats,
    })
}

/// Removes a cleaning's files (aborted or refused swap).
pub fn discard_cleaned(c: &CleanedSegment) {
    let _ = std::fs::remove_file(&c.log_path);
    if let Some(p) = &c.txn_index_path {
        let _ = std::fs::remove_file(p);
    }
}

fn cleaned_path(view: &LogView, base: i64, suffix: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}{CLEANED_SUFFIX}",
        segment_file(&view.dir, base, suffix).display()
    ))
}

/// Kafka's `cleanSegments`: one group into one `.cleaned` segment, fsynced, carrying the last
/// source segment's modification time.
fn clean_group(
    ctx: &RoundContext<'_>,
    segs: &[&SegmentView],
    map: &mut OffsetMap,
    txn: &mut CleanedTxnState,
    stats: &mut CleanerStats,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<CleanedSegment> {
    let base = segs[0].base_offset;
    let log_path = cleaned_path(ctx.view, base, LOG_SUFFIX);
    let txn_path = cleaned_path(ctx.view, base, TXN_INDEX_SUFFIX);
    let _ = std::fs::remove_file(&log_path);
    let _ = std::fs::remove_file(&txn_path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&log_path)?;
    let mut written = 0u64;
    let mut out = Vec::with_capacity(WRITE_CHUNK * 2);
    let result = (|| -> io::Result<CleanedSegment> {
        for seg in segs {
            clean_into(ctx, seg, map, txn, &mut out, stats, throttle)?;
            if out.len() >= WRITE_CHUNK {
                throttle(out.len() as u64);
                file.write_all_at(&out, written)?;
                written += out.len() as u64;
                out.clear();
            }
        }
        throttle(out.len() as u64);
        file.write_all_at(&out, written)?;
        written += out.len() as u64;
        let aborts = txn.take_retained_aborts();
        let txn_index_path = if aborts.is_empty() {
            None
        } else {
            let mut index = TransactionIndex::open(&txn_path)?;
            for a in aborts {
                index.append(a)?;
            }
            index.flush()?;
            Some(txn_path.clone())
        };
        file.sync_all()?;
        if let Some(t) = segs.last().and_then(|s| s.last_modified) {
            file.set_modified(t)?;
        }
        Ok(CleanedSegment {
            base_offset: base,
            replaces: segs.iter().map(|s| (s.base_offset, s.size)).collect(),
            log_path: log_path.clone(),
            txn_index_path,
            size: written,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&log_path);
        let _ = std::fs::remove_file(&txn_path);
    }
    result
}
