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

mod through_the_status {
    use crate::recommend::aggregate::{AggregateContainerState, HistoryConfig};
    use crate::recommend::input::ScopedVpa;
    use crate::recommend::model::ContainerHistory;
    use crate::recommend::replay::Replay;
    use crate::recommend::status::{vpa_status, StatusConfig};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn at(minute: i64) -> Timestamp {
        Timestamp::from_second(1_795_000_000 + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// Container `agent` on nodes a and b at 100m, and c at 500m: the
    /// DaemonSet-wide 90th percentile is c's.
    fn history() -> BTreeMap<Arc<str>, ContainerHistory> {
        let h = HistoryConfig::default();
        let mut c = ContainerHistory::default();
        for (value, cores) in [("a", 0.1), ("b", 0.1), ("c", 0.5)] {
            let mut s = AggregateContainerState::default();
            for m in 0..60 {
                s.add_cpu_sample(&h, cores, 0.1, at(m));
            }
            s.add_memory_peak(&h, 3e8, at(60));
            c.groups.insert(Arc::from(value), s);
        }
        BTreeMap::from([(Arc::from("agent"), c)])
    }

    fn vpa() -> ScopedVpa {
        ScopedVpa::from_value(&json!({
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "agent", "namespace": "monitoring", "generation": 1},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": "node"},
        }))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("the test VPA is scoped"))
    }

    fn condition(status: &Value) -> Value {
        status["conditions"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == "RecommendationGroupsTooLarge")
            })
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn values(status: &Value) -> Vec<&str> {
        status["recommendationGroups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["scopeValue"].as_str())
            .collect()
    }

    #[test]
    fn the_condition_says_whether_groups_were_left_out_and_is_gone_once_they_fit() {
        let replay = Replay::defaults();
        let (history, vpa) = (history(), vpa());
        let mut config = replay.status.clone();
        let status = |config: &StatusConfig| {
            vpa_status(
                config,
                &replay.model.history,
                &vpa,
                Some(&history),
                3,
                at(61),
            )
        };
        let whole = status(&config);
        assert!(!whole.groups_too_large());
        let whole_value = whole.to_value();
        assert_eq!(values(&whole_value), ["a", "b", "c"]);
        assert_eq!(condition(&whole_value), Value::Null);

        // fit measures the status before its conditions are set.
        let mut bare = whole.clone();
        bare.conditions.clear();
        config.status_limit = super::status_bytes(&bare) - 1;
        let compacted = status(&config).to_value();
        assert_eq!(
            values(&compacted),
            ["a", "b"],
            "c's group equals the fallback"
        );
        let c = condition(&compacted);
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("EqualGroupsOmitted"))
        );
        assert!(
            c["message"].as_str().is_some_and(
                |m| m.starts_with("1 of 3 recommendationGroups equal status.recommendation")
            ),
            "{c}"
        );

        config.status_limit = 100;
        let too_large = status(&config);
        assert!(too_large.groups_too_large());
        let too_large = too_large.to_value();
        assert!(
            too_large.get("recommendationGroups").is_none(),
            "{too_large}"
        );
        assert_eq!(
            too_large["recommendation"], whole_value["recommendation"],
            "the fallback is written as ever"
        );
        let c = condition(&too_large);
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("True"), Some("StatusTooLarge"))
        );

        // Read back from that status, with room again: the condition goes.
        let mut object = json!({
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "agent", "namespace": "monitoring", "generation": 1},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": "node"},
        });
        object["status"] = too_large;
        let read = ScopedVpa::from_value(&object)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("the test VPA is scoped"));
        let again = vpa_status(
            &replay.status,
            &replay.model.history,
            &read,
            Some(&history),
            3,
            at(62),
        )
        .to_value();
        assert_eq!(values(&again), ["a", "b", "c"]);
        assert_eq!(condition(&again), Value::Null);
    }
}
