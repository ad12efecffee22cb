//! The loop that renews the status Lease every interval while this replica
//! is ready. A failed renewal is logged and counted, never fatal: the
//! webhook serves on, and the Lease goes stale on its own when no replica
//! renews it, which is exactly what the updater must see.

use super::StatusLease;
use crate::metrics::{StatusLeaseMetrics, StatusLeaseRenewal};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::Client;
use std::future::Future;
use std::time::{Duration, SystemTime};
use tokio::time::MissedTickBehavior;

/// Renews `status` every `interval` until `stop` resolves, first at once.
/// A tick while `ready()` is false writes nothing: a replica that cannot
/// answer reviews must not say it can. Each attempt gets `interval` to
/// finish (as upstream's), so a hung apiserver call cannot pile renewals
/// up behind it.
///
/// Every tick counts one `nodescope_status_lease_renewals_total{result}`;
/// the series start at 0 here.
pub async fn run(
    client: Client,
    status: StatusLease,
    interval: Duration,
    ready: impl Fn() -> bool + Send,
    metrics: StatusLeaseMetrics,
    stop: impl Future<Output = ()> + Send,
) {
    metrics.start();
    let api: Api<Lease> = Api::namespaced(client, &status.namespace);
    let lease = status.lease();
    tracing::info!(%lease, identity = %status.identity, ?interval, "renewing the webhook status Lease while ready");
    let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(stop);
    let mut last = None;
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = ticks.tick() => {}
        }
        let result = if ready() {
            match tokio::time::timeout(interval, renew_once(&api, &status)).await {
                Ok(Ok(result)) => result,
                Ok(Err(error)) => {
                    tracing::warn!(%lease, %error, "renewing the webhook status Lease failed; retrying next interval");
                    StatusLeaseRenewal::Failure
                }
                Err(_) => {
                    tracing::warn!(%lease, timeout = ?interval, "renewing the webhook status Lease timed out; retrying next interval");
                    StatusLeaseRenewal::Failure
                }
            }
        } else {
            if last != Some(StatusLeaseRenewal::NotReady) {
                tracing::info!(%lease, "not ready: not renewing the webhook status Lease");
            }
            StatusLeaseRenewal::NotReady
        };
        metrics.renewal(result);
        last = Some(result);
    }
}

/// One renewal: read the Lease, then create it, or replace it with the
/// resourceVersion read. A conflict means another replica wrote between
/// the read and the write, so the Lease is fresh anyway (upstream ignores
/// it too).
///
/// # Errors
/// Any other answer of the apiserver, or none.
pub async fn renew_once(
    api: &Api<Lease>,
    status: &StatusLease,
) -> Result<StatusLeaseRenewal, kube::Error> {
    let current = api.get_opt(&status.name).await?;
    let lease = status.renewed(current.as_ref(), SystemTime::now());
    let written = match current {
        None => api.create(&PostParams::default(), &lease).await,
        Some(_) => {
            api.replace(&status.name, &PostParams::default(), &lease)
                .await
        }
    };
    match written {
        Ok(_) => Ok(StatusLeaseRenewal::Success),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(StatusLeaseRenewal::Conflict),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
