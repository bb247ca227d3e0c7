//! Wire primitives (Kafka's `Readable`/`Writable`, `ByteUtils`, `Uuid`, `RawTaggedField`):
//! fixed-width integers, varints, classic and compact strings / bytes / arrays, UUIDs and the
//! chunked [`Writer`] that lets a response carry record data by reference (memory or file) so
//! the produce and fetch paths never copy payloads.
//!
//! Every decoder checks the remaining input before it allocates, so a hostile length prefix
//! costs an error, not memory.

use std::fmt;
use std::fs::File;
use std::str::FromStr;
use std::sync::Arc;

pub use bytes::Bytes;
use bytes::{Buf, BufMut, BytesMut};
use thiserror::Error;

/// Payloads at least this long are appended to a [`Writer`] by reference instead of copied;
/// below it a copy is cheaper than another chunk (and another iovec on the socket).
pub const REFERENCE_THRESHOLD: usize = 512;

/// Why a frame could not be decoded. Carries no input bytes, so it is cheap to log.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("input truncated: need {needed} more bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    #[error("malformed varint")]
    InvalidVarint,
    #[error("invalid length {length} for {what}")]
    InvalidLength { what: &'static str, length: i64 },
    #[error("null value in non-nullable field {field}")]
    UnexpectedNull { field: &'static str },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("version {version} of {message} is not supported")]
    UnsupportedVersion { message: &'static str, version: i16 },
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
}

/// Why a value could not be encoded. Encoding refuses rather than silently dropping data.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EncodeError {
    #[error("version {version} of {message} is not supported")]
    UnsupportedVersion { message: &'static str, version: i16 },
    #[error(
        "field {message}.{field} has a non-default value but does not exist in version {version}"
    )]
    FieldNotInVersion {
        message: &'static str,
        field: &'static str,
        version: i16,
    },
    #[error("field {message}.{field} is null but not nullable in version {version}")]
    NullNotAllowed {
        message: &'static str,
        field: &'static str,
        version: i16,
    },
    #[error("{what} too long to encode: {length}")]
    TooLong { what: &'static str, length: usize },
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("body does not match api key {0}")]
    ApiKeyMismatch(i16),
}

/// Encodes a value at a protocol version.
pub trait Encode {
    /// Fails (instead of dropping data) when a non-default value cannot be carried at `version`.
    fn encode(&self, w: &mut Writer, version: i16) -> Result<(), EncodeError>;
    fn encoded_len(&self, version: i16) -> Result<usize, EncodeError>;
}

/// Decodes a value at a protocol version.
pub trait Decode: Sized {
    /// Never panics; never allocates more than a small constant times `buf.len()`.
    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError>;
}

/// A top-level schema (request, response, header, record).
pub trait Message: Encode + Decode {
    const VALID_VERSIONS: (i16, i16);
    /// Lowest flexible version, or None.
    const FLEXIBLE_MIN: Option<i16>;
}

/// A request body and the response it is answered with.
pub trait Request: Message {
    const API_KEY: i16;
    type Response: Message;
}

/// A tagged field this build does not know, kept verbatim so it survives a decode/encode trip.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawTaggedField {
    pub tag: u32,
    pub data: Bytes,
}

/// A slice of a log segment file, sent with `sendfile` on plaintext listeners.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u32,
}

impl PartialEq for FileSlice {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
            && self.position == other.position
            && self.len == other.len
    }
}

impl FileSlice {
    /// Reads the slice into memory (tests, TLS listeners). Short files are an error.
    pub fn read_to_bytes(&self) -> std::io::Result<Bytes> {
        use std::os::unix::fs::FileExt;
        let mut v = vec![0u8; self.len as usize];
        self.file.read_exact_at(&mut v, self.position)?;
        Ok(Bytes::from(v))
    }
}

/// The value of a `records` field: record batches in memory (decoded requests: a slice of the
/// request frame) or in a segment file (fetch responses).
#[derive(Debug, Clone, PartialEq)]
pub enum Records {
    Memory(Bytes),
    File(FileSlice),
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Memory(b) => b.len(),
            Records::File(f) => f.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Records {
    fn default() -> Self {
        Records::Memory(Bytes::new())
    }
}

/// A Kafka UUID (topic ids, directory ids). Displayed like Java's `Uuid.toString`: URL-safe
/// base64 of the 16 bytes without padding.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const ZERO: Uuid = Uuid([0; 16]);
    /// Kafka reserves this id for the `__cluster_metadata` topic.
    pub const METADATA_TOPIC_ID: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// A random version-4 UUID, never one of the reserved ids and never one whose string form
    /// starts with '-' (Kafka's CLIs would read it as an option), as `Uuid.randomUuid` does.
    pub fn random() -> Uuid {
        Self::random_with(&mut rand::thread_rng())
    }

