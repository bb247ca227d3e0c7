//! Zig-zag varint / varlong helpers for the record format (Kafka's `ByteUtils.readVarint`,
//! `readVarlong`, `writeVarint`, `sizeOfVarint`). Kept local to `records` so the batch codec does
//! not depend on the protocol codec's reader types.

use super::RecordError;

/// Maps signed to unsigned so small magnitudes encode short (0, -1, 1, -2 → 0, 1, 2, 3).
pub fn zigzag_encode_i32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}
pub fn zigzag_decode_i32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}
pub fn zigzag_encode_i64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
pub fn zigzag_decode_i64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Most varints in a record (attributes aside: offset and timestamp deltas of small batches,
/// null key, header count) fit one byte, and the two lengths (record and value) of records
/// between 64 B and 8 KiB fit two; produce validation reads six per record, so those two
/// cases are inlined and the loop stays out of line (callgrind, 20k x 1 KiB produce: the
/// out-of-line loop was 88 instructions per record, for the two 2-byte lengths).
#[inline]
fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, RecordError> {
    let p = *pos;
    if let Some(&b0) = buf.get(p) {
        if b0 & 0x80 == 0 {
            *pos = p + 1;
            return Ok(u64::from(b0));
        }
        // Every caller allows at least 5 bytes, so a 2-byte value is never too long.
        if let Some(&b1) = buf.get(p + 1) {
            if b1 & 0x80 == 0 {
                *pos = p + 2;
                return Ok(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
            }
        }
    }
    read_unsigned_multi_byte(buf, pos, max_bytes)
}

/// [`read_unsigned`] for a caller that only needs to know whether the bytes are valid (the
/// produce validation's first pass): `None` carries no message, so nothing goes through memory.
#[inline(always)]
pub(crate) fn read_unsigned_checked(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let p = *pos;
    let b0 = *buf.get(p)?;
    if b0 & 0x80 == 0 {
        *pos = p + 1;
        return Some(u64::from(b0));
    }
    let b1 = *buf.get(p + 1)?;
    if b1 & 0x80 == 0 {
        *pos = p + 2;
        return Some(u64::from(b0 & 0x7f) | (u64::from(b1) << 7));
    }
    read_unsigned_multi_byte(buf, pos, max_bytes).ok()
}

fn read_unsigned_multi_byte(
    buf: &[u8],
    pos: &mut usize,
    max_bytes: usize,
) -> Result<u64, RecordError> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let Some(&b) = buf.get(*pos) else {
            return Err(RecordError::InvalidRecord(
                "varint runs past the end of the buffer".into(),
            ));
        };
        *pos += 1;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(RecordError::InvalidRecord("varint is too long".into()))
}

/// Reads a zig-zag varint (at most 5 bytes) at `*pos`, advancing it.
#[inline]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, RecordError> {
    // Like Kafka, bits beyond 32 in the fifth byte are dropped rather than rejected.
    read_unsigned(buf, pos, 5).map(|v| zigzag_decode_i32(v as u32))
}

/// Reads a zig-zag varlong (at most 10 bytes) at `*pos`, advancing it.
#[inline]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, RecordError> {
    read_unsigned(buf, pos, 10).map(zigzag_decode_i64)
}

fn write_unsigned(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_unsigned(out, u64::from(zigzag_encode_i32(v)));
}
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_unsigned(out, zigzag_encode_i64(v));
}

fn size_of_unsigned(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}
pub fn size_of_varint(v: i32) -> usize {
    size_of_unsigned(u64::from(zigzag_encode_i32(v)))
}
pub fn size_of_varlong(v: i64) -> usize {
    size_of_unsigned(zigzag_encode_i64(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_known_values() {
        for (v, z) in [
            (0, 0u32),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i32::MAX, u32::MAX - 1),
            (i32::MIN, u32::MAX),
        ] {
            assert_eq!(zigzag_encode_i32(v), z);
            assert_eq!(zigzag_decode_i32(z), v);
        }
    }

    #[test]
    fn varint_round_trip_and_sizes() {
        for v in [0, 1, -1, 63, -64, 64, -65, 8191, 8192, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out.len(), size_of_varint(v), "size of {v}");
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
        for v in [0i64, -1, 1, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            assert_eq!(out.len(), size_of_varlong(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos).unwrap(), v);
        }
        // Known encodings from the protocol guide: 300 → zigzag 600 → 0xd8 0x04.
        let mut out = Vec::new();
        write_varint(&mut out, 300);
        assert_eq!(out, [0xd8, 0x04]);
    }

    #[test]
    fn two_byte_varints_decode_at_every_boundary() {
        // The inlined two-byte path against the general loop: every 2-byte value, plus the
        // 1-byte and 3-byte neighbours, at an offset and at the buffer's very end.
        for z in (0u32..=0x3fff).chain([0x4000, 0x4001, 0x1f_ffff]) {
            let v = zigzag_decode_i32(z);
            let mut out = vec![0x55];
            write_varint(&mut out, v);
            let len = out.len() - 1;
            assert_eq!(len, size_of_varint(v));
            let mut pos = 1;
            assert_eq!(read_varint(&out, &mut pos).unwrap(), v, "zigzag {z}");
            assert_eq!(pos, 1 + len);
            let mut pos = 1;
            assert_eq!(
                read_unsigned_multi_byte(&out, &mut pos, 5).unwrap(),
                u64::from(z)
            );
        }
        // A 2-byte prefix whose second byte continues, cut at the end: truncated, not a value.
        assert!(read_varint(&[0x80, 0x80], &mut 0).is_err());
        assert!(read_varint(&[0x81], &mut 0).is_err());
    }

    #[test]
    fn varint_rejects_overlong_and_truncated() {
        let mut pos = 0;
        assert!(read_varint(&[0xff; 6], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varint(&[0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varlong(&[0xff; 11], &mut pos).is_err());
        let msg = |r: Result<i32, RecordError>| r.unwrap_err().to_string();
        assert!(msg(read_varint(&[0xff; 6], &mut 0)).contains("too long"));
        assert!(msg(read_varint(&[0x80, 0x80], &mut 0)).contains("past the end"));
        // A multi-byte value ending exactly at the buffer's end, after an offset.
        let mut pos = 1;
        assert_eq!(read_varint(&[0x00, 0xd8, 0x04], &mut pos).unwrap(), 300);
        assert_eq!(pos, 3);
    }
}
