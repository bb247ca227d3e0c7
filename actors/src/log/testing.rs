//! Hand-built v2 batches for the log's tests and benchmarks (independent of the protocol
//! crate's builder, so the log can be tested against its own reading of the format).

use std::io::Write;

use kactor_protocol::records::{BATCH_HEADER_LEN, CRC_OFFSET, LOG_OVERHEAD};

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

/// One record: timestamp, optional key, value.
#[derive(Debug, Clone)]
pub struct TestRecord {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

/// A valid v2 batch at `base_offset` holding `records` (offset deltas 0..n), CreateTime,
/// no producer id, gzip-compressed if asked.
pub fn build_batch(
    base_offset: i64,
    leader_epoch: i32,
    records: &[TestRecord],
    gzip: bool,
) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records[0].timestamp;
    let max_ts = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .expect("non-empty");
    let mut body = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut rec = vec![0u8]; // attributes
        put_varlong(&mut rec, r.timestamp - base_ts);
        put_varlong(&mut rec, i as i64);
        match &r.key {
            Some(k) => {
                put_varlong(&mut rec, k.len() as i64);
                rec.extend_from_slice(k);
            }
            None => put_varlong(&mut rec, -1),
        }
        put_varlong(&mut rec, r.value.len() as i64);
        rec.extend_from_slice(&r.value);
        put_varlong(&mut rec, 0); // headers
        put_varlong(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    if gzip {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&body).expect("in memory");
        body = enc.finish().expect("in memory");
    }
    let mut b = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&leader_epoch.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]); // crc, below
    b.extend_from_slice(&(if gzip { 1i16 } else { 0 }).to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    let crc = crc32c::crc32c(&b[CRC_OFFSET + 4..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// `count` records of `value_len` bytes each, timestamps `timestamp`, `timestamp+1`, ...
pub fn simple_batch(
    base_offset: i64,
    leader_epoch: i32,
    count: usize,
    value_len: usize,
    timestamp: i64,
) -> Vec<u8> {
    let records: Vec<TestRecord> = (0..count)
        .map(|i| TestRecord {
            timestamp: timestamp + i as i64,
            key: None,
            value: vec![(base_offset as usize + i) as u8; value_len],
        })
        .collect();
    build_batch(base_offset, leader_epoch, &records, false)
}

/// One small record in a batch claiming `offsets` offsets (lastOffsetDelta = offsets - 1, as a
/// compacted batch can), padded to about `size` bytes: a log spanning 100 M offsets cheaply.
pub fn wide_batch(base_offset: i64, offsets: i32, size: usize) -> Vec<u8> {
    let mut b = simple_batch(base_offset, 0, 1, size.saturating_sub(80), 0);
    b[23..27].copy_from_slice(&(offsets - 1).to_be_bytes());
    let crc = crc32c::crc32c(&b[CRC_OFFSET + 4..]);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    b
}
