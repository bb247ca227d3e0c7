//! Batch payload codecs (Kafka's `CompressionType` with `GzipCompression`, `SnappyCompression`,
//! `Lz4Compression` / `KafkaLZ4BlockOutputStream`, `ZstdCompression`). The whole records section
//! of a v2 batch is one compressed stream. Every decompression is capped by a caller-given limit
//! so a small "zip bomb" batch cannot exhaust memory.

use std::io::{Read, Write};

use super::{Compression, RecordError};

/// Decompressed-size cap used when the caller has no better number: well above what a batch
/// within Kafka's default `message.max.bytes` (1 MiB) decompresses to in practice.
pub const DEFAULT_DECOMPRESSION_LIMIT: usize = 64 * 1024 * 1024;

/// xerial snappy-java's stream header: magic, then version 1 and minimum compatible version 1.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
/// snappy-java's `SnappyOutputStream` default block size, which the Java producer uses.
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
/// A snappy copy element emits at most 64 bytes from a 3-byte tag, so no valid raw stream expands
/// by more than ~22x; a length header claiming more is rejected before allocating.
const SNAPPY_MAX_RATIO: usize = 22;

fn codec_err(codec: &str, e: impl std::fmt::Display) -> RecordError {
    RecordError::Compression(format!("{codec}: {e}"))
}

/// Compresses a records section with `codec` the way the Java client frames it.
pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, RecordError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 64),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(|e| codec_err("gzip", e))?;
            enc.finish().map_err(|e| codec_err("gzip", e))
        }
        Compression::Snappy => snappy_xerial_compress(data),
        Compression::Lz4 => {
            // Kafka (KIP-57) writes LZ4 frames: version 01, independent 64 KiB blocks, no block
            // or content checksum, no content size; Kafka's reader expects exactly that shape.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(data.len() / 2 + 64),
            );
            enc.write_all(data).map_err(|e| codec_err("lz4", e))?;
            enc.finish().map_err(|e| codec_err("lz4", e))
        }
        Compression::Zstd => {
            // Level 3 is zstd's and Kafka's default (compression.zstd.level).
            zstd::stream::encode_all(data, 3).map_err(|e| codec_err("zstd", e))
        }
    }
}

/// A reader of `data`'s decompressed bytes, for walking a compressed records section without
/// inflating all of it at once (produce validation keeps one record in memory at a time). No
/// single snappy block may inflate past `limit`; the caller caps the total. Decoder failures
/// surface as `io::Error`s from `read`.
pub fn decompressing_reader<'a>(
    codec: Compression,
    data: &'a [u8],
    limit: usize,
) -> Result<Box<dyn Read + 'a>, RecordError> {
    Ok(match codec {
        Compression::None => Box::new(data),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Snappy => Box::new(SnappyBlocks {
            data,
            pos: 0,
            raw_pending: !data.starts_with(&XERIAL_MAGIC),
            block: Vec::new(),
            block_pos: 0,
            limit,
        }),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => {
            let mut dec =
                zstd::stream::read::Decoder::new(data).map_err(|e| codec_err("zstd", e))?;
            dec.window_log_max(27).map_err(|e| codec_err("zstd", e))?;
            Box::new(dec)
        }
    })
}

/// [`snappy_decompress`] one block at a time, as a reader.
struct SnappyBlocks<'a> {
    data: &'a [u8],
    /// Where the next xerial block starts.
    pos: usize,
    /// No xerial magic: the whole payload is one raw block, not read yet.
    raw_pending: bool,
    block: Vec<u8>,
    block_pos: usize,
    limit: usize,
}

impl SnappyBlocks<'_> {
    /// Decompresses the next block into `self.block`; false at the end of the data.
    fn next_block(&mut self) -> Result<bool, RecordError> {
        self.block.clear();
        self.block_pos = 0;
        let block = if std::mem::take(&mut self.raw_pending) {
            self.pos = self.data.len();
            self.data
        } else {
            match next_xerial_block(self.data, self.pos)? {
                Some((block, next)) => {
                    self.pos = next;
                    block
                }
                None => return Ok(false),
            }
        };
        snappy_raw_into(block, &mut self.block, self.limit)?;
        Ok(true)
    }
}

impl Read for SnappyBlocks<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.block_pos == self.block.len() {
            if !self.next_block().map_err(std::io::Error::other)? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.block.len() - self.block_pos);
        out[..n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
        self.block_pos += n;
        Ok(n)
    }
}

/// The compressed block at or after `pos` in a xerial stream (skipping stream headers, as
/// snappy-java accepts concatenated streams) and the position after it; None at the end.
fn next_xerial_block(data: &[u8], mut pos: usize) -> Result<Option<(&[u8], usize)>, RecordError> {
    while pos < data.len() {
        if data[pos..].starts_with(&XERIAL_MAGIC) {
            if data.len() - pos < XERIAL_HEADER_LEN {
                return Err(codec_err("snappy", "truncated xerial header"));
            }
            pos += XERIAL_HEADER_LEN;
            continue;
        }
        let Some(len_bytes) = data.get(pos..pos + 4) else {
            return Err(codec_err("snappy", "truncated xerial block length"));
        };
        let len = i32::from_be_bytes(len_bytes.try_into().expect("4 bytes"));
        pos += 4;
        let Some(block) = usize::try_from(len)
            .ok()
            .and_then(|l| data.get(pos..pos + l))
        else {
            return Err(codec_err(
                "snappy",
                format!("invalid xerial block length {len}"),
            ));
        };
        return Ok(Some((block, pos + block.len())));
    }
    Ok(None)
}

