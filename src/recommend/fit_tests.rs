use super::*;
use crate::mutate::pod::PodView;
use crate::mutate::{mutate_pod, MissingNodeRecommendation};
use crate::recommend::status::RecommendationStatus;
use crate::store::Snapshot;
use crate::vpa::Placement;
use serde_json::{json, Value};

const CONTAINERS: [&str; 4] = ["agent", "exporter", "proxy", "logs"];
const ETCD_LIMIT: usize = 1536 * 1024;

fn targets(cpu: &str, memory: &str) -> Targets {
    Targets {
        cpu: Some(cpu.to_owned()),
        memory: Some(memory.to_owned()),
        ..Targets::default()
    }
}

fn container(name: &str, t: Targets) -> ContainerStatus {
    ContainerStatus {
        container_name: name.to_owned(),
        target: t,
        ..ContainerStatus::default()
    }
}

/// The fallback's target of container `c`.
fn wide(c: usize) -> Targets {
    targets(&format!("{}m", 263 + c), &format!("{}", 273_804_165 + c))
}

/// A node-scoped status at `nodes` nodes with four containers: every
/// `distinct`-th node has targets of its own, the others those of the
/// fallback (a fleet of alike nodes).
fn status(nodes: usize, distinct: usize) -> VpaStatus {
    let fallback: Vec<ContainerStatus> = CONTAINERS
        .iter()
        .enumerate()
        .map(|(i, c)| ContainerStatus {
            lower_bound: Some(targets("100m", "104857600")),
            upper_bound: Some(targets("2", "1073741824")),
            uncapped_target: Some(wide(i)),
            ..container(c, wide(i))
        })
        .collect();
    let groups = (0..nodes)
        .map(|n| GroupStatus {
            scope_value: format!("node-{n:05}"),
            container_recommendations: CONTAINERS
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if n % distinct == 0 {
                        let t = targets(
                            &format!("{}m", 120 + (n * 7 + i) % 400),
                            &format!("{}", 150_000_000 + n * 4099 + i),
                        );
                        container(c, t)
                    } else {
                        container(c, wide(i))
                    }
                })
                .collect(),
        })
        .collect();
    VpaStatus {
        conditions: Vec::new(),
        recommendation: RecommendationStatus {
            container_recommendations: fallback,
        },
        recommendation_groups: groups,
        observed_generation: Some(1),
    }
}

#[test]
fn a_status_that_fits_is_left_whole() {
    let mut s = status(100, 5);
    let before = s.clone();
    assert_eq!(fit(&mut s, STATUS_LIMIT), Fit::Whole);
    assert_eq!(s, before);
}

#[test]
fn over_the_limit_only_groups_equal_to_the_fallback_are_left_out() {
    let mut s = status(10, 5);
    let whole = status_bytes(&s);
    let outcome = fit(&mut s, whole - 1);
    let kept: Vec<&str> = s
        .recommendation_groups
        .iter()
        .map(|g| g.scope_value.as_str())
        .collect();
    assert_eq!(kept, ["node-00000", "node-00005"]);
    assert_eq!(
        outcome,
        Fit::Compacted {
            groups: 10,
            omitted: 8,
            bytes: status_bytes(&s)
        }
    );
}

#[test]
fn a_group_missing_a_container_of_the_fallback_is_kept() {
    let mut s = status(10, 5);
    s.recommendation_groups[1].container_recommendations.pop();
    let whole = status_bytes(&s);
    fit(&mut s, whole - 1);
    let kept: Vec<&str> = s
        .recommendation_groups
        .iter()
        .map(|g| g.scope_value.as_str())
        .collect();
    assert_eq!(kept, ["node-00000", "node-00001", "node-00005"]);
}

#[test]
fn a_status_that_does_not_fit_even_compacted_has_no_groups_at_all() {
    let mut s = status(10, 1);
    let whole = status_bytes(&s);
    let outcome = fit(&mut s, whole - 1);
    assert_eq!(
        outcome,
        Fit::TooLarge {
            groups: 10,
            bytes: whole
        }
    );
    assert!(s.recommendation_groups.is_empty());
    assert_eq!(s.recommendation, status(10, 1).recommendation);
}

/// The VPA object as the webhook's store reads it.
fn vpa_object(status: &VpaStatus) -> Value {
    json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "monitoring"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": "node"},
        "status": status.to_value(),
    })
}

fn pod(node: &str) -> Vec<u8> {
    let containers: Vec<Value> = CONTAINERS
        .iter()
        .map(|c| {
            json!({"name": c, "image": "agent", "resources": {
            "requests": {"cpu": "100m", "memory": "100Mi"},
            "limits": {"cpu": "200m", "memory": "200Mi"}}})
        })
        .collect();
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "agent-", "namespace": "monitoring",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                "uid": "0b6a5c1e-0000-4000-8000-000000000001", "controller": true}]},
        "spec": {"containers": containers, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}},
    }))
    .unwrap_or_default()
}

#[test]
fn a_node_scoped_vpa_at_5000_nodes_with_4_containers_fits_and_admits_every_pod_alike() {
    let whole = status(5_000, 8);
    let whole_bytes = status_bytes(&whole);
    assert!(
        whole_bytes > ETCD_LIMIT,
        "{whole_bytes}: not over etcd's limit"
    );
    let mut compacted = whole.clone();
    let outcome = fit(&mut compacted, STATUS_LIMIT);
    let Fit::Compacted { bytes, omitted, .. } = outcome else {
        panic!("not compacted: {outcome:?}");
    };
    assert_eq!(omitted, 4_375);
    assert_eq!(bytes, status_bytes(&compacted));
    assert!(bytes < STATUS_LIMIT / 3, "{bytes} bytes");

    let before = Snapshot::build([vpa_object(&whole)]);
    let after = Snapshot::build([vpa_object(&compacted)]);
    let (Some(before), Some(after)) = (
        before.vpa_for("monitoring", "agent"),
        after.vpa_for("monitoring", "agent"),
    ) else {
        panic!("the store did not take the VPA");
    };
    let fallback_warning = |node: &str| {
        format!(
            "no recommendation for node {node:?} in VerticalPodAutoscaler monitoring/agent; \
             using the VerticalPodAutoscaler-wide recommendation"
        )
    };
    for n in 0..5_000 {
        let node = format!("node-{n:05}");
        let body = pod(&node);
        let pod = PodView::from_json(&body).unwrap_or_else(|e| panic!("{e}"));
        let placement = Placement::on_node(&node);
        let aggregate = MissingNodeRecommendation::Aggregate;
        let a = mutate_pod(&pod, before, placement, &[], aggregate);
        let b = mutate_pod(&pod, after, placement, &[], aggregate);
        assert!(!a.patch.is_empty(), "{node}: no patch");
        assert_eq!(a.patch, b.patch, "{node}");
        assert!(a.warnings.is_empty(), "{node}: {:?}", a.warnings);
        if n % 8 == 0 {
            assert!(b.warnings.is_empty(), "{node}: {:?}", b.warnings);
        } else {
            assert_eq!(b.warnings, [fallback_warning(&node)], "{node}");
        }
    }
}
