//! Request framing (Kafka's `NetworkReceive`): a 4-byte big-endian size, then that many bytes.
//! The size is checked against `socket.request.max.bytes` before a single byte of the body is
//! buffered; frames up to 2 MiB get their buffer at once, larger ones grow only as bytes
//! actually arrive, so a lying length prefix costs at most 2 MiB of (untouched) allocation
//! (DESIGN.md §1.5). Before the body is read the request takes a place in the broker-wide
//! request queue and, with `queued.max.request.bytes` set, its size from the broker's
//! [`MemoryPool`], as Kafka's `NetworkReceive` does.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::memory_pool::PoolLease;
use super::request_queue::{RequestBudget, RequestHold};

/// api_key (2) + api_version (2) + correlation_id (4): the part every header version shares.
pub const MIN_REQUEST_BYTES: usize = 8;
/// Frames up to this size are read into one buffer allocated up front.
const EAGER_BYTES: usize = 2 * 1024 * 1024;
/// Above [`EAGER_BYTES`] the body buffer first grows by this much, then doubles as bytes
/// arrive, whatever the prefix claims.
const GROWTH_STEP: usize = 64 * 1024;

#[derive(Debug, Error)]
pub enum FrameError {
    /// The peer closed the connection between frames (the normal way to leave).
    #[error("connection closed by peer")]
    Closed,
    /// The peer closed the connection inside a frame.
    #[error("connection closed mid-frame after {received} of {expected} bytes")]
    Truncated { expected: usize, received: usize },
    #[error("invalid request size {size} (socket.request.max.bytes={max})")]
    InvalidSize { size: i64, max: usize },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Checks a size prefix against the cap: negative, too small for a header, or too large.
pub fn check_size(size: i32, max_bytes: usize) -> Result<usize, FrameError> {
    if size < MIN_REQUEST_BYTES as i32 || size as i64 > max_bytes as i64 {
        return Err(FrameError::InvalidSize {
            size: size as i64,
            max: max_bytes,
        });
    }
    Ok(size as usize)
}

/// A frame body that holds pool bytes: they go back when the last slice of the body is
/// dropped (unless the lease's other holder released them first).
struct PooledBody {
    body: BytesMut,
    lease: Arc<PoolLease>,
}

impl AsRef<[u8]> for PooledBody {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        self.lease.release();
    }
}

/// Reads one frame body (without its prefix), with what it holds of `budget`: its queue place,
/// and its pool bytes, which go back when both the body (every slice of it) and the hold are
/// gone. Cancel-safe only between frames; a frame abandoned half-read (error, cancel) gives
/// everything back as it is dropped.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
    budget: &RequestBudget,
) -> Result<(Bytes, RequestHold), FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut prefix[got..]).await? {
            0 if got == 0 => return Err(FrameError::Closed),
            0 => {
                return Err(FrameError::Truncated {
                    expected: 4,
                    received: got,
                })
            }
            n => got += n,
        }
    }
    let size = check_size(i32::from_be_bytes(prefix), max_bytes)?;
    // Waiting for a queue place, then (Kafka's NetworkReceive) for the body's size from the
    // pool, leaves the body in the socket buffer, so the client is pushed back through TCP.
    // The check keeps the unbounded pool (the default) to a branch.
    let slot = budget.queue.enter().await;
    let lease = if budget.pool.is_bounded() {
        budget.pool.allocate(size).await
    } else {
        None
    };
    // Frames up to EAGER_BYTES (every produce a default-configured client sends) get their
    // whole buffer at once: growing it as bytes arrive moved the frame with every `realloc`,
    // a full extra copy of each produce request. Larger claims still grow only with the data,
    // doubling, so a lying prefix costs at most EAGER_BYTES.
    let mut body = BytesMut::with_capacity(size.min(EAGER_BYTES));
    while body.len() < size {
        if body.len() == body.capacity() {
            body.reserve((size - body.len()).min(body.len().max(GROWTH_STEP)));
        }
        // One read takes whatever the socket has, up to the room left: fewer syscalls than
        // fixed 64 KiB steps, and never past this frame.
        let want = (size - body.len()).min(body.capacity() - body.len());
        let n = (&mut *r).take(want as u64).read_buf(&mut body).await?;
        if n == 0 {
            return Err(FrameError::Truncated {
                expected: size,
                received: body.len(),
            });
        }
    }
    match lease {
        None => Ok((body.freeze(), RequestHold::new(slot, None))),
        Some(lease) => {
            // Tying the lease to the buffer frees the bytes as soon as nothing points into it
            // (Kafka frees a parsed request's buffer at once unless the request still refers
            // to it, as Produce's records do).
            let lease = Arc::new(lease);
            let body = Bytes::from_owner(PooledBody {
                body,
                lease: lease.clone(),
            });
            Ok((body, RequestHold::new(slot, Some(lease))))
        }
    }
}

