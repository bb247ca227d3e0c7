//! The `kactor` binary (Kafka's `kafka-server-start` + `kafka-storage`): command line,
//! configuration loading, storage formatting, and process start/stop.

mod allocator;
// The config API is wider than start-up uses: DescribeConfigs (sources, types, docs) and
// dynamic configs read the rest.
#[allow(dead_code)]
mod config;
mod dir_lock;
mod storage_format;
mod topology;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

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

fn main() -> ExitCode {
    if !allocator::tune() {
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
    // Each ConfigError names its key or file and says what is wrong: no context to add.
    Ok(BrokerConfig::load(&sources)?)
}

fn init_logging(cfg: &BrokerConfig) {
    use tracing_subscriber::EnvFilter;
    let level = cfg
        .get_str("kactor.log.level")
        .unwrap_or("info")
        .to_string();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    // Colour only on a terminal: log files and `kubectl logs` should stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(ansi);
    if cfg.get_str("kactor.log.format") == Some("json") {
        builder.json().init();
    } else {
        builder.init();
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
    init_logging(&cfg);
    if !cfg.unknown_keys.is_empty() {
        tracing::warn!(
            "unknown configuration keys (kept, not used): {}",
            cfg.unknown_keys.join(", ")
        );
    }
    // Before anything in the dirs is read or written: a second process on them must stop here.
    let metadata_dir = cfg.metadata_log_dir();
    let log_dirs = cfg.log_dirs();
    let _dir_locks = dir_lock::lock_dirs(
        log_dirs
            .iter()
            .map(PathBuf::as_path)
            .chain([metadata_dir.as_path()]),
    )?;
    ensure_formatted(&cfg)?;
    tracing::info!(
        node_id = cfg.node_id(),
        roles = %cfg.process_roles().join(","),
        version = env!("CARGO_PKG_VERSION"),
        "starting kactor"
    );
    let system = actix_rt::System::new();
    let fatal = system.block_on(async {
        let node = topology::start(&cfg).await?;
        actix_rt::spawn(allocator::give_back_when_quiet(node.pools.clone()));
        kactor_actors::runtime::watchdog::start();
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

/// Waits for SIGTERM / SIGINT or a fatal fault (`kactor_actors::runtime::fault`); returns the
/// fault's reason in the latter case.
async fn wait_for_shutdown_signal() -> anyhow::Result<Option<String>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let fatal = tokio::select! {
        _ = term.recv() => { tracing::info!("received SIGTERM"); None }
        _ = int.recv() => { tracing::info!("received SIGINT"); None }
        reason = kactor_actors::runtime::fault::fatal_fault() => Some(reason),
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
        assert!(super::allocator::tune());
    }
}
