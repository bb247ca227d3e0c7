//! ApiVersions (Kafka's `KafkaApis.handleApiVersionsRequest` + `ApiVersionsResponse`): the
//! version table, supported features, finalized features, and the KIP-511 fallback for
//! requests newer than we understand (a v0 body with UNSUPPORTED_VERSION, listing ApiVersions'
//! own range so the client can retry with a version both sides know).

use std::collections::BTreeMap;
use std::sync::Arc;

use kactor_protocol::errors::{INVALID_REQUEST, NONE, REBOOTSTRAP_REQUIRED, UNSUPPORTED_VERSION};
use kactor_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kactor_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};
use tokio::sync::watch;

use super::router::{AdvertisedTable, Handler, HandlerOutcome, ListenerKind};

/// A feature this build supports, with its level range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: String,
    pub min_version: i16,
    pub max_version: i16,
}

/// The cluster's finalized feature levels, as the metadata image knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizedFeatures {
    /// Offset of the metadata record that set them; -1 while unknown.
    pub epoch: i64,
    pub levels: BTreeMap<String, i16>,
}

/// What ApiVersions reports about features. The topology creates it with
/// [`features_channel`]; the `MetadataPublisherActor` holds the sender and publishes every
/// change of the finalized levels (FeatureLevelRecords) into it.
#[derive(Clone)]
pub struct FeaturesHandle {
    pub supported: Arc<Vec<SupportedFeature>>,
    pub finalized: watch::Receiver<FinalizedFeatures>,
}

/// Kafka 4.4.0's production metadata.version range: 3.3-IV3 (7) to 4.4-IV2 (33).
pub const METADATA_VERSION_MIN: i16 = 7;
pub const METADATA_VERSION_MAX: i16 = 33;

/// The features kactor supports: Kafka 4.4.0's production ranges, the same set the controller
/// accepts (`controller::core::SUPPORTED_FEATURES` says which of them kactor leaves unset at
/// bootstrap and why).
pub fn supported_features() -> Vec<SupportedFeature> {
    [
        ("eligible.leader.replicas.version", 0, 1),
        ("group.version", 0, 1),
        ("kraft.version", 0, 1),
        (
            "metadata.version",
            METADATA_VERSION_MIN,
            METADATA_VERSION_MAX,
        ),
        ("share.version", 0, 2),
        ("streams.version", 0, 1),
        // Level 2: KIP-890 part 2 (txn::leader_verify adds a transactional produce's partition).
        ("transaction.version", 0, 2),
    ]
    .into_iter()
    .map(|(n, lo, hi)| SupportedFeature {
        name: n.into(),
        min_version: lo,
        max_version: hi,
    })
    .collect()
}

/// The finalized levels a freshly formatted single-node 4.4 cluster starts with (what
/// `kafka-storage format` bootstraps for our supported features), until the metadata image
/// publishes the real ones. Epoch -1: not read from the metadata log yet.
pub fn bootstrap_finalized_features() -> FinalizedFeatures {
    FinalizedFeatures {
        epoch: -1,
        levels: BTreeMap::from([
            ("metadata.version".to_string(), METADATA_VERSION_MAX),
            ("transaction.version".to_string(), 2),
            ("group.version".to_string(), 1),
            ("share.version".to_string(), 2),
        ]),
    }
}

/// Creates the features handle and the sender the metadata publisher keeps.
pub fn features_channel(
    supported: Vec<SupportedFeature>,
    initial: FinalizedFeatures,
) -> (watch::Sender<FinalizedFeatures>, FeaturesHandle) {
    let (tx, rx) = watch::channel(initial);
    (
        tx,
        FeaturesHandle {
            supported: Arc::new(supported),
            finalized: rx,
        },
    )
}

fn api_version_entries(table: &[(ApiKey, i16, i16)]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|&(k, min, max)| ApiVersion {
            api_key: k as i16,
            min_version: min,
            max_version: max,
            ..Default::default()
        })
        .collect()
}

