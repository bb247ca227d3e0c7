//! A full file system under a sparse, memory-mapped index: appending an entry is an ENOSPC
//! error, not a SIGBUS that kills the broker. Needs a tiny tmpfs (CI runs as root); where
//! mounting is refused the test says so and checks only the non-full path.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use kactor_actors::log::index::{OffsetIndex, TimeIndex};

struct Tmpfs(tempfile::TempDir);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

fn mount_tmpfs(size: &str) -> Option<Tmpfs> {
    let dir = tempfile::tempdir().ok()?;
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir.path())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(Tmpfs(dir))
}

fn fill(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn index_appends_on_a_full_disk_fail_with_enospc() {
    let Some(fs) = mount_tmpfs("2m") else {
        eprintln!("cannot mount a tmpfs here (not root?): full-disk path not exercised");
        // The normal path still works with block reservation in place.
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 0, 1 << 20).unwrap();
        for i in 0..2000 {
            idx.append(i * 10, (i as u32 + 1) * 100).unwrap();
        }
        return;
    };
    let dir = fs.0.path();
    // Opened while there is room: the mapping covers 1 MiB of holes.
    let mut offsets = OffsetIndex::open(&dir.join("00000000000000000000.index"), 0, 1 << 20)
        .expect("a sparse index needs no blocks");
    let mut times = TimeIndex::open(&dir.join("00000000000000000000.timeindex"), 0, 1 << 20)
        .expect("a sparse index needs no blocks");
    offsets.append(0, 100).unwrap();
    fill(dir);
    // Entries in the already reserved first page still go in; the first entry of a new page
    // needs a block and must fail cleanly.
    let mut err = None;
    for i in 1..2_000i64 {
        if let Err(e) = offsets.append(i * 10, (i as u32 + 1) * 100) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("a full disk must refuse an index page");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    let mut terr = None;
    for i in 1..2_000i64 {
        if let Err(e) = times.maybe_append(1_000 + i, i * 10, false) {
            terr = Some(e);
            break;
        }
    }
    let terr = terr.expect("a full disk must refuse a time index page");
    assert_eq!(terr.raw_os_error(), Some(libc::ENOSPC), "{terr}");
    // Still alive, and the entries that made it are intact.
    assert_eq!(offsets.lookup(0).offset, 0);
}