/// The fixed start of every request header, readable before knowing the header version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl RequestPrefix {
    pub fn peek(frame: &[u8]) -> Option<Self> {
        if frame.len() < MIN_REQUEST_BYTES {
            return None;
        }
        Some(RequestPrefix {
            api_key: i16::from_be_bytes([frame[0], frame[1]]),
            api_version: i16::from_be_bytes([frame[2], frame[3]]),
            correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_frame` without a pool, for the framing tests.
    async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Bytes, FrameError> {
        super::read_frame(r, max, &RequestBudget::new(100, -1, "test"))
            .await
            .map(|(body, _)| body)
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[tokio::test]
    async fn reads_consecutive_frames() {
        let mut data = framed(b"0123456789");
        data.extend(framed(b"abcdefgh"));
        let mut r = &data[..];
        assert_eq!(&read_frame(&mut r, 100).await.unwrap()[..], b"0123456789");
        assert_eq!(&read_frame(&mut r, 100).await.unwrap()[..], b"abcdefgh");
        assert!(matches!(
            read_frame(&mut r, 100).await,
            Err(FrameError::Closed)
        ));
    }

    #[tokio::test]
    async fn oversize_negative_and_tiny_prefixes_fail_before_reading_the_body() {
        for size in [i32::MAX, 0x7fff_fff0, 101, -1, i32::MIN, 0, 7] {
            let mut data = size.to_be_bytes().to_vec();
            data.extend_from_slice(&[0u8; 16]);
            let mut r = &data[..];
            match read_frame(&mut r, 100).await {
                Err(FrameError::InvalidSize { size: s, max: 100 }) => assert_eq!(s, size as i64),
                other => panic!("size {size}: {other:?}"),
            }
            // Nothing past the prefix was consumed.
            assert_eq!(r.len(), 16);
        }
    }

    #[tokio::test]
    async fn truncated_frames_are_reported() {
        let mut r = &[0u8, 0][..];
        assert!(matches!(
            read_frame(&mut r, 100).await,
            Err(FrameError::Truncated {
                expected: 4,
                received: 2
            })
        ));
        let data = [0, 0, 0, 20, 1, 2, 3];
        let mut r = &data[..];
        assert!(matches!(
            read_frame(&mut r, 100).await,
            Err(FrameError::Truncated {
                expected: 20,
                received: 3
            })
        ));
    }

    #[tokio::test]
    async fn a_large_claim_allocates_only_what_arrives() {
        // Claims 50 MB, sends 10 bytes then EOF: the buffer never reserved the claim.
        let mut data = (50_000_000i32).to_be_bytes().to_vec();
        data.extend_from_slice(&[7u8; 10]);
        let mut r = &data[..];
        assert!(matches!(
            read_frame(&mut r, 104_857_600).await,
            Err(FrameError::Truncated {
                expected: 50_000_000,
                received: 10
            })
        ));
    }

    #[tokio::test]
    async fn frames_larger_than_the_eager_buffer_arrive_whole() {
        // A 5 MiB frame (grown past EAGER_BYTES) followed by a small one: both intact.
        let big: Vec<u8> = (0..5 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let mut data = framed(&big);
        data.extend(framed(b"next-frame"));
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            client.write_all(&data).await.unwrap();
        });
        assert_eq!(
            &read_frame(&mut server, 8 << 20).await.unwrap()[..],
            &big[..]
        );
        assert_eq!(
            &read_frame(&mut server, 8 << 20).await.unwrap()[..],
            b"next-frame"
        );
        writer.await.unwrap();
    }

    #[test]
    fn prefix_peek() {
        let p = RequestPrefix::peek(&[0, 18, 0, 3, 0, 0, 0, 42, 9]).unwrap();
        assert_eq!(
            p,
            RequestPrefix {
                api_key: 18,
                api_version: 3,
                correlation_id: 42
            }
        );
        assert_eq!(RequestPrefix::peek(&[0, 18]), None);
    }
}
