//! Disk blocks reserved ahead of writes: `fallocate` with the file's length kept, so the bytes
//! a reader or recovery sees are only those written. The indexes need it before a store
//! through their mapping (a page with no block behind it raises SIGBUS on a full disk). The log
//! file does not use it: see `LogSegment::append_parts`.

use std::fs::File;
use std::io;

/// Allocates disk blocks for `[offset, offset + len)` of `file` without changing its length.
/// File systems without fallocate keep the sparse behaviour.
pub(super) fn reserve_blocks(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor we own; no memory is passed.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(err),
    }
}

/// How far from the start a file's blocks are known to be reserved; writes past the mark
/// reserve up to the next multiple of `chunk` first.
#[derive(Debug)]
pub(super) struct Reservation {
    to: u64,
    chunk: u64,
}

impl Reservation {
    pub(super) fn new(to: u64, chunk: u64) -> Self {
        Reservation { to, chunk }
    }

    fn boundary(&self, end: u64) -> u64 {
        end.div_ceil(self.chunk) * self.chunk
    }

    /// Before a write of `[start, end)`: reserves from the chunk holding `start` (or the mark,
    /// if past it) to the chunk boundary past `end`, when `end` is past the mark. A failure
    /// leaves the mark where it was, so the next write asks again.
    pub(super) fn cover(&mut self, file: &File, start: u64, end: u64) -> io::Result<()> {
        if end <= self.to {
            return Ok(());
        }
        let from = self.to.max(start - start % self.chunk);
        let to = self.boundary(end);
        reserve_blocks(file, from, to - from)?;
        self.to = to;
        Ok(())
    }

    /// The file was cut to `len`: the blocks past it are gone.
    pub(super) fn cut(&mut self, len: u64) {
        self.to = self.to.min(len);
    }
}