/// Decompresses a records section, failing once the output would exceed `limit` bytes.
pub fn decompress(codec: Compression, data: &[u8], limit: usize) -> Result<Vec<u8>, RecordError> {
    match codec {
        Compression::None => {
            if data.len() > limit {
                return Err(RecordError::DecompressedTooLarge { limit });
            }
            Ok(data.to_vec())
        }
        // Java's GZIPInputStream reads concatenated members, so we do too.
        Compression::Gzip => read_capped("gzip", flate2::read::MultiGzDecoder::new(data), limit),
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => read_capped("lz4", lz4_flex::frame::FrameDecoder::new(data), limit),
        Compression::Zstd => {
            // The decoder's window is capped at zstd's default (2^27), which is also what the
            // Java consumer accepts; larger windows in a crafted frame are refused up front.
            let mut dec =
                zstd::stream::read::Decoder::new(data).map_err(|e| codec_err("zstd", e))?;
            dec.window_log_max(27).map_err(|e| codec_err("zstd", e))?;
            read_capped("zstd", dec, limit)
        }
    }
}

fn read_capped(codec: &str, reader: impl Read, limit: usize) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    // Read one byte past the limit so "exactly limit" and "more than limit" are told apart.
    let mut capped = reader.take(limit as u64 + 1);
    capped
        .read_to_end(&mut out)
        .map_err(|e| codec_err(codec, e))?;
    if out.len() > limit {
        return Err(RecordError::DecompressedTooLarge { limit });
    }
    Ok(out)
}

fn snappy_xerial_compress(data: &[u8]) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let block = enc
            .compress_vec(chunk)
            .map_err(|e| codec_err("snappy", e))?;
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

fn snappy_raw_into(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), RecordError> {
    let len = snap::raw::decompress_len(block).map_err(|e| codec_err("snappy", e))?;
    if out.len() + len > limit {
        return Err(RecordError::DecompressedTooLarge { limit });
    }
    if len > block.len().saturating_mul(SNAPPY_MAX_RATIO) + 64 {
        return Err(codec_err(
            "snappy",
            "declared length exceeds what the input can encode",
        ));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| codec_err("snappy", e))?;
    Ok(())
}

/// Reads xerial-framed snappy (what the Java client writes) or, like snappy-java's
/// `SnappyInputStream`, falls back to one raw snappy block when the magic is absent
/// (librdkafka and some other clients write raw snappy).
fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    if !data.starts_with(&XERIAL_MAGIC) {
        snappy_raw_into(data, &mut out, limit)?;
        return Ok(out);
    }
    let mut pos = 0;
    while let Some((block, next)) = next_xerial_block(data, pos)? {
        pos = next;
        snappy_raw_into(block, &mut out, limit)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    #[test]
    fn every_codec_round_trips_small_and_multi_block() {
        for codec in ALL {
            for len in [0, 1, 100, XERIAL_BLOCK_SIZE + 7, 200_000] {
                let data = sample(len);
                let c = compress(codec, &data).unwrap();
                assert_eq!(
                    decompress(codec, &c, len).unwrap(),
                    data,
                    "{codec:?} len {len}"
                );
            }
        }
    }

    #[test]
    fn snappy_writes_xerial_framing_and_reads_raw() {
        let data = sample(5000);
        let framed = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(&framed[..8], &XERIAL_MAGIC);
        assert_eq!(&framed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn lz4_frame_header_matches_kafka_shape() {
        let c = compress(Compression::Lz4, b"hello hello hello").unwrap();
        assert_eq!(&c[..4], &[0x04, 0x22, 0x4d, 0x18], "LZ4 frame magic");
        // FLG: version 01, block independence, no checksums, no content size.
        assert_eq!(c[4], 0b0110_0000);
        // BD: 64 KiB max block size.
        assert_eq!(c[5], 0b0100_0000);
    }

    #[test]
    fn decompression_is_capped() {
        let bomb = vec![0u8; 4 * 1024 * 1024];
        for codec in ALL {
            let c = compress(codec, &bomb).unwrap();
            assert_eq!(
                decompress(codec, &c, 1024 * 1024),
                Err(RecordError::DecompressedTooLarge { limit: 1024 * 1024 }),
                "{codec:?}"
            );
            assert_eq!(decompress(codec, &c, bomb.len()).unwrap().len(), bomb.len());
        }
    }

    #[test]
    fn snappy_raw_with_lying_length_is_rejected_without_allocating() {
        // Varint length header claiming ~2 GiB followed by nothing.
        let lie = [0xff, 0xff, 0xff, 0xff, 0x07];
        assert!(decompress(Compression::Snappy, &lie, usize::MAX / 2).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let len = rng.gen_range(0..256);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            for codec in ALL {
                let _ = decompress(codec, &buf, 1 << 16);
            }
            // Valid magic with garbage after it reaches deeper into each decoder.
            if buf.len() > 20 {
                buf[..8].copy_from_slice(&XERIAL_MAGIC);
                let _ = decompress(Compression::Snappy, &buf, 1 << 16);
                buf[..4].copy_from_slice(&[0x04, 0x22, 0x4d, 0x18]);
                let _ = decompress(Compression::Lz4, &buf, 1 << 16);
                buf[..4].copy_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
                let _ = decompress(Compression::Zstd, &buf, 1 << 16);
                buf[..3].copy_from_slice(&[0x1f, 0x8b, 0x08]);
                let _ = decompress(Compression::Gzip, &buf, 1 << 16);
            }
        }
    }
}
