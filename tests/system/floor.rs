//! The floor (issue 41): how long a bare client takes to send the updater's
//! resizes to the same apiserver, at the same concurrency and pace, so that
//! the updater's convergence is printed beside what no updater could beat
//! on this cluster and this machine.
//!
//! Run after step 1, before the recommender writes any group: every scoped
//! pod but step 4's (the same `pods/resize` body the updater sends, a test
//! of the pod's resourceVersion and its requests, through
//! `nodescope::pods::resize`) is resized once at the updater's
//! `--kube-api-qps`/`--kube-api-burst` with `--kube-api-burst` in flight,
//! then once more unpaced at the same concurrency (the apiserver's own
//! pace). Both keep the updater's limit: at most the tolerance of each
//! DaemonSet is resized and not yet actuated at once, so the floor goes in
//! waves of that many per DaemonSet, each actuated before the next (the
//! updater may overlap them; a bare client does not watch). Each pass is
//! timed to the last answer ("sent": the waves' sends summed) and to the
//! last pod the kubelet actuated ("actuated"). The floor's client is the
//! suite's admin, which the audit log leaves out, so the apiserver does a
//! little less for it than for the updater.

use crate::scenario::{say, until, World};
use crate::steps::{name, node_of};
use crate::workloads::{daemonset_of, pod_resources, NS, SCOPED};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use nodescope::pace::PaceFlags;
use std::time::{Duration, Instant};

/// The updater's client in this suite: the shipped defaults, set on its
/// command line so that the floor cannot drift from it.
pub const UPDATER_PACE: PaceFlags = PaceFlags {
    kube_api_qps: nodescope::pace::DEFAULT_QPS,
    kube_api_burst: nodescope::pace::DEFAULT_BURST,
};

/// One pass of the floor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pass {
    pub writes: usize,
    pub sent: Duration,
    pub actuated: Duration,
}

/// Both passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Floor {
    pub paced: Pass,
    pub unpaced: Pass,
}

impl Floor {
    /// The paced floor for `writes` of the same kind: the measured seconds
    /// per write, scaled (0 when nothing was measured). For a fault that
    /// changes one DaemonSet this is stricter than a floor measured on it:
    /// its waves are half as wide but wait as long for the kubelet.
    pub fn for_writes(&self, writes: usize) -> f64 {
        if self.paced.writes == 0 {
            return 0.0;
        }
        self.paced.actuated.as_secs_f64() * writes as f64 / self.paced.writes as f64
    }

    /// "floor for K writes S s sent, A s actuated: Rx the floor actuated,
    /// Qx its sends", for a step's or a fault's line. Convergence is every
    /// pod actuated at its group, so the actuated floor is its like; the
    /// sends alone are the bound no kubelet could lower.
    pub fn beside(&self, writes: usize, took: f64) -> String {
        let floor = self.for_writes(writes);
        let sent = if self.paced.writes == 0 {
            0.0
        } else {
            self.paced.sent.as_secs_f64() * writes as f64 / self.paced.writes as f64
        };
        let ratio = |of: f64| if of > 0.0 { took / of } else { 0.0 };
        format!(
            "floor for {writes} writes {sent:.1} s sent, {floor:.1} s actuated: {:.2}x the floor actuated, {:.2}x its sends",
            ratio(floor),
            ratio(sent)
        )
    }
}

/// The pods the floor resizes: every scoped pod but step 4's node's.
fn chosen(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| SCOPED.contains(&daemonset_of(p).as_str()))
        .filter(|p| node_of(p) != crate::deferred::NODE)
        .collect()
}