    pub fn random_with<R: rand::Rng + ?Sized>(rng: &mut R) -> Uuid {
        loop {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            let u = Uuid(b);
            if u != Uuid::ZERO && u != Uuid::METADATA_TOPIC_ID && !u.to_string().starts_with('-') {
                return u;
            }
        }
    }
}

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = [0u8; 22];
        let mut o = 0;
        for chunk in self.0.chunks(3) {
            let n = chunk.len();
            let v = (chunk[0] as u32) << 16
                | (*chunk.get(1).unwrap_or(&0) as u32) << 8
                | *chunk.get(2).unwrap_or(&0) as u32;
            for i in 0..=n {
                out[o] = B64URL[((v >> (18 - 6 * i)) & 63) as usize];
                o += 1;
            }
        }
        // Only ASCII from the table above was written.
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid base64 UUID {0:?}")]
pub struct UuidParseError(pub String);

impl FromStr for Uuid {
    type Err = UuidParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UuidParseError(s.to_string());
        let s = s.trim_end_matches('=');
        if s.len() != 22 {
            return Err(err());
        }
        let mut acc: u32 = 0;
        let mut bits = 0;
        let mut out = Vec::with_capacity(16);
        for c in s.bytes() {
            let v = B64URL.iter().position(|&x| x == c).ok_or_else(err)? as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
                acc &= (1 << bits) - 1;
            }
        }
        // 22 chars = 132 bits: 16 bytes plus 4 bits that must be zero.
        if out.len() != 16 || acc != 0 {
            return Err(err());
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&out);
        Ok(Uuid(b))
    }
}

// ---------------------------------------------------------------------------------------------
// Writer

/// An encoded frame under construction: small fields go into one `BytesMut`, large payloads
/// (`Records`, big `bytes`) are appended as separate chunks by reference.
#[derive(Debug, Default)]
pub struct Writer {
    buf: BytesMut,
    chunks: Vec<Records>,
    chunks_len: usize,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(cap: usize) -> Self {
        Writer {
            buf: BytesMut::with_capacity(cap),
            chunks: Vec::new(),
            chunks_len: 0,
        }
    }

