//! One record inside a v2 batch (Kafka's `DefaultRecord`) and its headers (`RecordHeader`), as
//! zero-copy views: key, value and header fields are `Bytes` slices of the batch (or of the one
//! buffer a compressed batch was inflated into).

use bytes::Bytes;

use super::varint::{read_varint, read_varlong};
use super::RecordError;

/// A record header: a non-null UTF-8 key (not validated, as Kafka doesn't on the broker) and a
/// nullable value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// A decoded record. Offsets and timestamps are deltas against the batch header; use
/// [`Record::offset`] / [`Record::timestamp`] with the header's base values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record-level attributes; unused by Kafka so far, kept as sent.
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
    /// Encoded size including the leading length varint.
    pub size_in_bytes: usize,
}

impl Record {
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset + self.offset_delta as i64
    }
    pub fn timestamp(&self, base_timestamp: i64) -> i64 {
        base_timestamp.wrapping_add(self.timestamp_delta)
    }
}

fn invalid(msg: impl Into<String>) -> RecordError {
    RecordError::InvalidRecord(msg.into())
}

type Span = std::ops::Range<usize>;

/// Reads a varint length-prefixed byte field within `buf[..end]`; a negative length means null
/// (Kafka treats every negative length that way for keys and values).
// Always inlined: out of line, its Result went through the stack and each call stalled on
// the store-to-load forward (perf annotate: over half of parse_raw_record's samples).
#[inline(always)]
fn read_nullable(
    buf: &[u8],
    pos: &mut usize,
    end: usize,
    what: &str,
) -> Result<Option<Span>, RecordError> {
    let len = read_varint(&buf[..end], pos)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    if end - *pos < len {
        return Err(invalid(format!(
            "{what} of {len} bytes runs past the record"
        )));
    }
    let span = *pos..*pos + len;
    *pos += len;
    Ok(Some(span))
}

/// A record located in a buffer: the same fields as [`Record`], as byte ranges.
pub(crate) struct RawRecord {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Span>,
    pub value: Option<Span>,
    pub headers: Vec<(Span, Option<Span>)>,
    pub size_in_bytes: usize,
}

/// Parses the record starting at `*pos` in `buf`, advancing `*pos` past it. Fails (never panics)
/// on anything truncated or inconsistent with the record's own length prefix. Header ranges are
/// collected only when `collect_headers` (validation needs their bounds checked, not kept).
/// Inlined: produce validation calls it once per record and uses only a few of its fields.
#[inline]
pub(crate) fn parse_raw_record(
    buf: &[u8],
    pos: &mut usize,
    collect_headers: bool,
) -> Result<RawRecord, RecordError> {
    let start = *pos;
    let body_len = read_varint(buf, pos)?;
    if body_len < 0 {
        return Err(invalid(format!("negative record length {body_len}")));
    }
    let body_start = *pos;
    let end = body_start
        .checked_add(body_len as usize)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| invalid(format!("record length {body_len} runs past the batch")))?;
    let body = &buf[..end];
    let attributes = *body
        .get(*pos)
        .ok_or_else(|| invalid("record too short for attributes"))? as i8;
    *pos += 1;
    let timestamp_delta = read_varlong(body, pos)?;
    let offset_delta = read_varint(body, pos)?;
    let key = read_nullable(buf, pos, end, "key")?;
    let value = read_nullable(buf, pos, end, "value")?;
    let header_count = read_varint(body, pos)?;
    if header_count < 0 {
        return Err(invalid(format!(
            "invalid number of record headers {header_count}"
        )));
    }
    // Each header takes at least two bytes, so a larger count is a lie; checking it first keeps
    // the Vec allocation proportional to the input.
    if header_count as usize > (end - *pos) / 2 {
        return Err(invalid(format!(
            "{header_count} headers cannot fit in the record"
        )));
    }
    let mut headers = if collect_headers {
        Vec::with_capacity(header_count as usize)
    } else {
        Vec::new()
    };
    for _ in 0..header_count {
        let key = read_nullable(buf, pos, end, "header key")?
            .ok_or_else(|| invalid("invalid negative header key size"))?;
        let value = read_nullable(buf, pos, end, "header value")?;
        if collect_headers {
            headers.push((key, value));
        }
    }
    if *pos != end {
        return Err(invalid(format!(
            "invalid record size: expected {body_len} bytes in record payload, read {}",
            *pos - body_start
        )));
    }
    Ok(RawRecord {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
        size_in_bytes: end - start,
    })
}

/// The per-record facts produce validation checks, as read by [`skim_record`].
pub(crate) struct Skimmed {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub has_key: bool,
}

/// Reads the record at `*pos` under exactly [`parse_raw_record`]'s rules, keeping only what
/// validation needs. `None` means the record is malformed; the caller re-reads it with
/// [`parse_raw_record`] for the error. Validation walks every record of every produced batch
/// (as Kafka's LogValidator does), and at 100 B records the detailed walk, which builds a
/// [`RawRecord`] and returns large `Result`s through memory, was a quarter of the broker's CPU
/// (perf, 100 B produce); this one keeps everything in registers.
#[inline(always)]
pub(crate) fn skim_record(buf: &[u8], pos: &mut usize) -> Option<Skimmed> {
    use super::varint::{read_unsigned_checked as uv, zigzag_decode_i32, zigzag_decode_i64};
    let int = |b: &[u8], p: &mut usize| uv(b, p, 5).map(|v| zigzag_decode_i32(v as u32));
    let body_len = int(buf, pos)?;
    if body_len < 0 {
        return None;
    }
    let end = pos
        .checked_add(body_len as usize)
        .filter(|&e| e <= buf.len())?;
    let body = &buf[..end];
    if *pos >= end {
        return None;
    }
    *pos += 1; // attributes
    let timestamp_delta = zigzag_decode_i64(uv(body, pos, 10)?);
    let offset_delta = int(body, pos)?;
    // A nullable field: a negative length is null, anything else must fit in the record.
    let skip = |p: &mut usize| -> Option<bool> {
        let len = int(body, p)?;
        if len < 0 {
            return Some(false);
        }
        if end - *p < len as usize {
            return None;
        }
        *p += len as usize;
        Some(true)
    };
    let has_key = skip(pos)?;
    skip(pos)?; // value
    let header_count = int(body, pos)?;
    if header_count < 0 || header_count as usize > (end - *pos) / 2 {
        return None;
    }
    for _ in 0..header_count {
        if !skip(pos)? {
            return None; // a null header key
        }
        skip(pos)?;
    }
    (*pos == end).then_some(Skimmed {
        timestamp_delta,
        offset_delta,
        has_key,
    })
}

/// Parses the record at `*pos` as slices of `buf`.
pub(crate) fn parse_record(buf: &Bytes, pos: &mut usize) -> Result<Record, RecordError> {
    let raw = parse_raw_record(buf, pos, true)?;
    Ok(Record {
        attributes: raw.attributes,
        timestamp_delta: raw.timestamp_delta,
        offset_delta: raw.offset_delta,
        key: raw.key.map(|s| buf.slice(s)),
        value: raw.value.map(|s| buf.slice(s)),
        headers: raw
            .headers
            .into_iter()
            .map(|(k, v)| Header {
                key: buf.slice(k),
                value: v.map(|v| buf.slice(v)),
            })
            .collect(),
        size_in_bytes: raw.size_in_bytes,
    })
}
