//! `--store file:PATH`: cluster state from a YAML/JSON file or directory,
//! for running without a cluster (the demo, the CLI, tests).
//!
//! A file that fails to parse is reported with its path and line and the
//! last good snapshot stays in service.

use super::Snapshot;
use crate::manifest::{self, ManifestError};
use crate::metrics::Metrics;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Reads every object under `path` into a snapshot.
pub fn load(path: &Path) -> Result<Snapshot, ManifestError> {
    let documents = manifest::read_path(path, &[])?;
    Ok(Snapshot::build(documents.into_iter().map(|d| d.value)))
}

/// Logs what a snapshot left out, so an operator sees a bad VPA by name.
pub fn report_problems(snapshot: &Snapshot, source: &str) {
    for problem in &snapshot.problems {
        tracing::warn!(store = source, %problem, "object left out of the store");
    }
}

/// Reloads `path` whenever it changes and calls `publish` with each new
/// good snapshot. Runs until the task is dropped.
pub async fn watch(
    path: PathBuf,
    interval: Duration,
    metrics: Metrics,
    publish: impl Fn(Arc<Snapshot>) + Send + 'static,
) {
    let source = path.clone();
    manifest::poll_changes(path, interval, move || match load(&source) {
        Ok(snapshot) => {
            report_problems(&snapshot, "file");
            tracing::info!(path = %source.display(), vpas = snapshot.vpa_count(), "store reloaded");
            publish(Arc::new(snapshot));
        }
        Err(error) => {
            metrics.store_error("file");
            tracing::warn!(%error, "store reload failed; keeping the previous snapshot");
        }
    })
    .await;
}