    /// Total bytes written so far (memory and file chunks).
    pub fn len(&self) -> usize {
        self.chunks_len + self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The inline buffer, for callers that write raw bytes (frame length prefixes, headers).
    pub fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    fn flush_buf(&mut self) {
        if !self.buf.is_empty() {
            let b = self.buf.split().freeze();
            self.chunks_len += b.len();
            self.chunks.push(Records::Memory(b));
        }
    }

    /// Appends a payload: copied if small, otherwise referenced (a `Bytes` handle or a file
    /// slice), so a megabyte of record data costs a pointer, not a copy.
    pub fn put_records(&mut self, r: &Records) {
        match r {
            Records::Memory(b) => self.put_payload(b),
            Records::File(f) => {
                if f.len > 0 {
                    self.flush_buf();
                    self.chunks_len += f.len as usize;
                    self.chunks.push(Records::File(f.clone()));
                }
            }
        }
    }

    /// Appends raw bytes, by reference when large.
    pub fn put_payload(&mut self, b: &Bytes) {
        if b.len() >= REFERENCE_THRESHOLD {
            self.flush_buf();
            self.chunks_len += b.len();
            self.chunks.push(Records::Memory(b.clone()));
        } else {
            self.buf.extend_from_slice(b);
        }
    }

    /// The frame as chunks in order, ready for a vectored write / `sendfile`.
    pub fn into_chunks(mut self) -> Vec<Records> {
        self.flush_buf();
        self.chunks
    }

    /// The frame as one buffer. For memory-only frames; file slices are read with `pread`
    /// (use [`Writer::try_into_bytes`] to handle I/O errors).
    ///
    /// # Panics
    /// If a file slice cannot be read.
    pub fn into_bytes(self) -> Bytes {
        self.try_into_bytes().expect(
            "Writer::into_bytes: file chunk unreadable; use into_chunks for file-backed frames",
        )
    }

    pub fn try_into_bytes(mut self) -> std::io::Result<Bytes> {
        if self.chunks.is_empty() {
            return Ok(self.buf.freeze());
        }
        if self.chunks.len() == 1 && self.buf.is_empty() {
            if let Some(Records::Memory(b)) = self.chunks.pop() {
                return Ok(b);
            }
            unreachable!("checked above")
        }
        let mut out = BytesMut::with_capacity(self.len());
        for c in &self.chunks {
            match c {
                Records::Memory(b) => out.extend_from_slice(b),
                Records::File(f) => out.extend_from_slice(&f.read_to_bytes()?),
            }
        }
        out.extend_from_slice(&self.buf);
        Ok(out.freeze())
    }

    pub fn put_bool(&mut self, v: bool) {
        self.buf.put_u8(v as u8)
    }
    pub fn put_i8(&mut self, v: i8) {
        self.buf.put_i8(v)
    }
    pub fn put_i16(&mut self, v: i16) {
        self.buf.put_i16(v)
    }
    pub fn put_i32(&mut self, v: i32) {
        self.buf.put_i32(v)
    }
    pub fn put_i64(&mut self, v: i64) {
        self.buf.put_i64(v)
    }
    pub fn put_u16(&mut self, v: u16) {
        self.buf.put_u16(v)
    }
    pub fn put_u32(&mut self, v: u32) {
        self.buf.put_u32(v)
    }
    pub fn put_f64(&mut self, v: f64) {
        self.buf.put_f64(v)
    }
    pub fn put_uuid(&mut self, v: &Uuid) {
        self.buf.put_slice(&v.0)
    }
    pub fn put_uvarint(&mut self, v: u32) {
        put_uvarint(&mut self.buf, v)
    }
    pub fn put_varint(&mut self, v: i32) {
        put_uvarint(&mut self.buf, zigzag32(v))
    }
    pub fn put_varlong(&mut self, v: i64) {
        put_uvarlong(&mut self.buf, zigzag64(v))
    }

    /// Length prefix of a string: i16 (classic) or unsigned varint of len+1 (compact).
    fn put_str_len(&mut self, len: Option<usize>, compact: bool) -> Result<(), EncodeError> {
        match (len, compact) {
            (None, false) => self.put_i16(-1),
            (None, true) => self.put_uvarint(0),
            (Some(n), false) => {
                if n > i16::MAX as usize {
                    return Err(EncodeError::TooLong {
                        what: "string",
                        length: n,
                    });
                }
                self.put_i16(n as i16)
            }
            (Some(n), true) => self.put_uvarint(compact_len(n, "string")?),
        }
        Ok(())
    }

    /// Length prefix of bytes / records / arrays: i32 (classic) or unsigned varint of len+1.
    pub fn put_len(&mut self, len: Option<usize>, compact: bool) -> Result<(), EncodeError> {
        match (len, compact) {
            (None, false) => self.put_i32(-1),
            (None, true) => self.put_uvarint(0),
            (Some(n), false) => {
                if n > i32::MAX as usize {
                    return Err(EncodeError::TooLong {
                        what: "bytes or array",
                        length: n,
                    });
                }
                self.put_i32(n as i32)
            }
            (Some(n), true) => self.put_uvarint(compact_len(n, "bytes or array")?),
        }
        Ok(())
    }

    pub fn put_string(&mut self, s: &str, compact: bool) -> Result<(), EncodeError> {
        self.put_str_len(Some(s.len()), compact)?;
        self.buf.put_slice(s.as_bytes());
        Ok(())
    }

    pub fn put_nullable_string(
        &mut self,
        s: Option<&str>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        match s {
            None => self.put_str_len(None, compact),
            Some(s) => self.put_string(s, compact),
        }
    }

    pub fn put_bytes(&mut self, b: &Bytes, compact: bool) -> Result<(), EncodeError> {
        self.put_len(Some(b.len()), compact)?;
        self.put_payload(b);
        Ok(())
    }

    pub fn put_nullable_bytes(
        &mut self,
        b: Option<&Bytes>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        match b {
            None => self.put_len(None, compact),
            Some(b) => self.put_bytes(b, compact),
        }
    }

    /// A `records` field: nullable bytes whose payload is appended by reference.
    pub fn put_records_field(
        &mut self,
        r: Option<&Records>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        match r {
            None => self.put_len(None, compact),
            Some(r) => {
                self.put_len(Some(r.len()), compact)?;
                self.put_records(r);
                Ok(())
            }
        }
    }

    pub fn put_raw(&mut self, b: &[u8]) {
        self.buf.put_slice(b)
    }
}

fn compact_len(n: usize, what: &'static str) -> Result<u32, EncodeError> {
    if n >= u32::MAX as usize || n > i32::MAX as usize {
        return Err(EncodeError::TooLong { what, length: n });
    }
    Ok(n as u32 + 1)
}

// ---------------------------------------------------------------------------------------------
// varints

pub fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}
pub fn unzigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_uvarint(buf: &mut impl BufMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

pub fn put_uvarlong(buf: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

pub fn put_varint(buf: &mut impl BufMut, v: i32) {
    put_uvarint(buf, zigzag32(v))
}

pub fn put_varlong(buf: &mut impl BufMut, v: i64) {
    put_uvarlong(buf, zigzag64(v))
}

pub const fn uvarint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

pub const fn uvarlong_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

pub const fn varint_len(v: i32) -> usize {
    uvarint_len(((v << 1) ^ (v >> 31)) as u32)
}

pub const fn varlong_len(v: i64) -> usize {
    uvarlong_len(((v << 1) ^ (v >> 63)) as u64)
}

/// Reads an unsigned varint of at most 5 bytes (Kafka's `ByteUtils.readUnsignedVarint`).
pub fn get_uvarint(buf: &mut impl Buf) -> Result<u32, DecodeError> {
    let mut v: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return Err(DecodeError::Truncated {
                needed: 1,
                remaining: 0,
            });
        }
        let b = buf.get_u8();
        if i == 4 && b > 0x0f {
            return Err(DecodeError::InvalidVarint);
        }
        v |= ((b & 0x7f) as u32) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(DecodeError::InvalidVarint)
}

/// Reads an unsigned varlong of at most 10 bytes.
pub fn get_uvarlong(buf: &mut impl Buf) -> Result<u64, DecodeError> {
    let mut v: u64 = 0;
    for i in 0..10 {
        if !buf.has_remaining() {
            return Err(DecodeError::Truncated {
                needed: 1,
                remaining: 0,
            });
        }
        let b = buf.get_u8();
        if i == 9 && b > 0x01 {
            return Err(DecodeError::InvalidVarint);
        }
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(DecodeError::InvalidVarint)
}

pub fn get_varint(buf: &mut impl Buf) -> Result<i32, DecodeError> {
    get_uvarint(buf).map(unzigzag32)
}

pub fn get_varlong(buf: &mut impl Buf) -> Result<i64, DecodeError> {
    get_uvarlong(buf).map(unzigzag64)
}

// ---------------------------------------------------------------------------------------------
// decoding primitives

#[inline]
pub fn need(buf: &Bytes, n: usize) -> Result<(), DecodeError> {
    if buf.len() < n {
        Err(DecodeError::Truncated {
            needed: n,
            remaining: buf.len(),
        })
    } else {
        Ok(())
    }
}

pub fn get_bool(buf: &mut Bytes) -> Result<bool, DecodeError> {
    need(buf, 1)?;
    Ok(buf.get_u8() != 0)
}
pub fn get_i8(buf: &mut Bytes) -> Result<i8, DecodeError> {
    need(buf, 1)?;
    Ok(buf.get_i8())
}
pub fn get_i16(buf: &mut Bytes) -> Result<i16, DecodeError> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}
pub fn get_i32(buf: &mut Bytes) -> Result<i32, DecodeError> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}
pub fn get_i64(buf: &mut Bytes) -> Result<i64, DecodeError> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}
pub fn get_u16(buf: &mut Bytes) -> Result<u16, DecodeError> {
    need(buf, 2)?;
    Ok(buf.get_u16())
}
pub fn get_u32(buf: &mut Bytes) -> Result<u32, DecodeError> {
    need(buf, 4)?;
    Ok(buf.get_u32())
}
pub fn get_f64(buf: &mut Bytes) -> Result<f64, DecodeError> {
    need(buf, 8)?;
    Ok(buf.get_f64())
}
pub fn get_uuid(buf: &mut Bytes) -> Result<Uuid, DecodeError> {
    need(buf, 16)?;
    let mut b = [0u8; 16];
    buf.copy_to_slice(&mut b);
    Ok(Uuid(b))
}

