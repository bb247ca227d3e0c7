//! Kafka's small text files: offset checkpoints (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`; Kafka's
//! `OffsetCheckpointFile`), `leader-epoch-checkpoint` (`LeaderEpochCheckpointFile`),
//! `partition.metadata` (`PartitionMetadataFile`), `meta.properties` (`MetaProperties`) and the
//! `.kafka_cleanshutdown` marker. All written to `<file>.tmp`, fsynced, renamed, dir fsynced.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use kactor_protocol::Uuid;

use super::error::{LogError, Result};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const PARTITION_METADATA: &str = "partition.metadata";
pub const META_PROPERTIES: &str = "meta.properties";
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// A topic name and partition index (Kafka's `TopicPartition`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
    /// `<topic>-<partition>`, the directory name.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
    /// Parses `<topic>-<partition>` (topics may contain '-').
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        Some(TopicPartition {
            topic: topic.to_string(),
            partition: partition.parse().ok().filter(|p: &i32| *p >= 0)?,
        })
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

fn malformed(path: &Path, reason: impl Into<String>) -> LogError {
    LogError::Malformed {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Writes atomically: tmp file, fsync, rename over, fsync the directory.
pub fn write_atomically(path: &Path, content: &[u8]) -> io::Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Parses Kafka's checkpoint layout: version line, count line, `count` entry lines.
fn read_versioned_lines(path: &Path) -> Result<Option<Vec<String>>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut lines = text.lines();
    let version = lines.next().ok_or_else(|| malformed(path, "empty"))?;
    if version.trim() != "0" {
        return Err(malformed(path, format!("unknown version {version:?}")));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| malformed(path, "bad entry count"))?;
    let entries: Vec<String> = lines
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if entries.len() != count {
        return Err(malformed(
            path,
            format!("expected {count} entries, found {}", entries.len()),
        ));
    }
    Ok(Some(entries))
}

/// `0\n<count>\n<topic> <partition> <offset>\n...`
pub fn write_offset_checkpoint(
    path: &Path,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> io::Result<()> {
    let mut s = format!("0\n{}\n", offsets.len());
    for (tp, offset) in offsets {
        s.push_str(&format!("{} {} {}\n", tp.topic, tp.partition, offset));
    }
    write_atomically(path, s.as_bytes())
}

/// A missing file reads as empty (a fresh log dir).
pub fn read_offset_checkpoint(path: &Path) -> Result<BTreeMap<TopicPartition, i64>> {
    let mut out = BTreeMap::new();
    for line in read_versioned_lines(path)?.unwrap_or_default() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [topic, partition, offset] = parts[..] else {
            return Err(malformed(path, format!("bad line {line:?}")));
        };
        let partition = partition
            .parse()
            .map_err(|_| malformed(path, format!("bad line {line:?}")))?;
        let offset = offset
            .parse()
            .map_err(|_| malformed(path, format!("bad line {line:?}")))?;
        out.insert(TopicPartition::new(topic, partition), offset);
    }
    Ok(out)
}

/// `0\n<count>\n<epoch> <start offset>\n...`
pub fn write_leader_epoch_checkpoint(path: &Path, entries: &[(i32, i64)]) -> io::Result<()> {
    let mut s = format!("0\n{}\n", entries.len());
    for (epoch, offset) in entries {
        s.push_str(&format!("{epoch} {offset}\n"));
    }
    write_atomically(path, s.as_bytes())
}

pub fn read_leader_epoch_checkpoint(path: &Path) -> Result<Vec<(i32, i64)>> {
    let mut out = Vec::new();
    for line in read_versioned_lines(path)?.unwrap_or_default() {
        let mut it = line.split_whitespace();
        let (Some(e), Some(o), None) = (it.next(), it.next(), it.next()) else {
            return Err(malformed(path, format!("bad line {line:?}")));
        };
        let e = e
            .parse()
            .map_err(|_| malformed(path, format!("bad epoch {e:?}")))?;
        let o = o
            .parse()
            .map_err(|_| malformed(path, format!("bad offset {o:?}")))?;
        out.push((e, o));
    }
    Ok(out)
}

/// `java.util.UUID.toString()` without dashes: 32 hex digits (Kafka's `-delete` dir names).
pub fn uuid_hex(id: &Uuid) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// `partition.metadata`: `version: 0\ntopic_id: <base64>\n`.
pub fn write_partition_metadata(dir: &Path, topic_id: Uuid) -> io::Result<()> {
    let s = format!("version: 0\ntopic_id: {topic_id}\n");
    write_atomically(&dir.join(PARTITION_METADATA), s.as_bytes())
}

pub fn read_partition_metadata(dir: &Path) -> Result<Option<Uuid>> {
    let path = dir.join(PARTITION_METADATA);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            match k.trim() {
                "version" => version = Some(v.trim().to_string()),
                "topic_id" => topic_id = v.trim().parse::<Uuid>().ok(),
                _ => {}
            }
        }
    }
    if version.as_deref() != Some("0") {
        return Err(malformed(&path, "unknown version"));
    }
    topic_id
        .map(Some)
        .ok_or_else(|| malformed(&path, "bad topic_id"))
}

