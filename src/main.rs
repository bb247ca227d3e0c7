//! The `kactor` binary (Kafka's `kafka-server-start` + `kafka-storage`): command line,
//! configuration loading, storage formatting, and process start/stop.

// The config API is wider than start-up uses: DescribeConfigs (sources, types, docs) and
// dynamic configs read the rest.
#[allow(dead_code)]
mod config;
mod storage_format;
mod topology;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

use kactor_actors::loggers::{BrokerLoggers, LoggerLevels};

use crate::config::{BrokerConfig, ConfigSources};

#[derive(Parser, Debug)]
#[command(
    name = "kactor",
    version,
    about = "A Kafka-compatible broker built as supervised actors"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start the node (the default with no command: a single combined node on 127.0.0.1:9092).
    Start {
        /// A server.properties file.
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
        /// key=value, overriding the file and the environment; repeatable.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Write meta.properties into every log dir, like `kafka-storage format`.
    Format {
        #[arg(long, short = 'c')]
        config: PathBuf,
        /// The cluster id, e.g. from `kactor random-uuid`.
        #[arg(long = "cluster-id", short = 't')]
        cluster_id: String,
        /// key=value overrides, as for `start`.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Succeed (without changes) when a dir is already formatted for this cluster and node.
        #[arg(long = "ignore-formatted", short = 'g')]
        ignore_formatted: bool,
    },
    /// Print a new random cluster/directory id (Kafka's base64url UUID).
    RandomUuid,
    /// Print the version.
    Version,
}

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
fn tune_allocator() -> bool {
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
fn tune_allocator() -> bool {
    false
}

fn main() -> ExitCode {
    if !tune_allocator() {
        // Not fatal: the broker works with the default thresholds, at some CPU cost.
        eprintln!("kactor: malloc thresholds not set (not glibc, or rejected)");
    }
    let cli = Cli::parse();
    let result = match cli.command.unwrap_or(Command::Start {
        config: None,
        overrides: Vec::new(),
    }) {
        Command::Start { config, overrides } => start(config, overrides),
        Command::Format {
            config,
            cluster_id,
            overrides,
            ignore_formatted,
        } => format(config, cluster_id, overrides, ignore_formatted),
        Command::RandomUuid => {
            println!("{}", storage_format::random_uuid());
            Ok(())
        }
        Command::Version => {
            println!("kactor {} (Kafka 4.4 protocol)", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kactor: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(file: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<BrokerConfig> {
    let sources = ConfigSources {
        file,
        env: std::env::vars().collect(),
        overrides,
    };
    BrokerConfig::load(&sources).context("invalid configuration")
}

/// kactor's module paths, generated by build.rs: the loggers `kafka-configs --entity-type
/// broker-loggers` lists and sets.
mod logger_targets {
    include!(concat!(env!("OUT_DIR"), "/loggers.rs"));
}

/// Starts logging with the `RUST_LOG` directives (or `kactor.log.level`) behind a reload
/// handle, and returns the node's loggers, through which IncrementalAlterConfigs changes the
/// levels at run time.
fn init_logging(cfg: &BrokerConfig) -> Arc<BrokerLoggers> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let level = cfg.get_str("kactor.log.level").unwrap_or("info");
    // RUST_LOG wins when it parses, as before.
    let spec = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|s| EnvFilter::try_new(s).is_ok())
        .unwrap_or_else(|| level.to_string());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&spec));
    let loggers = Arc::new(BrokerLoggers::new(
        LoggerLevels::from_directives(&spec, logger_targets::LOGGER_TARGETS.iter().copied()),
        Box::new(move |directives| {
            let filter = EnvFilter::try_new(directives).map_err(|e| e.to_string())?;
            handle.reload(filter).map_err(|e| e.to_string())
        }),
    ));
    // Colour only on a terminal: log files and `kubectl logs` should stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let json = cfg.get_str("kactor.log.format") == Some("json");
    tracing_subscriber::registry()
        .with(filter)
        .with(TargetRecorder(loggers.seen_targets()))
        .with(json.then(|| fmt::layer().json().with_target(true)))
        .with((!json).then(|| fmt::layer().with_target(true).with_ansi(ansi)))
        .init();
    loggers
}

/// Notes every tracing target whose callsites register (those hit at an enabled level, the
/// first time): they exist as loggers, as Kafka's loggers exist once a class has one.
struct TargetRecorder(Arc<Mutex<BTreeSet<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for TargetRecorder {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // Records bridged from the `log` crate share callsites targeted "log".
        if metadata.target() != "log" {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if !seen.contains(metadata.target()) {
                seen.insert(metadata.target().to_string());
            }
        }
        tracing::subscriber::Interest::always()
    }
}

fn format(
    file: PathBuf,
    cluster_id: String,
    overrides: Vec<String>,
    ignore_formatted: bool,
) -> anyhow::Result<()> {
    let cfg = load_config(Some(file), overrides)?;
    for dir in cfg.log_dirs() {
        let wrote = storage_format::format_log_dir(&dir, &cluster_id, cfg.node_id())?;
        if wrote {
            println!("Formatted {} with cluster.id {cluster_id}", dir.display());
        } else if ignore_formatted {
            println!("{} is already formatted", dir.display());
        } else {
            bail!(
                "{} is already formatted (use --ignore-formatted to accept that)",
                dir.display()
            );
        }
    }
    Ok(())
}

/// Checks (or, for a lone voter with empty dirs, creates) meta.properties in every log dir.
fn ensure_formatted(cfg: &BrokerConfig) -> anyhow::Result<()> {
    let dirs = cfg.log_dirs();
    let mut cluster_id = None;
    let mut missing = Vec::new();
    for dir in &dirs {
        let path = dir.join("meta.properties");
        if path.exists() {
            let props = config::read_properties(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            if props.get("node.id").map(String::as_str) != Some(&*cfg.node_id().to_string()) {
                bail!(
                    "{} belongs to node.id {} but this node is node.id {}",
                    path.display(),
                    props.get("node.id").map(String::as_str).unwrap_or("?"),
                    cfg.node_id()
                );
            }
            cluster_id = props.get("cluster.id").cloned();
        } else {
            missing.push(dir.clone());
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let voters = cfg.quorum_voters();
    let lone_voter = voters.len() == 1 && voters[0].node_id == cfg.node_id();
    if cluster_id.is_none() && !lone_voter {
        bail!(
            "log dir {} is not formatted; run `kactor format --config FILE --cluster-id $(kactor random-uuid)` on every node",
            missing[0].display()
        );
    }
    let cluster_id = cluster_id.unwrap_or_else(storage_format::random_uuid);
    for dir in missing {
        storage_format::format_log_dir(&dir, &cluster_id, cfg.node_id())?;
        tracing::info!(dir = %dir.display(), cluster_id = %cluster_id, "formatted empty log dir");
    }
    Ok(())
}

fn start(file: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let cfg = load_config(file, overrides)?;
    let loggers = init_logging(&cfg);
    if !cfg.unknown_keys.is_empty() {
        tracing::warn!(
            "unknown configuration keys (kept, not used): {}",
            cfg.unknown_keys.join(", ")
        );
    }
    ensure_formatted(&cfg)?;
    tracing::info!(
        node_id = cfg.node_id(),
        roles = %cfg.process_roles().join(","),
        version = env!("CARGO_PKG_VERSION"),
        "starting kactor"
    );
    let system = actix_rt::System::new();
    let fatal = system.block_on(async {
        let node = topology::start(&cfg, loggers).await?;
        tracing::info!(
            metrics = %node.http_address,
            "kactor started: {}",
            node.listeners.iter().map(|l| format!("{}://{}", l.name, l.address)).collect::<Vec<_>>().join(", ")
        );
        let fatal = wait_for_shutdown_signal().await?;
        tracing::info!("shutting down");
        if fatal.is_some() {
            // Kafka halts without a clean shutdown; kactor still tries to flush and checkpoint
            // the partition logs (a failed metadata log does not make them wrong), but bounded:
            // the failure may block parts of the node.
            if tokio::time::timeout(FATAL_SHUTDOWN_TIMEOUT, node.shutdown())
                .await
                .is_err()
            {
                tracing::error!("shutdown after the fatal fault timed out; exiting anyway");
            }
        } else {
            node.shutdown().await;
        }
        anyhow::Ok(fatal)
    })?;
    if let Some(reason) = fatal {
        tracing::error!("stopped after a fatal fault: {reason}");
        eprintln!("kactor: fatal: {reason}");
        std::process::exit(1);
    }
    tracing::info!("stopped");
    Ok(())
}

/// How long the shutdown after a fatal fault may take before the process exits anyway.
const FATAL_SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Waits for SIGTERM / SIGINT or a fatal fault (`kactor_actors::raft::fault`); returns the
/// fault's reason in the latter case.
async fn wait_for_shutdown_signal() -> anyhow::Result<Option<String>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let fatal = tokio::select! {
        _ = term.recv() => { tracing::info!("received SIGTERM"); None }
        _ = int.recv() => { tracing::info!("received SIGINT"); None }
        reason = kactor_actors::raft::fault::fatal_fault() => Some(reason),
    };
    Ok(fatal)
}

#[cfg(test)]
mod tests {
    /// mallopt returns 0 for a value it refuses and keeps its default, which only the start-up
    /// line would show.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn malloc_accepts_the_thresholds() {
        assert!(super::tune_allocator());
    }
}