/// Reads a length prefix; `None` is null. The length is checked against the remaining input.
fn get_len(
    buf: &mut Bytes,
    compact: bool,
    short: bool,
    what: &'static str,
) -> Result<Option<usize>, DecodeError> {
    let n: i64 = if compact {
        get_uvarint(buf)? as i64 - 1
    } else if short {
        get_i16(buf)? as i64
    } else {
        get_i32(buf)? as i64
    };
    if n < -1 {
        return Err(DecodeError::InvalidLength { what, length: n });
    }
    if n == -1 {
        return Ok(None);
    }
    Ok(Some(n as usize))
}

fn get_slice(buf: &mut Bytes, n: usize) -> Result<Bytes, DecodeError> {
    need(buf, n)?;
    Ok(buf.split_to(n))
}

pub fn get_nullable_string(buf: &mut Bytes, compact: bool) -> Result<Option<String>, DecodeError> {
    match get_len(buf, compact, true, "string")? {
        None => Ok(None),
        Some(n) => {
            need(buf, n)?;
            let s = std::str::from_utf8(&buf[..n])
                .map_err(|_| DecodeError::InvalidUtf8)?
                .to_owned();
            buf.advance(n);
            Ok(Some(s))
        }
    }
}

pub fn get_string(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
) -> Result<String, DecodeError> {
    get_nullable_string(buf, compact)?.ok_or(DecodeError::UnexpectedNull { field })
}

