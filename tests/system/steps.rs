//! The scenario's steps, each with exact assertions.

use crate::kubelet::nodes::NodeShape;
use crate::kubelet::usage::{self, Recorded};
use crate::ledger::Book;
use crate::scenario::{say, until, World, TOLERANCE};
use crate::workloads::{self, affinity_node, daemonset_of, pod_resources, Targets, NS};
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::time::Duration;

pub fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

pub fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

pub fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The pod's `PodResize*` conditions, as a line says them: a pod off its
/// group with one of them is waiting on the kubelet, without on the updater.
pub fn resize_conditions(pod: &Pod) -> Vec<String> {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| c.type_.starts_with("PodResize"))
        .map(|c| format!("{} {:?} {:?}", c.type_, c.reason, c.message))
        .collect()
}

pub fn labels(shape: &NodeShape) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), shape.name.clone()),
        ("topology.kubernetes.io/zone".to_owned(), shape.zone.clone()),
        (
            "node.kubernetes.io/instance-type".to_owned(),
            shape.instance_type.clone(),
        ),
    ])
}

/// Step 1: the DaemonSet controller creates one pod per DaemonSet and
/// node, the scheduler binds each to the node of its affinity, the
/// kubelet runs it; with no recommendation yet, each keeps its template.
pub async fn created(world: &mut World) {
    let n = world.n;
    let pods = until(
        world,
        "every DaemonSet pod Running",
        Duration::from_secs(120 + n as u64 / 4),
        |w| {
            Box::pin(async move {
                let pods = w.pods(NS).await;
                let balloons = w.pods("kube-system").await;
                let up = pods.iter().filter(|p| running(p)).count();
                let up_balloons = balloons
                    .iter()
                    .filter(|p| running(p) && daemonset_of(p) == "node-balloon")
                    .count();
                if up == 3 * n && up_balloons == n {
                    Ok(pods)
                } else {
                    Err(format!(
                        "{up} of {} workload pods and {up_balloons} of {n} balloons Running",
                        3 * n
                    ))
                }
            })
        },
    )
    .await;
    for pod in &pods {
        assert_eq!(
            affinity_node(pod).as_deref(),
            Some(node_of(pod).as_str()),
            "{}: bound to a node other than its affinity's",
            name(pod)
        );
        let template = (
            crate::kubelet::milli(workloads::TEMPLATE.0),
            crate::kubelet::bytes(workloads::TEMPLATE.1),
        );
        assert_eq!(
            pod_resources(pod),
            [template; 3],
            "{}: not its template's requests",
            name(pod)
        );
    }
    say(world.began, &format!(
        "step 1: {} workload pods and {n} balloons created by the DaemonSet controller, bound by the scheduler to their affinity's node, Running with their template's 10m/16Mi",
        pods.len()
    ));
}

/// Step 2: usage recorded from the model, the recommender started; every
/// scoped pod brought to its group in place, never more than the
/// tolerance of a DaemonSet disrupted at once, each resized exactly once;
/// logger left alone.
pub async fn converge(world: &mut World) {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let dir = record_usage(world, "metrics", 4, now).await;
    crate::deferred::fill(world).await;
    world.ledger.reset();
    world.ledger.measure(true);
    let began = std::time::Instant::now();
    start_recommender(world, &dir, Vec::new());
    let n = world.n;
    let targets = until(
        world,
        "the recommender's groups",
        Duration::from_secs(120 + n as u64 / 10),
        |w| {
            Box::pin(async move {
                let t = Targets::read(&w.admin).await;
                if t.groups("agent") == 3 && t.groups("exporter") == n {
                    Ok(t)
                } else {
                    Err(format!(
                        "{} agent groups, {} exporter groups",
                        t.groups("agent"),
                        t.groups("exporter")
                    ))
                }
            })
        },
    )
    .await;
    let written = std::time::Instant::now();
    say(
        world.began,
        &format!(
            "step 2: groups written in {:.1} s: agent {:?}",
            began.elapsed().as_secs_f64(),
            targets.0.get("agent")
        ),
    );
    let converged = until(
        world,
        "every pod at its group",
        Duration::from_secs(240 + n as u64 / 2),
        |w| {
            Box::pin(async move {
                let targets = Targets::read(&w.admin).await;
                let pods = w.pods(NS).await;
                let mut off = Vec::new();
                for pod in &pods {
                    let ds = daemonset_of(pod);
                    if node_of(pod) == crate::deferred::NODE && ds != "logger" {
                        // Deferred by the kubelet: step 4.
                        continue;
                    }
                    let Some(shape) = w.nodes.get(&node_of(pod)) else {
                        continue;
                    };
                    let want = targets.expected(&ds, &labels(&shape));
                    if pod_resources(pod) != [want; 3] {
                        off.push(format!(
                            "{} on {} {:?} want {:?} {:?}",
                            name(pod),
                            node_of(pod),
                            pod_resources(pod),
                            want,
                            resize_conditions(pod)
                        ));
                    }
                }
                if off.is_empty() {
                    Ok((targets, pods))
                } else {
                    Err(format!(
                        "{} pods off: {}",
                        off.len(),
                        off.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                    ))
                }
            })
        },
    )
    .await;
    let (targets, pods) = converged;
    world.report.converged = Some(world.began.elapsed());
    let book = world.ledger.book();
    let limit = (n as f64 * TOLERANCE) as usize;
    for ds in workloads::SCOPED {
        let max = Book::count(&book.max_disrupted, ds);
        assert!(
            max <= limit,
            "{ds}: {max} pods disrupted at once, above the tolerance {limit}"
        );
        assert_eq!(Book::count(&book.resized, ds), n, "{ds}: resizes");
        assert_eq!(Book::count(&book.deleted, ds), 0, "{ds}: deletions");
    }
    for pod in pods.iter().filter(|p| daemonset_of(p) != "logger") {
        assert_eq!(
            book.resized_pods.get(&name(pod)),
            Some(&1),
            "{}: resized once",
            name(pod)
        );
    }
    assert_eq!(Book::count(&book.resized, "logger"), 0, "logger: resizes");
    // The groups differ, so no one value could have passed for them all.
    let agent = &targets.0["agent"];
    assert!(
        agent["zone-c"] != agent["zone-a"] && agent[""] != agent["zone-a"],
        "{agent:?}"
    );
    let resizes = Book::count(&book.resized, "agent") + Book::count(&book.resized, "exporter");
    let after_groups = written.elapsed().as_secs_f64();
    world.report.step2 = Some((resizes, after_groups));
    say(world.began, &format!(
        "step 2: every pod at its group (but {}'s two, deferred) in {:.1} s, {after_groups:.1} s after the groups ({}); {resizes} resizes in place, most disrupted at once agent {} exporter {} (tolerance {limit}), 0 evictions, logger untouched",
        crate::deferred::NODE,
        began.elapsed().as_secs_f64(),
        world.report.floor.beside(resizes, after_groups),
        Book::count(&book.max_disrupted, "agent"),
        Book::count(&book.max_disrupted, "exporter"),
    ));
    world.ledger.measure(false);
}