/// Resizes every chosen pod's cpu request to `milli`, `in_flight` at once,
/// through `client`, in waves of `wave` pods per DaemonSet; each wave waits
/// until the kubelet actuated it.
async fn pass(
    world: &mut World,
    client: &kube::Client,
    milli: i64,
    in_flight: usize,
    wave: usize,
) -> Pass {
    let pods = world.pods(NS).await;
    let picked = chosen(&pods);
    let writes = picked.len();
    // Wave i: the i-th `wave` pods of each DaemonSet, by name.
    let mut waves: Vec<Vec<String>> = Vec::new();
    for ds in SCOPED {
        let of: Vec<String> = picked
            .iter()
            .filter(|p| daemonset_of(p) == *ds)
            .map(|p| name(p))
            .collect();
        for (i, chunk) in of.chunks(wave.max(1)).enumerate() {
            if waves.len() <= i {
                waves.push(Vec::new());
            }
            waves[i].extend_from_slice(chunk);
        }
    }
    let began = Instant::now();
    let mut sent = Duration::ZERO;
    // Each wave's resourceVersions from the list that saw the last one
    // actuated, as the updater's from its watch.
    let mut latest = pods;
    for names in waves {
        let wanted: std::collections::HashSet<String> = names.into_iter().collect();
        let versions: Vec<(String, String)> = latest
            .iter()
            .filter(|p| wanted.contains(&name(p)))
            .map(|p| {
                (
                    name(p),
                    p.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        let sending = Instant::now();
        let failures: Vec<String> = futures::stream::iter(versions)
            .map(|(pod, version)| async move {
                let ops = nodescope::pods::resize::container_resources_ops(
                    0,
                    &[("cpu".to_owned(), format!("{milli}m"))],
                    &[],
                );
                let body = nodescope::pods::resize::resize_body(ops, &version);
                nodescope::pods::resize::resize(client, NS, &pod, &body)
                    .await
                    .err()
                    .map(|e| format!("{pod}: {e}"))
            })
            .buffer_unordered(in_flight.max(1))
            .filter_map(|f| async move { f })
            .collect()
            .await;
        sent += sending.elapsed();
        assert!(
            failures.is_empty(),
            "the floor's resizes: {} refused: {}",
            failures.len(),
            failures
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
        let n = world.n;
        let names = std::sync::Arc::new(wanted);
        latest = until(
            world,
            "the floor's resizes actuated",
            Duration::from_secs(120 + n as u64 / 4),
            |w| {
                let names = names.clone();
                Box::pin(async move {
                    let pods = w.pods(NS).await;
                    let off = pods
                        .iter()
                        .filter(|p| names.contains(&name(p)))
                        .filter(|p| pod_resources(p).iter().any(|r| r.0 != milli))
                        .count();
                    if off == 0 {
                        Ok(pods)
                    } else {
                        Err(format!("{off} pods not yet at {milli}m"))
                    }
                })
            },
        )
        .await;
    }
    Pass {
        writes,
        sent,
        actuated: began.elapsed(),
    }
}

/// Measures both passes and keeps them in the report.
pub async fn measure(world: &mut World) {
    let mut config = world.cluster.plane.config().await;
    config.cluster_url = world
        .cluster
        .api
        .url()
        .parse()
        .unwrap_or_else(|e| panic!("the apiserver front's URL: {e}"));
    let paced = UPDATER_PACE
        .client(config.clone())
        .unwrap_or_else(|e| panic!("the floor's client: {e}"));
    let unpaced = PaceFlags {
        kube_api_qps: 0.0,
        ..UPDATER_PACE
    }
    .client(config)
    .unwrap_or_else(|e| panic!("the floor's client: {e}"));
    let in_flight = UPDATER_PACE.in_flight();
    let template = crate::kubelet::milli(crate::workloads::TEMPLATE.0);
    let wave = (world.n as f64 * crate::scenario::TOLERANCE) as usize;
    let first = pass(world, &paced, template - 1, in_flight, wave).await;
    let second = pass(world, &unpaced, template - 2, in_flight, wave).await;
    world.report.floor = Floor {
        paced: first,
        unpaced: second,
    };
    say(world.began, &format!(
        "floor: a bare client resized {} pods at {} qps, {} in flight, in waves of {wave} per DaemonSet: sent in {:.1} s, actuated in {:.1} s; unpaced at the same concurrency: sent in {:.1} s, actuated in {:.1} s",
        first.writes,
        UPDATER_PACE.kube_api_qps,
        in_flight,
        first.sent.as_secs_f64(),
        first.actuated.as_secs_f64(),
        second.sent.as_secs_f64(),
        second.actuated.as_secs_f64(),
    ));
}