/// Zero copy: the result is a slice of `buf`.
pub fn get_nullable_bytes(buf: &mut Bytes, compact: bool) -> Result<Option<Bytes>, DecodeError> {
    match get_len(buf, compact, false, "bytes")? {
        None => Ok(None),
        Some(n) => get_slice(buf, n).map(Some),
    }
}

pub fn get_bytes(
    buf: &mut Bytes,
    compact: bool,
    field: &'static str,
) -> Result<Bytes, DecodeError> {
    get_nullable_bytes(buf, compact)?.ok_or(DecodeError::UnexpectedNull { field })
}

/// Zero copy: `Records::Memory` holds a slice of the request frame.
pub fn get_records(buf: &mut Bytes, compact: bool) -> Result<Option<Records>, DecodeError> {
    Ok(get_nullable_bytes(buf, compact)?.map(Records::Memory))
}

/// Reads an array length prefix. Each element takes at least `min_elem_len` bytes of input
/// (at least one is assumed even for elements that can encode to nothing), so a count larger
/// than the remaining input is rejected before anything is allocated.
pub fn get_array_len(
    buf: &mut Bytes,
    compact: bool,
    min_elem_len: usize,
) -> Result<Option<usize>, DecodeError> {
    let n = get_len(buf, compact, false, "array")?;
    if let Some(n) = n {
        if n.saturating_mul(min_elem_len.max(1)) > buf.len() {
            return Err(DecodeError::InvalidLength {
                what: "array",
                length: n as i64,
            });
        }
    }
    Ok(n)
}

/// Initial capacity for a decoded array of `n` elements: at most about the remaining input's
/// size in bytes, so a length prefix cannot make us reserve more than the frame is worth;
/// the vector grows as elements actually decode.
pub fn prealloc<T>(n: usize, remaining: usize) -> usize {
    n.min(remaining / std::mem::size_of::<T>().max(1) + 1)
}

/// Reads one tagged field's header and returns (tag, its data as a slice).
pub fn get_tagged_field(buf: &mut Bytes) -> Result<(u32, Bytes), DecodeError> {
    let tag = get_uvarint(buf)?;
    let size = get_uvarint(buf)? as usize;
    Ok((tag, get_slice(buf, size)?))
}