/// Records `intervals` minutes of the model's usage of every pod in `NS`
/// now, the first at `start` (seconds since the epoch), into the directory
/// `name`; returns it.
pub async fn record_usage(
    world: &mut World,
    name_of_dir: &str,
    intervals: usize,
    start: i64,
) -> std::path::PathBuf {
    let pods = world.pods(NS).await;
    let dir = world.cluster.plane.dir.join(name_of_dir);
    let shapes: BTreeMap<String, NodeShape> = world
        .nodes
        .all()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    let names: Vec<(String, String, String)> = pods
        .iter()
        .map(|p| (name(p), daemonset_of(p), node_of(p)))
        .collect();
    let recorded: Vec<Recorded<'_>> = names
        .iter()
        .map(|(pod, ds, node)| Recorded {
            namespace: NS,
            name: pod,
            daemonset: ds,
            container: ds,
            node: &shapes[node],
        })
        .collect();
    usage::record(&dir, &recorded, intervals, start);
    world.recorded_until = start + 60 * (intervals as i64 - 1);
    dir
}

/// Starts the recommender on the recordings in `dir`, with `more` flags,
/// stopping the one running first (SIGTERM: it checkpoints, and the new one
/// reads its checkpoints), as a rollout of its Deployment would.
pub fn start_recommender(world: &mut World, dir: &std::path::Path, more: Vec<(&str, String)>) {
    if let Some(at) = world
        .components
        .iter()
        .position(|c| c.name == "nodescope-recommender")
    {
        world.components.remove(at).stop(false);
    }
    let mut overrides = vec![
        ("--metrics", format!("file:{}", dir.display())),
        ("--recommender-interval", "2s".to_owned()),
    ];
    overrides.extend(more);
    let recommender = crate::components::start(
        &world.cluster,
        &world.rendered,
        crate::components::Launch {
            deployment: "nodescope-recommender",
            overrides,
            metrics_flag: "--address",
        },
        "nodescope-recommender",
    );
    world.components.push(recommender);
    world.follow();
}

/// Waits for `node`'s three workload pods (and, with `balloon`, its
/// balloon) to be Running, and returns the workload pods.
pub async fn node_pods(world: &mut World, node: &str, balloon: bool) -> Vec<Pod> {
    let probe = node.to_owned();
    until(
        world,
        &format!("{node}'s pods Running"),
        Duration::from_secs(120),
        move |w| {
            let node = probe.clone();
            Box::pin(async move {
                let pods: Vec<_> = w
                    .pods(NS)
                    .await
                    .into_iter()
                    .filter(|p| node_of(p) == node && running(p))
                    .collect();
                let balloons = w
                    .pods("kube-system")
                    .await
                    .into_iter()
                    .any(|p| node_of(&p) == node && running(&p));
                if pods.len() == 3 && (balloons || !balloon) {
                    Ok(pods)
                } else {
                    Err(format!(
                        "{} of 3 workload pods, balloon {balloons}",
                        pods.len()
                    ))
                }
            })
        },
    )
    .await
}

/// No pod of `pods` was resized or deleted since it was created.
pub fn untouched(book: &Book, pods: &[Pod]) {
    for pod in pods {
        assert_eq!(
            book.resized_pods.get(&name(pod)),
            None,
            "{} resized after creation",
            name(pod)
        );
        assert!(
            !book.deleted_pods.contains(&name(pod)),
            "{} deleted",
            name(pod)
        );
    }
}
