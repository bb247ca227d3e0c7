//! `kactor format` and `kactor random-uuid` (Kafka's `kafka-storage format` / `random-uuid`):
//! Kafka-style base64url UUIDs and the `meta.properties` file written into each log dir.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use kactor_actors::raft::core::{Endpoint, KRaftVersionRange, ReplicaKey, VoterNode, VoterSet};
use kactor_protocol::Uuid;
use rand::RngCore;

use crate::config::BrokerConfig;

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

/// How `kactor format` sets up a dynamic quorum (Kafka's `kafka-storage format` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitialVoters {
    /// No flag: right for brokers and for static quorums (`controller.quorum.voters`).
    Unspecified,
    /// `--standalone`: this controller is the only voter.
    Standalone,
    /// `--initial-controllers ID@HOST:PORT:DIRECTORY_ID,...`
    List(String),
    /// `--no-initial-controllers`: a controller that joins later.
    None,
}

/// What the bootstrap checkpoint of a dynamic-quorum controller holds.
#[derive(Debug, Clone)]
pub struct BootstrapQuorum {
    /// The metadata log dir's `directory.id` (chosen here, or given by the list).
    pub directory_id: Option<String>,
    /// The first voters; None for `--no-initial-controllers` (kraft.version 1, no voters).
    pub voters: Option<VoterSet>,
}

/// Checks the flags against the node's roles and quorum settings, as `kafka-storage format`
/// does, and works out the bootstrap checkpoint to write (None: none).
pub fn bootstrap_quorum(
    cfg: &BrokerConfig,
    initial: InitialVoters,
) -> anyhow::Result<Option<BootstrapQuorum>> {
    let flag = match &initial {
        InitialVoters::Unspecified => None,
        InitialVoters::Standalone => Some("--standalone"),
        InitialVoters::List(_) => Some("--initial-controllers"),
        InitialVoters::None => Some("--no-initial-controllers"),
    };
    let dynamic = cfg.quorum_voters().is_empty();
    match flag {
        // Kafka takes it anywhere: a broker, or a static quorum, then gets nothing extra.
        Some("--no-initial-controllers") if !cfg.is_controller() || !dynamic => return Ok(None),
        Some(flag) if !cfg.is_controller() => {
            bail!("You can only use {flag} on a controller.")
        }
        Some(_) if !dynamic => bail!(
            "You cannot specify controller.quorum.voters and format the node with \
             --initial-controllers or --standalone. If you want to use dynamic quorum, please \
             remove controller.quorum.voters and specify controller.quorum.bootstrap.servers \
             instead."
        ),
        None if cfg.is_controller() && dynamic => bail!(
            "Because controller.quorum.voters is not set on this controller, you must specify \
             one of the following: --standalone, --initial-controllers, or \
             --no-initial-controllers."
        ),
        None => return Ok(None),
        Some(_) => {}
    }
    let listener = cfg
        .get_list("controller.listener.names")
        .into_iter()
        .next()
        .unwrap_or_else(|| "CONTROLLER".to_string());
    let node = |id: i32, dir: Uuid, endpoints: Vec<Endpoint>| VoterNode {
        key: ReplicaKey::of(id, Some(dir)),
        listeners: endpoints,
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    };
    Ok(Some(match initial {
        InitialVoters::Standalone => {
            let dir = random_uuid();
            let endpoints = cfg.controller_endpoints();
            BootstrapQuorum {
                voters: Some(VoterSet::new([node(
                    cfg.node_id(),
                    dir.parse().expect("a generated uuid parses"),
                    endpoints,
                )])),
                directory_id: Some(dir),
            }
        }
        InitialVoters::List(list) => {
            let mut nodes = Vec::new();
            let mut own = None;
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let (id, host, port, dir) = parse_initial_controller(entry)?;
                if nodes.iter().any(|n: &VoterNode| n.key.id == id) {
                    bail!("--initial-controllers names node {id} twice");
                }
                if id == cfg.node_id() {
                    own = Some(dir.to_string());
                }
                let endpoint = Endpoint {
                    listener: listener.clone(),
                    host,
                    port,
                };
                nodes.push(node(id, dir, vec![endpoint]));
            }
            if nodes.is_empty() {
                bail!("--initial-controllers lists no controller");
            }
            BootstrapQuorum {
                directory_id: own,
                voters: Some(VoterSet::new(nodes)),
            }
        }
        _ => BootstrapQuorum {
            directory_id: None,
            voters: None,
        },
    }))
}

