//! The process's allocator policy (glibc malloc; the JVM's heap sizing plays this role in
//! Kafka): thresholds fixed before any thread starts, and memory given back to the kernel once
//! a load is over.

/// glibc malloc's thresholds, fixed before any thread starts. By default they move: freeing a
/// block that was mmapped (above 128 KiB at first) raises the mmap threshold to its size and
/// the trim threshold to twice that, and each thread's arena gives its free top back to the
/// kernel once it passes the trim threshold. A produce request (up to 1 MB from librdkafka) is
/// allocated on a network thread and freed on a partition thread after the append, so the
/// arenas kept giving memory back and the next request faulted in and zeroed fresh pages while
/// the socket was read into them: producing 1 KiB records to one partition, page faults were
/// 18% of the broker's CPU samples, and 0.5% with fixed thresholds (CPU per GB -7%). Fixed,
/// blocks below 32 MiB come from the arenas, and an arena keeps its free memory for the next
/// request; what it keeps is at most the peak that the broker's own bounds
/// (`queued.max.requests`, the request size cap) allow.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn tune() -> bool {
    const MMAP_THRESHOLD_BYTES: libc::c_int = 32 << 20;
    const TRIM_THRESHOLD_BYTES: libc::c_int = 1 << 30;
    // SAFETY: mallopt only sets allocator parameters, under glibc's own lock. `main` calls it
    // before any other thread exists, so every arena is created with them.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune() -> bool {
    false
}

/// How often [`give_back_when_quiet`] looks.
const TRIM_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);
/// At most this many requests in one interval is a quiet broker (heartbeats, metadata).
const QUIET_REQUESTS_PER_INTERVAL: u64 = 200;
/// Free memory the arenas may keep before a quiet broker gives it back.
const KEEP_FREE_BYTES: usize = 32 << 20;
/// The trim threshold while a quiet broker gives memory back.
const QUIET_TRIM_THRESHOLD_BYTES: libc::c_int = 1 << 20;
/// A block freed on each thread to make glibc look at its arena's top (at least its
/// FASTBIN_CONSOLIDATION_THRESHOLD, 64 KiB).
const POKE_BYTES: usize = 256 << 10;

/// With the trim threshold at 1 GiB (see [`tune`]) the arenas keep what a load burst freed:
/// after eight connections pipelined 1 MiB produce requests, the RSS stayed at its peak. Once
/// the broker is quiet and the arenas hold more than [`KEEP_FREE_BYTES`] free, it is given
/// back; under load nothing is, so the page faults the thresholds avoid stay avoided.
///
/// `malloc_trim` alone returns free chunks inside the arenas and the main arena's top, but not
/// the top of a thread's own arena, where a burst's buffers end up once freed: glibc trims
/// that only in `free`, for a large block, when the top exceeds the trim threshold. So for a
/// moment the threshold is lowered and every arbiter thread frees one large block of its own.
/// Runs until the actix system stops.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub async fn give_back_when_quiet(arbiters: kactor_actors::runtime::ArbiterPools) {
    use kactor_actors::network::request_queue::requests_entered;
    let mut last = requests_entered();
    let mut tick = tokio::time::interval(TRIM_CHECK_INTERVAL);
    loop {
        tick.tick().await;
        let now = requests_entered();
        let quiet = now - last <= QUIET_REQUESTS_PER_INTERVAL;
        last = now;
        // SAFETY: mallinfo2 only reads the allocator's statistics under its own locks.
        let free = unsafe { libc::mallinfo2() }.fordblks;
        if !quiet || free <= KEEP_FREE_BYTES {
            continue;
        }
        // SAFETY: mallopt sets a parameter under glibc's lock; other threads read it racily,
        // which glibc allows (it is only a threshold).
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, QUIET_TRIM_THRESHOLD_BYTES) };
        let pokes: Vec<_> = arbiters
            .all()
            .map(|a| {
                let (done, wait) = tokio::sync::oneshot::channel();
                a.spawn(async move {
                    drop(std::hint::black_box(Vec::<u8>::with_capacity(POKE_BYTES)));
                    let _ = done.send(());
                });
                wait
            })
            .collect();
        for p in pokes {
            let _ = p.await;
        }
        drop(std::hint::black_box(Vec::<u8>::with_capacity(POKE_BYTES)));
        // SAFETY: malloc_trim walks the arenas under their locks; 0 keeps no padding.
        unsafe { libc::malloc_trim(0) };
        tune();
        // SAFETY: as above.
        let after = unsafe { libc::mallinfo2() }.fordblks;
        tracing::debug!(
            free_bytes = free,
            free_after_bytes = after,
            "gave freed memory back to the kernel"
        );
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub async fn give_back_when_quiet(_: kactor_actors::runtime::ArbiterPools) {
    std::future::pending::<()>().await
}
