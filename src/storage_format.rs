//! `kactor format` and `kactor random-uuid` (Kafka's `kafka-storage format` / `random-uuid`):
//! Kafka-style base64url UUIDs and the `meta.properties` file written into each log dir.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use rand::RngCore;

const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// URL-safe base64 without padding, as Kafka's `Uuid.toString` prints 16 bytes (22 chars).
pub fn uuid_to_string(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(B64URL[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Inverse of [`uuid_to_string`]; `None` unless it is exactly a 22-char base64url 16-byte value.
pub fn uuid_from_string(s: &str) -> Option<[u8; 16]> {
    if s.len() != 22 {
        return None;
    }
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(16);
    for c in s.bytes() {
        let v = B64URL.iter().position(|&x| x == c)? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    // 22 chars carry 132 bits; the 4 spare bits must be zero for a canonical encoding.
    if bits != 0 || out.len() != 16 {
        return None;
    }
    out.try_into().ok()
}

/// A random version-4 UUID, rejecting the values Kafka reserves (all-zero, the metadata topic
/// id 1, and any whose text starts with '-', which a command line would read as a flag).
pub fn random_uuid() -> String {
    let mut rng = rand::thread_rng();
    loop {
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let reserved =
            b[..8].iter().all(|&x| x == 0) && u64::from_be_bytes(b[8..].try_into().unwrap()) < 100;
        let s = uuid_to_string(&b);
        if !reserved && !s.starts_with('-') {
            return s;
        }
    }
}

/// Makes sure `dir` can be a log dir (or the metadata log dir) before anything is read or
/// written in it: creates it if it is missing, refuses a path that exists but is not a
/// directory, and checks that a file can be created in it. Kafka meets the same problems as I/O
/// exceptions on the first file it touches (`meta.properties`, `.lock`,
/// `leader-epoch-checkpoint`); here each gets one line saying what is wrong with which path.
pub fn ensure_usable_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => bail!(
            "log dir {} is not a directory but a file (log.dirs and metadata.log.dir must name \
             directories)",
            dir.display()
        ),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create log dir {}", dir.display()))?,
        Err(e) => bail!("cannot use log dir {}: {e}", dir.display()),
    }
    // A probe rather than the permission bits: they say nothing about read-only mounts, ACLs or
    // root, and the file operations the broker needs are what must work.
    let probe = dir.join(WRITE_PROBE);
    match std::fs::File::create(&probe) {
        Ok(_) => {
            // Left behind it would only be an unknown file, which the log dir scan skips.
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => bail!("log dir {} is not writable: {e}", dir.display()),
    }
}

/// The file [`ensure_usable_dir`] creates and removes to see that a dir is writable.
const WRITE_PROBE: &str = ".kactor-write-check";

/// Writes `meta.properties` (version 1) into `dir`. Refuses a dir already formatted for a
/// different cluster or node, and leaves a matching one alone (idempotent re-format).
/// Returns whether it wrote a new file.
pub fn format_log_dir(dir: &Path, cluster_id: &str, node_id: i32) -> anyhow::Result<bool> {
    if uuid_from_string(cluster_id).is_none() {
        bail!("cluster id {cluster_id:?} is not a 22-character base64url UUID (use `kactor random-uuid`)");
    }
    ensure_usable_dir(dir)?;
    let path = dir.join("meta.properties");
    if path.exists() {
        let existing = crate::config::read_properties(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let same_cluster = existing.get("cluster.id").map(String::as_str) == Some(cluster_id);
        let same_node = existing.get("node.id").map(String::as_str) == Some(&*node_id.to_string());
        if same_cluster && same_node {
            return Ok(false);
        }
        bail!(
            "{} is already formatted (cluster.id={}, node.id={}); refusing to re-format it",
            path.display(),
            existing
                .get("cluster.id")
                .map(String::as_str)
                .unwrap_or("?"),
            existing.get("node.id").map(String::as_str).unwrap_or("?"),
        );
    }
    let props = BTreeMap::from([
        ("cluster.id", cluster_id.to_string()),
        ("directory.id", random_uuid()),
        ("node.id", node_id.to_string()),
        ("version", "1".to_string()),
    ]);
    let mut text = String::from("#\n#Written by kactor format\n");
    for (k, v) in props {
        text.push_str(&format!("{k}={v}\n"));
    }
    // Write-then-rename so a crash never leaves a half-written meta.properties behind.
    let tmp = dir.join("meta.properties.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_round_trips_and_matches_kafka_shape() {
        for _ in 0..100 {
            let s = random_uuid();
            assert_eq!(s.len(), 22);
            assert!(!s.starts_with('-'));
            let b = uuid_from_string(&s).unwrap();
            assert_eq!(uuid_to_string(&b), s);
            assert_eq!(b[6] >> 4, 4);
        }
        // Kafka's Uuid.METADATA_TOPIC_ID (0...01) prints as AAAAAAAAAAAAAAAAAAAAAQ.
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(uuid_to_string(&one), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(uuid_from_string("not-a-uuid"), None);
    }

    #[test]
    fn unusable_dirs_are_refused_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "").unwrap();
        let err = format!("{:#}", ensure_usable_dir(&file).unwrap_err());
        assert_eq!(
            err,
            format!(
                "log dir {} is not a directory but a file (log.dirs and metadata.log.dir must \
                 name directories)",
                file.display()
            )
        );
        let under_file = file.join("data");
        let err = format!("{:#}", ensure_usable_dir(&under_file).unwrap_err());
        assert!(
            err.starts_with(&format!("cannot use log dir {}: ", under_file.display())),
            "{err}"
        );

        // Missing dirs are created; the probe file does not stay.
        let new = dir.path().join("a/b");
        ensure_usable_dir(&new).unwrap();
        assert!(new.is_dir());
        assert_eq!(std::fs::read_dir(&new).unwrap().count(), 0);
    }

    #[test]
    fn format_writes_meta_properties_and_refuses_a_foreign_dir() {
        let dir = tempfile::tempdir().unwrap();
        let id = random_uuid();
        assert!(format_log_dir(dir.path(), &id, 3).unwrap());
        let props = crate::config::read_properties(&dir.path().join("meta.properties")).unwrap();
        assert_eq!(props["version"], "1");
        assert_eq!(props["cluster.id"], id);
        assert_eq!(props["node.id"], "3");
        assert!(uuid_from_string(&props["directory.id"]).is_some());
        assert!(!format_log_dir(dir.path(), &id, 3).unwrap());
        let err = format_log_dir(dir.path(), &random_uuid(), 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("already formatted"), "{err}");
        assert!(format_log_dir(dir.path(), "bad", 3).is_err());
    }
}
