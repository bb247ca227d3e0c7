//! A connection's two halves over plain TCP or TLS. Plain halves keep `sendfile(2)` for
//! fetched segment bytes; over TLS the bytes must be encrypted in user space, so file chunks
//! are read and written through the TLS stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::writer::ChunkSink;

pub enum SocketReader {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

pub enum SocketWriter {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

/// Splits a socket (plain or after its TLS handshake) into the connection's halves.
pub fn split_plain(stream: TcpStream) -> (SocketReader, SocketWriter) {
    let (r, w) = stream.into_split();
    (SocketReader::Plain(r), SocketWriter::Plain(w))
}

pub fn split_tls(stream: TlsStream<TcpStream>) -> (SocketReader, SocketWriter) {
    let (r, w) = tokio::io::split(stream);
    (SocketReader::Tls(r), SocketWriter::Tls(w))
}

impl AsyncRead for SocketReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SocketReader::Plain(r) => Pin::new(r).poll_read(cx, buf),
            SocketReader::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SocketWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SocketWriter::Plain(w) => Pin::new(w).poll_write(cx, buf),
            SocketWriter::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SocketWriter::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            SocketWriter::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            SocketWriter::Plain(w) => w.is_write_vectored(),
            SocketWriter::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SocketWriter::Plain(w) => Pin::new(w).poll_flush(cx),
            SocketWriter::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SocketWriter::Plain(w) => Pin::new(w).poll_shutdown(cx),
            SocketWriter::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

impl ChunkSink for SocketWriter {
    fn sendfile_socket(&self) -> Option<&TcpStream> {
        match self {
            SocketWriter::Plain(w) => Some(w.as_ref()),
            SocketWriter::Tls(_) => None,
        }
    }
}
