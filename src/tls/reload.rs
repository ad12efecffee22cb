//! Certificate hot reload: a resolver whose pair is swapped atomically, and a
//! poller that swaps it when both files on disk form a new, valid pair.
//!
//! Polling (not inotify) because Kubernetes Secret volumes change by swapping
//! a `..data` symlink, which file-level watches miss; comparing contents makes
//! the swap visible whatever the mechanism.

use super::{load_pair, TlsError};
use crate::metrics::{ReloadResult, TlsMetrics};
use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Serves whatever pair was last stored; handshakes read it without a lock,
/// and connections already established keep the pair they started with.
#[derive(Debug)]
pub struct ReloadingResolver {
    current: ArcSwap<CertifiedKey>,
}

impl ReloadingResolver {
    /// Starts serving `initial`.
    pub fn new(initial: CertifiedKey) -> Self {
        Self {
            current: ArcSwap::from_pointee(initial),
        }
    }

    /// Replaces the pair for new handshakes only.
    pub fn store(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Bytes of both files; a change in either starts a reload attempt.
fn fingerprint(cert: &Path, key: &Path) -> Option<(Vec<u8>, Vec<u8>)> {
    Some((std::fs::read(cert).ok()?, std::fs::read(key).ok()?))
}

/// Polls the pair every `interval` and swaps it into `resolver` once both
/// files parse as a matching pair. A failed attempt is logged and counted and
/// retried on the next change, while the previous pair keeps serving.
pub async fn watch_pair(
    resolver: Arc<ReloadingResolver>,
    cert: PathBuf,
    key: PathBuf,
    interval: Duration,
    metrics: TlsMetrics,
) {
    let mut seen = fingerprint(&cert, &key);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let now = fingerprint(&cert, &key);
        if now.is_none() || now == seen {
            continue;
        }
        match reload_once(&resolver, &cert, &key) {
            Ok(()) => {
                seen = now;
                metrics.reload(ReloadResult::Success);
                tracing::info!(cert = %cert.display(), key = %key.display(), "reloaded TLS certificate");
            }
            Err(error) => {
                // Remember the bad contents so one half-written pair is
                // reported once, not every tick until it is fixed.
                seen = now;
                metrics.reload(ReloadResult::Failure);
                tracing::warn!(%error, "TLS certificate reload failed; keeping the previous certificate");
            }
        }
    }
}

fn reload_once(resolver: &ReloadingResolver, cert: &Path, key: &Path) -> Result<(), TlsError> {
    let pair = load_pair(cert, key)?;
    resolver.store(pair);
    Ok(())
}
