//! The `quorum-state` file in the metadata log dir (Kafka's `FileQuorumStateStore`): a JSON
//! rendering of `QuorumStateData`. With a static voter set (`controller.quorum.voters`,
//! kraft.version 0) Kafka 4.4.0 writes data_version 0, e.g.
//! `{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}`;
//! with kraft.version 1 (KIP-853) it writes data_version 1, with the voted replica's directory
//! id and no voter list:
//! `{"leaderId":-1,"leaderEpoch":3,"votedId":2,"votedDirectoryId":"...","data_version":1}`.
//! Written to a temp file, fsynced and renamed, so a crash leaves the old or the new state.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use kactor_protocol::Uuid;

use super::core::{ElectionState, ReplicaKey};

pub const QUORUM_STATE_FILE: &str = "quorum-state";

#[derive(Debug, thiserror::Error)]
pub enum QuorumStateError {
    #[error("quorum-state I/O: {0}")]
    Io(#[from] io::Error),
    #[error("quorum-state file {path} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(QUORUM_STATE_FILE)
}

/// Reads the file; `Ok(None)` when there is none (a fresh node).
pub fn read(dir: &Path) -> Result<Option<ElectionState>, QuorumStateError> {
    let path = path_in(dir);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let invalid = |reason: &str| QuorumStateError::Invalid {
        path: path.clone(),
        reason: reason.to_string(),
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| invalid(&e.to_string()))?;
    let int = |k: &str| -> Result<i64, QuorumStateError> {
        v.get(k)
            .and_then(Value::as_i64)
            .ok_or_else(|| invalid(&format!("missing or non-integer {k}")))
    };
    let data_version = int("data_version")?;
    if !(0..=1).contains(&data_version) {
        return Err(invalid(&format!("unknown data_version {data_version}")));
    }
    let opt = |n: i64| (n >= 0).then_some(n as i32);
    let voters = v
        .get("currentVoters")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.get("voterId").and_then(Value::as_i64).map(|n| n as i32))
                .collect()
        })
        .unwrap_or_default();
    let voted_dir = v
        .get("votedDirectoryId")
        .and_then(Value::as_str)
        .map(|s| {
            s.parse::<Uuid>()
                .map_err(|_| invalid("bad votedDirectoryId"))
        })
        .transpose()?;
    Ok(Some(ElectionState {
        epoch: int("leaderEpoch")? as i32,
        leader_id: opt(int("leaderId")?),
        voted_key: opt(int("votedId")?).map(|id| ReplicaKey::of(id, voted_dir)),
        voters,
    }))
}

/// Writes the file durably, in `data_version` 0 (kraft.version 0) or 1.
pub fn write(dir: &Path, state: &ElectionState, data_version: i16) -> Result<(), QuorumStateError> {
    // Field order as Kafka's JSON converter emits it (serde_json keeps insertion order only
    // with a feature we do not enable, so the text is built by hand).
    let voted_id = state.voted_key.map_or(-1, |k| k.id);
    let text = if data_version == 0 {
        let voters: Vec<Value> = state
            .voters
            .iter()
            .map(|id| json!({ "voterId": id }))
            .collect();
        format!(
            "{{\"clusterId\":\"\",\"leaderId\":{},\"leaderEpoch\":{},\"votedId\":{},\"appliedOffset\":0,\"currentVoters\":{},\"data_version\":0}}",
            state.leader_id.unwrap_or(-1),
            state.epoch,
            voted_id,
            Value::Array(voters),
        )
    } else {
        let dir_id = state
            .voted_key
            .and_then(|k| k.directory_id)
            .unwrap_or(Uuid::ZERO);
        format!(
            "{{\"leaderId\":{},\"leaderEpoch\":{},\"votedId\":{},\"votedDirectoryId\":\"{}\",\"data_version\":1}}",
            state.leader_id.unwrap_or(-1),
            state.epoch,
            voted_id,
            dir_id,
        )
    };
    let path = path_in(dir);
    let tmp = dir.join(format!("{QUORUM_STATE_FILE}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_kafka_writes_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let s = ElectionState {
            epoch: 1,
            leader_id: Some(1),
            voted_key: None,
            voters: vec![1],
        };
        write(dir.path(), &s, 0).unwrap();
        assert_eq!(
            fs::read_to_string(path_in(dir.path())).unwrap(),
            r#"{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}"#
        );
        assert_eq!(read(dir.path()).unwrap(), Some(s));
    }

    #[test]
    fn reads_a_v1_file_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            path_in(dir.path()),
            r#"{"leaderId":-1,"leaderEpoch":3,"votedId":2,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}"#,
        )
        .unwrap();
        let s = read(dir.path()).unwrap().unwrap();
        assert_eq!(
            (s.epoch, s.leader_id, s.voted_key),
            (3, None, Some(ReplicaKey::without_dir(2)))
        );
        // What this node writes back in data_version 1 reads the same.
        let dir_id: Uuid = "nhSm0cU3RgubQ5xy6jjn7g".parse().unwrap();
        let voted = ElectionState {
            epoch: 4,
            leader_id: None,
            voted_key: Some(ReplicaKey::of(2, Some(dir_id))),
            voters: vec![],
        };
        write(dir.path(), &voted, 1).unwrap();
        assert_eq!(
            fs::read_to_string(path_in(dir.path())).unwrap(),
            r#"{"leaderId":-1,"leaderEpoch":4,"votedId":2,"votedDirectoryId":"nhSm0cU3RgubQ5xy6jjn7g","data_version":1}"#
        );
        assert_eq!(read(dir.path()).unwrap(), Some(voted));
        fs::write(path_in(dir.path()), "nope").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
