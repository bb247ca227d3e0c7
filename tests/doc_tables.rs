//! Keeps the generated tables in docs/ true to the code (kactor's counterpart of Kafka's generated
//! protocol and config docs, `protocol_api_keys.html` / `generated_broker_config.html`): the
//! compatibility tables in docs/compatibility.md from `kactor_protocol::versions` and the
//! configuration reference in docs/configuration.md from `src/config/defs.rs`. Each table lives
//! between `<!-- NAME:begin -->` / `<!-- NAME:end -->` markers; the test fails with a diff when a
//! document differs from what the code says now.
//!
//! Regenerate every region in place with:
//!
//! ```sh
//! UPDATE_DOCS=1 cargo test --test doc_tables
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use kactor_protocol::versions::{advertised_range, supported_range};
use kactor_protocol::ApiKey;

// The binary package has no library target, so the definitions are compiled in here directly;
// the file has no crate-internal imports, which keeps this possible.
#[allow(dead_code)]
#[path = "../src/config/defs.rs"]
mod defs;

use defs::{ConfigDef, ConfigType, Mutability, Validator, BROKER_CONFIG_DEFS};

/// Kafka 4.4.0 APIs this repository has no schemas for, so `ApiKey` cannot name them:
/// (api key, name, min, max, listeners), from Kafka 4.4.0's request schemas (`validVersions`,
/// `listeners`; none of them has a `latestVersionUnstable` version). An entry is ignored once
/// `ApiKey` knows its key, so adding a schema never makes this list lie.
const KAFKA_APIS_WITHOUT_SCHEMA: &[(i16, &str, i16, i16, &str)] = &[
    (38, "CreateDelegationToken", 1, 3, "broker, controller"),
    (39, "RenewDelegationToken", 1, 2, "broker, controller"),
    (40, "ExpireDelegationToken", 1, 2, "broker, controller"),
    (41, "DescribeDelegationToken", 1, 3, "broker, controller"),
    (71, "GetTelemetrySubscriptions", 0, 0, "broker"),
    (72, "PushTelemetry", 0, 0, "broker"),
    (83, "InitializeShareGroupState", 0, 0, "broker"),
    (84, "ReadShareGroupState", 0, 0, "broker"),
    (85, "WriteShareGroupState", 0, 1, "broker"),
    (86, "DeleteShareGroupState", 0, 0, "broker"),
    (87, "ReadShareGroupStateSummary", 0, 1, "broker"),
    (88, "StreamsGroupHeartbeat", 0, 1, "broker"),
    (89, "StreamsGroupDescribe", 0, 1, "broker"),
    (91, "AlterShareGroupOffsets", 0, 0, "broker"),
    (92, "DeleteShareGroupOffsets", 0, 0, "broker"),
    (93, "StreamsGroupTopologyDescriptionUpdate", 0, 0, "broker"),
];

fn range(min: i16, max: i16) -> String {
    if min == max {
        format!("{min}")
    } else {
        format!("{min}–{max}")
    }
}

/// The "Compatibility" region: served APIs with both ranges, then Kafka 4.4 APIs not served.
fn compat_region() -> String {
    let mut out = String::new();
    out.push_str("| Key | API | kactor | Kafka 4.4.0 |\n|---:|---|---|---|\n");
    let mut unserved: BTreeMap<i16, (String, String, String)> = BTreeMap::new();
    for &key in ApiKey::ALL {
        let (kmin, kmax) = advertised_range(key);
        match supported_range(key) {
            Some((min, max)) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} |",
                    key as i16,
                    key.name(),
                    range(min, max),
                    range(kmin, kmax)
                );
            }
            None => {
                unserved.insert(
                    key as i16,
                    (
                        key.name().to_string(),
                        range(kmin, kmax),
                        key.listeners().join(", "),
                    ),
                );
            }
        }
    }
    for &(k, name, min, max, listeners) in KAFKA_APIS_WITHOUT_SCHEMA {
        if ApiKey::try_from(k).is_err() {
            unserved.insert(
                k,
                (name.to_string(), range(min, max), listeners.to_string()),
            );
        }
    }
    out.push_str(
        "\nApache Kafka 4.4.0 APIs this build does not serve yet (a client that needs one gets \
         no entry for it in ApiVersions; `controller`-only APIs are the KRaft quorum's own):\n\n",
    );
    out.push_str("| Key | API | Kafka 4.4.0 | Kafka listeners |\n|---:|---|---|---|\n");
    for (k, (name, r, listeners)) in unserved {
        let _ = writeln!(out, "| {k} | {name} | {r} | {listeners} |");
    }
    out
}

fn type_name(t: ConfigType) -> &'static str {
    // Kafka's `ConfigDef.Type` names, as its docs and DescribeConfigs tools print them.
    match t {
        ConfigType::Boolean => "boolean",
        ConfigType::String => "string",
        ConfigType::Int => "int",
        ConfigType::Short => "short",
        ConfigType::Long => "long",
        ConfigType::Double => "double",
        ConfigType::List => "list",
        ConfigType::Class => "class",
        ConfigType::Password => "password",
    }
}