/// `meta.properties` of a KRaft log dir (version 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub version: i32,
    pub cluster_id: Option<String>,
    pub node_id: Option<i32>,
    pub directory_id: Option<Uuid>,
}

impl MetaProperties {
    /// Java `Properties.store` layout: a comment line, a date comment, `key=value` lines.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let mut s = String::from("#\n#Written by kactor\n");
        if let Some(id) = self.node_id {
            s.push_str(&format!("node.id={id}\n"));
        }
        if let Some(d) = self.directory_id {
            s.push_str(&format!("directory.id={}\n", d));
        }
        s.push_str(&format!("version={}\n", self.version));
        if let Some(c) = &self.cluster_id {
            s.push_str(&format!("cluster.id={c}\n"));
        }
        write_atomically(&dir.join(META_PROPERTIES), s.as_bytes())
    }

    pub fn read(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(META_PROPERTIES);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut props = BTreeMap::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                props.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        let version = props
            .get("version")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| malformed(&path, "missing version"))?;
        Ok(Some(MetaProperties {
            version,
            cluster_id: props.get("cluster.id").cloned(),
            node_id: props.get("node.id").and_then(|v| v.parse().ok()),
            directory_id: props
                .get("directory.id")
                .and_then(|v| v.parse::<Uuid>().ok()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_round_trip_in_kafka_text_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        assert!(read_offset_checkpoint(&path).unwrap().is_empty());
        let mut m = BTreeMap::new();
        m.insert(TopicPartition::new("my-topic", 3), 42);
        m.insert(TopicPartition::new("a", 0), 0);
        write_offset_checkpoint(&path, &m).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\na 0 0\nmy-topic 3 42\n"
        );
        assert_eq!(read_offset_checkpoint(&path).unwrap(), m);
        fs::write(&path, "0\n3\na 0 0\n").unwrap();
        assert!(read_offset_checkpoint(&path).is_err());
    }

    #[test]
    fn leader_epoch_checkpoint_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        write_leader_epoch_checkpoint(&path, &[(0, 0), (3, 120)]).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\n0 0\n3 120\n");
        assert_eq!(
            read_leader_epoch_checkpoint(&path).unwrap(),
            vec![(0, 0), (3, 120)]
        );
    }

    #[test]
    fn partition_metadata_round_trips_with_kafka_uuid_text() {
        // Kafka prints METADATA_TOPIC_ID (0, 1) as AAAAAAAAAAAAAAAAAAAAAQ.
        let dir = tempfile::tempdir().unwrap();
        write_partition_metadata(dir.path(), Uuid::METADATA_TOPIC_ID).unwrap();
        let text = fs::read_to_string(dir.path().join(PARTITION_METADATA)).unwrap();
        assert_eq!(text, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n");
        assert_eq!(
            read_partition_metadata(dir.path()).unwrap(),
            Some(Uuid::METADATA_TOPIC_ID)
        );
        let id = Uuid::random();
        write_partition_metadata(dir.path(), id).unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), Some(id));
        assert_eq!(uuid_hex(&Uuid([0xab; 16])).len(), 32);
    }

    #[test]
    fn meta_properties_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let m = MetaProperties {
            version: 1,
            cluster_id: Some("MkU3OEVBNTcwNTJENDM2Qk".into()),
            node_id: Some(1),
            directory_id: Some(Uuid::random()),
        };
        m.write(dir.path()).unwrap();
        assert_eq!(MetaProperties::read(dir.path()).unwrap(), Some(m));
    }

    #[test]
    fn topic_partition_dir_names() {
        assert_eq!(
            TopicPartition::from_dir_name("my-topic-12"),
            Some(TopicPartition::new("my-topic", 12))
        );
        assert_eq!(
            TopicPartition::from_dir_name("__cluster_metadata-0"),
            Some(TopicPartition::new("__cluster_metadata", 0))
        );
        assert_eq!(TopicPartition::from_dir_name("nopartition"), None);
        assert_eq!(TopicPartition::from_dir_name("t-x"), None);
    }
}
