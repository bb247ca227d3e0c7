//! Writing response frames (Kafka's `Send` / `TransferableRecords.writeTo`): memory chunks go
//! out with vectored writes, file chunks (`FileSlice`) with `sendfile(2)` so fetched segment
//! bytes never pass through user space on plaintext listeners.

use std::io::IoSlice;
use std::os::fd::AsRawFd;

use bytes::Bytes;
use kactor_protocol::{FileSlice, Records};
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Prepends the 4-byte size to an encoded frame's chunks.
pub fn with_size_prefix(chunks: Vec<Records>) -> (Vec<Records>, usize) {
    let len: usize = chunks.iter().map(Records::len).sum();
    let mut out = Vec::with_capacity(chunks.len() + 1);
    out.push(Records::Memory(Bytes::copy_from_slice(
        &(len as i32).to_be_bytes(),
    )));
    out.extend(chunks);
    (out, len + 4)
}

/// Something response frames are written to.
pub trait ChunkSink: AsyncWrite + Unpin {
    /// The TCP socket underneath, when `sendfile` may be used on it (plaintext only).
    fn sendfile_socket(&self) -> Option<&TcpStream>;
}

impl ChunkSink for tokio::net::tcp::OwnedWriteHalf {
    fn sendfile_socket(&self) -> Option<&TcpStream> {
        Some(self.as_ref())
    }
}

impl ChunkSink for Vec<u8> {
    fn sendfile_socket(&self) -> Option<&TcpStream> {
        None
    }
}

/// Writes every chunk in order; file slices go with `sendfile` when the sink has a socket,
/// else they are read and copied.
pub async fn write_chunks<W: ChunkSink>(w: &mut W, chunks: &[Records]) -> std::io::Result<()> {
    let mut i = 0;
    while i < chunks.len() {
        match &chunks[i] {
            Records::Memory(_) => {
                let run_end = chunks[i..]
                    .iter()
                    .position(|c| matches!(c, Records::File(_)))
                    .map_or(chunks.len(), |p| i + p);
                let run: Vec<&Bytes> = chunks[i..run_end]
                    .iter()
                    .filter_map(|c| match c {
                        Records::Memory(b) => Some(b),
                        Records::File(_) => None,
                    })
                    .collect();
                write_all_vectored(w, &run).await?;
                i = run_end;
            }
            Records::File(slice) => {
                w.flush().await?;
                match w.sendfile_socket() {
                    Some(s) => sendfile_all(s, slice).await?,
                    None => w.write_all(&slice.read_to_bytes()?).await?,
                }
                i += 1;
            }
        }
    }
    w.flush().await
}

async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    bufs: &[&Bytes],
) -> std::io::Result<()> {
    let mut idx = 0;
    let mut off = 0;
    while idx < bufs.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&bufs[idx][off..])
            .chain(bufs[idx + 1..].iter().map(|b| &b[..]))
            .filter(|s| !s.is_empty())
            .map(IoSlice::new)
            .collect();
        if slices.is_empty() {
            return Ok(());
        }
        let mut n = w.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while idx < bufs.len() && n > 0 {
            let left = bufs[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
        while idx < bufs.len() && bufs[idx].len() == off {
            idx += 1;
            off = 0;
        }
    }
    Ok(())
}

/// Sends a whole file slice with `sendfile(2)`, waiting for writability on `EAGAIN`.
async fn sendfile_all(socket: &TcpStream, slice: &FileSlice) -> std::io::Result<()> {
    let mut offset = slice.position as libc::off_t;
    let end = slice.position + slice.len as u64;
    while (offset as u64) < end {
        socket.writable().await?;
        let remaining = (end - offset as u64) as usize;
        let res = socket.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the duration of the call (the file is held by
            // the slice's Arc, the socket by `socket`), and `offset` is a valid, exclusively
            // borrowed off_t that the kernel advances. sendfile is the only way to get zero copy.
            let n = unsafe {
                libc::sendfile(
                    socket.as_raw_fd(),
                    slice.file.as_raw_fd(),
                    &mut offset,
                    remaining,
                )
            };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match res {
            Ok(0) => {
                // The file is shorter than the slice (truncated by retention): the frame
                // would be corrupt, so fail the connection rather than send garbage.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file shorter than the fetch slice",
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn memory_and_file_chunks_arrive_in_order_over_tcp() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"....FILEDATA....").unwrap();
        let slice = FileSlice {
            file: Arc::new(f),
            position: 4,
            len: 8,
        };
        let chunks = vec![
            Records::Memory(Bytes::from_static(b"head-")),
            Records::Memory(Bytes::from_static(b"er-")),
            Records::File(slice),
            Records::Memory(Bytes::from_static(b"-tail")),
        ];
        let (chunks, total) = with_size_prefix(chunks);
        assert_eq!(total, 4 + 21);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.unwrap();
            buf
        });
        let (stream, _) = listener.accept().await.unwrap();
        let (r, mut w) = stream.into_split();
        write_chunks(&mut w, &chunks).await.unwrap();
        drop(w);
        drop(r);
        let got = client.await.unwrap();
        assert_eq!(&got[..4], &21i32.to_be_bytes());
        assert_eq!(&got[4..], b"head-er-FILEDATA-tail");

        // Without a socket the same frame is copied.
        let mut v: Vec<u8> = Vec::new();
        write_chunks(&mut v, &chunks).await.unwrap();
        assert_eq!(v, got);
    }
}