/// One `ID@HOST:PORT:DIRECTORY_ID` of `--initial-controllers`.
fn parse_initial_controller(entry: &str) -> anyhow::Result<(i32, String, u16, Uuid)> {
    let bad = || anyhow::anyhow!("{entry:?} is not ID@HOST:PORT:DIRECTORY_ID");
    let (id, rest) = entry.split_once('@').ok_or_else(bad)?;
    let (rest, dir) = rest.rsplit_once(':').ok_or_else(bad)?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let id: i32 = id.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let dir = uuid_from_string(dir)
        .map(Uuid)
        .filter(|u| *u != Uuid::ZERO)
        .ok_or_else(|| anyhow::anyhow!("{entry:?}: {dir:?} is not a directory id"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if id < 0 || host.is_empty() {
        return Err(bad());
    }
    Ok((id, host.to_string(), port, dir))
}

/// Writes the bootstrap checkpoint (snapshot 0-0 of `__cluster_metadata-0`) into the metadata
/// log dir `dir`.
pub fn write_bootstrap_checkpoint(dir: &Path, q: &BootstrapQuorum) -> anyhow::Result<()> {
    let partition = dir.join(kactor_actors::raft::METADATA_PARTITION_DIR);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    kactor_actors::raft::snapshot::write_bootstrap(&partition, q.voters.as_ref(), now).with_context(
        || {
            format!(
                "writing the bootstrap checkpoint in {}",
                partition.display()
            )
        },
    )
}

/// Writes `meta.properties` (version 1) into `dir`. Refuses a dir already formatted for a
/// different cluster or node, and leaves a matching one alone (idempotent re-format).
/// Returns whether it wrote a new file.
pub fn format_log_dir(
    dir: &Path,
    cluster_id: &str,
    node_id: i32,
    directory_id: Option<&str>,
) -> anyhow::Result<bool> {
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
        (
            "directory.id",
            directory_id.map_or_else(random_uuid, str::to_string),
        ),
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
        assert!(format_log_dir(dir.path(), &id, 3, None).unwrap());
        let props = crate::config::read_properties(&dir.path().join("meta.properties")).unwrap();
        assert_eq!(props["version"], "1");
        assert_eq!(props["cluster.id"], id);
        assert_eq!(props["node.id"], "3");
        assert!(uuid_from_string(&props["directory.id"]).is_some());
        assert!(!format_log_dir(dir.path(), &id, 3, None).unwrap());
        let err = format_log_dir(dir.path(), &random_uuid(), 3, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("already formatted"), "{err}");
        assert!(format_log_dir(dir.path(), "bad", 3, None).is_err());
    }

    fn cfg(props: &[&str]) -> BrokerConfig {
        BrokerConfig::load(&crate::config::ConfigSources {
            file: None,
            env: Vec::new(),
            overrides: props.iter().map(|p| p.to_string()).collect(),
        })
        .unwrap()
    }

    const CONTROLLER: &[&str] = &[
        "process.roles=controller",
        "node.id=2",
        "listeners=CONTROLLER://127.0.0.1:19093",
        "controller.quorum.bootstrap.servers=127.0.0.1:19093",
    ];

    /// kafka-storage format's rules and messages for the three KIP-853 flags.
    #[test]
    fn dynamic_quorum_flags_follow_kafka_storage_format() {
        let dynamic = cfg(CONTROLLER);
        let err = bootstrap_quorum(&dynamic, InitialVoters::Unspecified).unwrap_err();
        assert!(err.to_string().starts_with(
            "Because controller.quorum.voters is not set on this controller, you must specify"
        ));
        let broker = cfg(&[
            "process.roles=broker",
            "node.id=4",
            "controller.quorum.bootstrap.servers=127.0.0.1:19093",
        ]);
        for flag in [InitialVoters::Unspecified, InitialVoters::None] {
            assert!(bootstrap_quorum(&broker, flag).unwrap().is_none());
        }
        assert_eq!(
            bootstrap_quorum(&broker, InitialVoters::Standalone)
                .unwrap_err()
                .to_string(),
            "You can only use --standalone on a controller."
        );
        // A static quorum (the single-node defaults are one) takes only
        // --no-initial-controllers, which changes nothing.
        assert!(bootstrap_quorum(&cfg(&[]), InitialVoters::Standalone).is_err());
        assert!(bootstrap_quorum(&cfg(&[]), InitialVoters::None)
            .unwrap()
            .is_none());

        // --standalone: this node alone, on its controller listener, with a fresh dir id.
        let q = bootstrap_quorum(&dynamic, InitialVoters::Standalone)
            .unwrap()
            .unwrap();
        let voters = q.voters.unwrap();
        let me = voters.get(2).unwrap();
        assert_eq!(voters.ids().collect::<Vec<_>>(), vec![2]);
        assert_eq!(
            me.key.directory_id.map(|d| d.to_string()),
            q.directory_id.clone()
        );
        assert_eq!(
            me.listeners,
            vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: "127.0.0.1".into(),
                port: 19093,
            }]
        );

        // --initial-controllers: every listed voter; this node's dir id from the list.
        let (d1, d2) = (random_uuid(), random_uuid());
        let list = format!("1@c1:9093:{d1},2@[::1]:9094:{d2}");
        let q = bootstrap_quorum(&dynamic, InitialVoters::List(list))
            .unwrap()
            .unwrap();
        assert_eq!(q.directory_id.as_deref(), Some(d2.as_str()));
        let voters = q.voters.unwrap();
        assert_eq!(voters.ids().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(voters.get(2).unwrap().listeners[0].host, "::1");
        for bad in [
            "1@c1:9093",
            "x@c1:9093:{d1}",
            "1@c1:port:{d1}",
            "1@c1:9093:nope",
        ] {
            let list = bad.replace("{d1}", &d1);
            assert!(
                bootstrap_quorum(&dynamic, InitialVoters::List(list)).is_err(),
                "{bad}"
            );
        }

        // --no-initial-controllers: kraft.version 1, no voters.
        let q = bootstrap_quorum(&dynamic, InitialVoters::None)
            .unwrap()
            .unwrap();
        assert!(q.voters.is_none() && q.directory_id.is_none());
    }
}
