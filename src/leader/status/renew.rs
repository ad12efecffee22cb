//! The loop that renews the status Lease every interval while this replica
//! is ready. A failed renewal is logged and counted, never fatal: the
//! webhook serves on, and the Lease goes stale on its own when no replica
//! renews it, which is exactly what the updater must see.

use super::StatusLease;
use crate::metrics::{StatusLeaseMetrics, StatusLeaseRenewal};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
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

/// The field manager of every replica's renewal: one manager, so that two
/// replicas renewing at once both land (the later renewTime wins) instead
/// of one losing a resourceVersion race with a 409.
pub const FIELD_MANAGER: &str = "nodescope-webhook";

/// One renewal: the holder, renewTime and duration applied server-side
/// (forced, so a Lease another manager touched is still renewed). No read
/// first and no resourceVersion: two replicas renewing together used to
/// race a GET and a replace, and the loser counted a 409 (issue 41).
///
/// # Errors
/// Any answer of the apiserver but success, or none.
pub async fn renew_once(
    api: &Api<Lease>,
    status: &StatusLease,
) -> Result<StatusLeaseRenewal, kube::Error> {
    let lease = status.renewed(None, SystemTime::now());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch(&status.name, &params, &Patch::Apply(&lease))
        .await
    {
        Ok(_) => Ok(StatusLeaseRenewal::Success),
        // Only an unforced apply conflicts; kept so that a 409 from anything
        // in between is counted, not reported as a failure.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(StatusLeaseRenewal::Conflict),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