/// The KIP-511 answer to an ApiVersions request at a version we do not know: encode it at v0.
pub fn unsupported_version_response(table: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    let own: Vec<_> = table
        .iter()
        .copied()
        .filter(|(k, _, _)| *k == ApiKey::ApiVersions)
        .collect();
    ApiVersionsResponse {
        error_code: UNSUPPORTED_VERSION,
        api_keys: api_version_entries(&own),
        ..Default::default()
    }
}

/// Kafka's rule for client software names and versions (v3+): alphanumerics, '.', '-',
/// starting and ending alphanumeric.
pub fn valid_client_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// Builds the full response for a request at a supported `version`.
pub fn build_response(
    request: &ApiVersionsRequest,
    version: i16,
    table: &[(ApiKey, i16, i16)],
    features: &FeaturesHandle,
) -> ApiVersionsResponse {
    if version >= 3
        && !(valid_client_software_field(&request.client_software_name)
            && valid_client_software_field(&request.client_software_version))
    {
        return ApiVersionsResponse {
            error_code: INVALID_REQUEST,
            ..Default::default()
        };
    }
    // Before v4 a feature range may not start at 0 (KIP-1022): old clients read min 0 as
    // "feature absent". Kafka reports such ranges from 1 and drops those that are only 0.
    let alter_level_0 = version < 4;
    let supported_features = features
        .supported
        .iter()
        .filter(|f| !(alter_level_0 && f.max_version == 0))
        .map(|f| SupportedFeatureKey {
            name: f.name.clone(),
            min_version: if alter_level_0 && f.min_version == 0 {
                1
            } else {
                f.min_version
            },
            max_version: f.max_version,
            ..Default::default()
        })
        .collect();
    let finalized = features.finalized.borrow().clone();
    let finalized_features = finalized
        .levels
        .iter()
        .filter(|(_, &level)| !(alter_level_0 && level == 0))
        .map(|(name, &level)| FinalizedFeatureKey {
            name: name.clone(),
            // Kafka reports finalized features as a single level (min = max).
            max_version_level: level,
            min_version_level: level,
            ..Default::default()
        })
        .collect();
    let mut resp = ApiVersionsResponse {
        error_code: 0,
        api_keys: api_version_entries(table),
        throttle_time_ms: 0,
        supported_features,
        finalized_features_epoch: finalized.epoch,
        finalized_features,
        zk_migration_ready: false,
        ..Default::default()
    };
    if version < 3 {
        // Features exist from v3; the encoder refuses values a version cannot carry.
        resp.supported_features.clear();
        resp.finalized_features.clear();
        resp.finalized_features_epoch = -1;
    }
    resp
}

/// Whether a v5+ request names a cluster (and node) other than `identity` (cluster id, node
/// id): Kafka's broker then answers REBOOTSTRAP_REQUIRED with nothing else (KIP-1102). A
/// request without a cluster id names nothing.
pub fn names_another_node(
    request: &ApiVersionsRequest,
    version: i16,
    identity: (&str, i32),
) -> bool {
    version >= 5
        && request
            .cluster_id
            .as_deref()
            .is_some_and(|c| c != identity.0 || request.node_id != identity.1)
}

