//! The `.lock` file in every log dir and the metadata log dir (Kafka's `LogManager.lockLogDirs`
//! and the raft manager's lock on `metadata.log.dir`): taken before anything in the dir is read
//! or written, held until the process exits. A second broker on the same dirs would otherwise
//! rebuild indexes under the first one, append to its metadata log, and at shutdown truncate
//! index files the first one has mapped (SIGBUS on its next append).
//!
//! The lock is an open-file-description record lock (`F_OFD_SETLK`) over the whole file. It
//! conflicts with the classic POSIX record locks Java's `FileChannel.tryLock` takes, so a kactor
//! and an Apache Kafka broker pointed at the same dir exclude each other too; unlike classic
//! POSIX locks it is not dropped when some other descriptor of the file in this process closes.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// Kafka's name for the lock file (`LogManager.LockFileName`).
pub const LOCK_FILE_NAME: &str = ".lock";

/// A held lock; released when dropped (or when the process dies, however it dies).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    pub dir: PathBuf,
}

/// Creates `dir` if it is missing (as Kafka does for `log.dirs`), checks that it is a writable
/// directory, and locks its `.lock` file.
pub fn lock_dir(dir: &Path) -> anyhow::Result<DirLock> {
    crate::storage_format::ensure_usable_dir(dir)?;
    let path = dir.join(LOCK_FILE_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // SAFETY: an all-zero `flock` is a valid value of the C struct; the fields that matter are
    // set below. fcntl only reads it (F_OFD_SETLK) and the descriptor is open for write.
    let rc = unsafe {
        let mut lock: libc::flock = std::mem::zeroed();
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = 0;
        lock.l_len = 0;
        libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock)
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EACCES) => bail!(
                "failed to acquire the lock on {}: another kactor or Kafka process is using {} \
                 (stop it, or give this node its own log.dirs)",
                path.display(),
                dir.display()
            ),
            _ => {
                return Err(err).with_context(|| format!("cannot lock {}", path.display()));
            }
        }
    }
    Ok(DirLock {
        _file: file,
        dir: dir.to_path_buf(),
    })
}

/// Locks every dir in order, each once (the metadata dir is often also the first log dir).
pub fn lock_dirs<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> anyhow::Result<Vec<DirLock>> {
    let mut locks: Vec<DirLock> = Vec::new();
    for dir in dirs {
        if locks.iter().any(|l| l.dir == dir) {
            continue;
        }
        locks.push(lock_dir(dir)?);
    }
    Ok(locks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_dir_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        let first = lock_dir(&dir).unwrap();
        assert!(dir.join(LOCK_FILE_NAME).exists());
        // OFD locks conflict between open file descriptions, even within one process.
        let err = lock_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("failed to acquire the lock"), "{err}");
        assert!(err.contains(&dir.display().to_string()), "{err}");
        drop(first);
        lock_dir(&dir).unwrap();
    }

    #[test]
    fn a_dir_named_twice_is_locked_once() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let locks = lock_dirs([a.as_path(), a.as_path()]).unwrap();
        assert_eq!(locks.len(), 1);
    }

    #[test]
    fn a_plain_file_is_not_a_log_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = lock_dir(&file).unwrap_err().to_string();
        assert!(err.contains("is not a directory"), "{err}");
    }
}