fn valid_values(v: Validator) -> String {
    match v {
        Validator::Any => String::new(),
        Validator::AtLeast(n) => format!("≥ {n}"),
        Validator::Between(a, b) => format!("{a} … {b}"),
        Validator::OneOf(vals) => vals.join(", "),
        Validator::ListOf(vals) => format!("list of {}", vals.join(", ")),
        Validator::NonEmpty => "non-empty".to_string(),
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn code_cell(s: &str) -> String {
    if s.is_empty() {
        "`\"\"`".to_string()
    } else {
        format!("`{}`", cell(s))
    }
}

fn config_row(d: &ConfigDef) -> String {
    let default = match d.default {
        None => "null".to_string(),
        Some(v) => code_cell(v),
    };
    let dynamic = match d.mutability {
        Mutability::ReadOnly => "",
        Mutability::ClusterWide => "yes",
    };
    format!(
        "| `{}` | {} | {} | {} | {} | {} |\n",
        d.name,
        type_name(d.ty),
        default,
        cell(&valid_values(d.validator)),
        dynamic,
        cell(d.doc)
    )
}

/// Section titles in definition order, with the keys under each, read from the
/// `// --- title ---` comments in defs.rs so the reference groups keys as the code does.
fn sections() -> Vec<(String, Vec<&'static ConfigDef>)> {
    let source = include_str!("../src/config/defs.rs");
    let mut by_name: BTreeMap<&str, &'static ConfigDef> =
        BROKER_CONFIG_DEFS.iter().map(|d| (d.name, d)).collect();
    let mut out: Vec<(String, Vec<&'static ConfigDef>)> = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(title) = line
            .strip_prefix("// --- ")
            .and_then(|l| l.strip_suffix(" ---"))
        {
            out.push((title.to_string(), Vec::new()));
            continue;
        }
        for opener in ["def(\"", "dynamic(\""] {
            if let Some(rest) = line.strip_prefix(opener) {
                let name = rest.split('"').next().unwrap();
                if let Some(d) = by_name.remove(name) {
                    out.last_mut()
                        .expect("a config definition before the first `// --- section ---`")
                        .1
                        .push(d);
                }
            }
        }
    }
    assert!(
        by_name.is_empty(),
        "defs.rs keys not found on a `def(\"...` / `dynamic(\"...` line: {:?}",
        by_name.keys().collect::<Vec<_>>()
    );
    out
}

/// The "Configuration reference" region: Kafka's keys by section, then kactor's own keys.
fn config_region() -> String {
    const HEADER: &str = "| Key | Type | Default | Valid values | Dynamic | Description |\n\
                          |---|---|---|---|---|---|\n";
    let mut kafka = String::new();
    let mut own = String::new();
    for (mut title, defs) in sections() {
        let (kafka_keys, own_keys): (Vec<_>, Vec<_>) = defs
            .into_iter()
            .partition(|d| !d.name.starts_with("kactor."));
        if !kafka_keys.is_empty() {
            title[..1].make_ascii_uppercase();
            let _ = write!(kafka, "#### {title}\n\n{HEADER}");
            for d in kafka_keys {
                kafka.push_str(&config_row(d));
            }
            kafka.push('\n');
        }
        for d in own_keys {
            own.push_str(&config_row(d));
        }
    }
    format!("{kafka}#### kactor's own keys\n\n{HEADER}{own}")
}

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    )
}

/// Byte bounds of the text between `name`'s markers in `doc` (after the begin line, up to the
/// end marker); `file` names the document in the panic.
fn region_bounds(doc: &str, file: &str, name: &str) -> (usize, usize) {
    let (begin, end) = markers(name);
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("{file} has no `{}` marker", begin.trim()))
        + begin.len();
    let stop = start
        + doc[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{file} has no `{end}` marker after the begin marker"));
    (start, stop)
}

/// A line diff (longest common subsequence; the regions are a few hundred lines).
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = actual.lines().collect();
    let e: Vec<&str> = expected.lines().collect();
    let mut lcs = vec![vec![0usize; e.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..e.len()).rev() {
            lcs[i][j] = if a[i] == e[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < e.len() {
        if i < a.len() && j < e.len() && a[i] == e[j] {
            i += 1;
            j += 1;
        } else if j < e.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "+ {}", e[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "- {}", a[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn doc_tables_match_the_code() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let wanted = [
        ("docs/compatibility.md", "compat", compat_region()),
        ("docs/configuration.md", "config", config_region()),
    ];
    let update = std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1");

    let mut report = String::new();
    for (file, name, content) in &wanted {
        let path = root.join(file);
        let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let (start, stop) = region_bounds(&doc, file, name);
        let current = &doc[start..stop];
        if current == content {
            continue;
        }
        if update {
            let updated = format!("{}{}{}", &doc[..start], content, &doc[stop..]);
            std::fs::write(&path, updated).unwrap_or_else(|e| panic!("write {file}: {e}"));
        } else {
            let _ = write!(
                report,
                "{file} region `{name}` is out of date (- document, + code):\n{}\n",
                diff(content, current)
            );
        }
    }
    assert!(
        report.is_empty(),
        "{report}Regenerate with: UPDATE_DOCS=1 cargo test --test doc_tables"
    );
}