/// The router's ApiVersions handler; `tables` holds the advertised table per listener kind,
/// `identity` this node's (cluster id, node id) when known.
pub fn handler(
    tables: BTreeMap<ListenerKind, AdvertisedTable>,
    features: FeaturesHandle,
    identity: Option<(String, i32)>,
) -> Handler {
    Arc::new(move |ctx, body| {
        let table = tables
            .get(&ctx.connection.listener_kind)
            .cloned()
            .unwrap_or_default();
        let outcome = match body {
            RequestBody::ApiVersions(req) => {
                let mut resp = build_response(&req, ctx.api_version, &table, &features);
                // Only Kafka's broker (KafkaApis) checks the identity, after the request's
                // own validity; its controller listener does not.
                let elsewhere = identity.as_ref().is_some_and(|(c, n)| {
                    names_another_node(&req, ctx.api_version, (c.as_str(), *n))
                });
                if resp.error_code == NONE
                    && ctx.connection.listener_kind == ListenerKind::Broker
                    && elsewhere
                {
                    resp = ApiVersionsResponse {
                        error_code: REBOOTSTRAP_REQUIRED,
                        ..Default::default()
                    };
                }
                ctx.record_error(resp.error_code);
                HandlerOutcome::Respond(ResponseBody::ApiVersions(resp))
            }
            other => HandlerOutcome::Close(format!(
                "ApiVersions handler got a {:?} body",
                other.api_key()
            )),
        };
        Box::pin(std::future::ready(outcome))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> FeaturesHandle {
        features_channel(supported_features(), bootstrap_finalized_features()).1
    }

    fn request(name: &str, version: &str) -> ApiVersionsRequest {
        ApiVersionsRequest {
            client_software_name: name.into(),
            client_software_version: version.into(),
            ..Default::default()
        }
    }

    #[test]
    fn v4_reports_zero_minimums_v3_raises_them() {
        let table = [(ApiKey::ApiVersions, 0, 4)];
        let r4 = build_response(&request("kcat", "1.7.0"), 4, &table, &handle());
        let kraft = r4
            .supported_features
            .iter()
            .find(|f| f.name == "kraft.version")
            .unwrap();
        assert_eq!((kraft.min_version, kraft.max_version), (0, 1));
        let r3 = build_response(&request("kcat", "1.7.0"), 3, &table, &handle());
        let kraft = r3
            .supported_features
            .iter()
            .find(|f| f.name == "kraft.version")
            .unwrap();
        assert_eq!((kraft.min_version, kraft.max_version), (1, 1));
        let mv = r3
            .supported_features
            .iter()
            .find(|f| f.name == "metadata.version")
            .unwrap();
        assert_eq!((mv.min_version, mv.max_version), (7, 33));
        let fin = r4
            .finalized_features
            .iter()
            .find(|f| f.name == "metadata.version")
            .unwrap();
        assert_eq!((fin.min_version_level, fin.max_version_level), (33, 33));
        assert_eq!(r4.api_keys.len(), 1);
        assert!(!r4.zk_migration_ready);
    }

    #[test]
    fn invalid_client_software_is_invalid_request() {
        let r = build_response(&request("bad name!", "1"), 3, &[], &handle());
        assert_eq!(r.error_code, INVALID_REQUEST);
        let r = build_response(&request("", ""), 2, &[], &handle());
        assert_eq!(r.error_code, 0);
        assert!(valid_client_software_field("apache-kafka-java"));
        assert!(valid_client_software_field("4.4.0"));
        assert!(!valid_client_software_field("-x"));
    }

    #[test]
    fn finalized_levels_follow_the_publisher() {
        let (tx, h) = features_channel(supported_features(), bootstrap_finalized_features());
        tx.send(FinalizedFeatures {
            epoch: 12,
            levels: BTreeMap::from([("metadata.version".into(), 30)]),
        })
        .unwrap();
        let r = build_response(&request("a", "1"), 4, &[], &h);
        assert_eq!(r.finalized_features_epoch, 12);
        assert_eq!(r.finalized_features[0].max_version_level, 30);
    }

    #[test]
    fn v5_naming_another_cluster_or_node_needs_a_rebootstrap() {
        let mut r = request("kactor-test", "1.0");
        let me = ("abc", 1);
        assert!(
            !names_another_node(&r, 5, me),
            "no cluster id names nothing"
        );
        r.cluster_id = Some("abc".into());
        r.node_id = 1;
        assert!(!names_another_node(&r, 5, me));
        r.node_id = 2;
        assert!(names_another_node(&r, 5, me), "right cluster, wrong node");
        r.node_id = 1;
        r.cluster_id = Some("other".into());
        assert!(names_another_node(&r, 5, me));
        assert!(!names_another_node(&r, 4, me), "v4 has no such fields");
    }

    #[test]
    fn kip511_fallback_lists_only_api_versions() {
        let r = unsupported_version_response(&[(ApiKey::ApiVersions, 0, 4)]);
        assert_eq!(r.error_code, 35);
        assert_eq!(r.api_keys.len(), 1);
        assert_eq!(r.api_keys[0].api_key, 18);
    }
}