/// Number of tagged fields, bounded by the input (each takes at least two bytes).
pub fn get_tagged_count(buf: &mut Bytes) -> Result<usize, DecodeError> {
    let n = get_uvarint(buf)? as usize;
    if n.saturating_mul(2) > buf.len() {
        return Err(DecodeError::InvalidLength {
            what: "tagged fields",
            length: n as i64,
        });
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// sizes

pub fn string_len(len: usize, compact: bool) -> usize {
    if compact {
        uvarint_len(len as u32 + 1) + len
    } else {
        2 + len
    }
}

pub fn bytes_len(len: usize, compact: bool) -> usize {
    if compact {
        uvarint_len(len as u32 + 1) + len
    } else {
        4 + len
    }
}

pub fn null_len(compact: bool, short: bool) -> usize {
    if compact {
        1
    } else if short {
        2
    } else {
        4
    }
}

pub fn array_len_prefix(len: Option<usize>, compact: bool) -> usize {
    match len {
        None => null_len(compact, false),
        Some(n) => {
            if compact {
                uvarint_len(n as u32 + 1)
            } else {
                4
            }
        }
    }
}

pub fn tagged_field_len(tag: u32, size: usize) -> usize {
    uvarint_len(tag) + uvarint_len(size as u32) + size
}

pub fn raw_tagged_field_len(f: &RawTaggedField) -> usize {
    tagged_field_len(f.tag, f.data.len())
}

pub fn put_raw_tagged_field(w: &mut Writer, f: &RawTaggedField) {
    w.put_uvarint(f.tag);
    w.put_uvarint(f.data.len() as u32);
    w.put_payload(&f.data);
}

/// Random values for the generated `random` constructors (differential tests, fuzz seeds).
#[cfg(feature = "random")]
pub mod random {
    pub use rand::Rng;

    use super::Bytes;

    /// 0..10 characters, sometimes multi-byte, so length prefixes count bytes, not chars.
    pub fn string<R: Rng + ?Sized>(rng: &mut R) -> String {
        const ALPHABET: &[char] = &[
            'a', 'b', 'z', 'A', '0', '9', '-', '_', '.', 'é', 'ß', '日', '🦀',
        ];
        let n = rng.gen_range(0..10);
        (0..n)
            .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
            .collect()
    }

    thread_local! {
        static UNKNOWN_TAGS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    }

    /// Whether `random` adds unknown tagged fields (on by default). Tests that compare decoded
    /// structure with another implementation turn them off so that any unknown tag the other
    /// side reports means a tag-number mismatch.
    pub fn set_unknown_tags(on: bool) {
        UNKNOWN_TAGS.with(|c| c.set(on))
    }

    pub fn unknown_tags() -> bool {
        UNKNOWN_TAGS.with(|c| c.get())
    }

    pub fn bytes<R: Rng + ?Sized>(rng: &mut R) -> Bytes {
        let n = rng.gen_range(0..12);
        Bytes::from((0..n).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_and_lengths() {
        for v in [0i32, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            let mut bytes = b.freeze();
            assert_eq!(get_varint(&mut bytes).unwrap(), v);
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut b = BytesMut::new();
            put_varlong(&mut b, v);
            assert_eq!(b.len(), varlong_len(v));
            assert_eq!(get_varlong(&mut b.freeze()).unwrap(), v);
        }
        // Kafka's zigzag examples.
        assert_eq!(zigzag32(-1), 1);
        assert_eq!(zigzag32(1), 2);
        assert_eq!(zigzag32(-2), 3);
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(get_uvarint(&mut b), Err(DecodeError::InvalidVarint));
        let mut b = Bytes::from_static(&[0x80]);
        assert!(matches!(
            get_uvarint(&mut b),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn uuid_display_matches_java() {
        // Java: new Uuid(0L, 1L).toString() == "AAAAAAAAAAAAAAAAAAAAAQ"
        assert_eq!(
            Uuid::METADATA_TOPIC_ID.to_string(),
            "AAAAAAAAAAAAAAAAAAAAAQ"
        );
        assert_eq!(Uuid::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        let u = Uuid::random();
        assert_eq!(u.to_string().len(), 22);
        assert_eq!(u.to_string().parse::<Uuid>().unwrap(), u);
        assert!("not-a-uuid".parse::<Uuid>().is_err());
    }

    #[test]
    fn huge_array_length_is_rejected_before_allocating() {
        let mut b = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]);
        assert!(matches!(
            get_array_len(&mut b, false, 4),
            Err(DecodeError::InvalidLength { .. })
        ));
    }

    #[test]
    fn writer_references_large_payloads() {
        let payload = Bytes::from(vec![7u8; 4096]);
        let mut w = Writer::new();
        w.put_i32(1);
        w.put_records_field(Some(&Records::Memory(payload.clone())), true)
            .unwrap();
        w.put_i16(2);
        assert_eq!(w.len(), 4 + 2 + 4096 + 2);
        let chunks = w.into_chunks();
        assert_eq!(chunks.len(), 3);
        match &chunks[1] {
            Records::Memory(b) => assert_eq!(b.as_ptr(), payload.as_ptr()),
            _ => panic!("expected memory chunk"),
        }
    }

    #[test]
    fn decoded_records_are_a_slice_of_the_input() {
        let mut w = Writer::new();
        w.put_records_field(Some(&Records::Memory(Bytes::from(vec![1u8; 100]))), false)
            .unwrap();
        let frame = w.into_bytes();
        let mut buf = frame.clone();
        match get_records(&mut buf, false).unwrap() {
            Some(Records::Memory(b)) => assert_eq!(b.as_ptr(), frame[4..].as_ptr()),
            other => panic!("{other:?}"),
        }
    }
}
