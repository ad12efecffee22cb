use super::*;
use crate::recommend::input::{NodeIndex, PodUsage, ScopedVpa};
use crate::vpa::NodeLabels;
use serde_json::json;

fn config() -> ModelConfig {
    ModelConfig {
        history: HistoryConfig::default(),
        peaks: PeakConfig {
            interval_ms: 24 * 3_600_000,
            oom_bump_up_ratio: 1.2,
            oom_min_bump_up_bytes: 104_857_600.0,
        },
        window_length_ms: 8 * 24 * 3_600_000,
        interval_count: 8,
        per_vpa_config: false,
    }
}

fn vpa(scope: &str) -> ScopedVpa {
    ScopedVpa::from_value(&json!({
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "monitoring", "generation": 1},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": scope},
    }))
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("the test VPA is scoped"))
}

fn pod(name: &str, node: &str) -> TrackedPod {
    TrackedPod {
        namespace: "monitoring".into(),
        name: name.into(),
        daemonset: "agent".into(),
        node: Some(node.into()),
        containers: vec![("agent".into(), 256 << 20)],
        oom_kills: Vec::new(),
    }
}

fn nodes() -> NodeIndex {
    let mut nodes = NodeIndex::default();
    for (name, zone) in [("n1", "a"), ("n2", "a"), ("n3", "b")] {
        nodes.insert(&json!({"metadata": {"name": name, "labels": {"zone": zone}}}));
    }
    nodes.insert(&json!({"metadata": {"name": "n4"}}));
    nodes
}

fn at(minute: i64) -> Timestamp {
    Timestamp::from_second(1_795_000_000 + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn usage(name: &str, minute: i64, millicores: i64, bytes: i64) -> PodUsage {
    PodUsage {
        namespace: "monitoring".into(),
        name: name.into(),
        timestamp: at(minute),
        containers: vec![("agent".into(), millicores, bytes)],
    }
}

/// One interval as the cluster loop runs it: the watch has left exactly
/// `pods` in the model, then the usage comes.
fn step(
    h: &mut History,
    config: &ModelConfig,
    vpas: &[ScopedVpa],
    pods: &[TrackedPod],
    nodes: &impl NodeLabels,
    usage: &[PodUsage],
    now: Timestamp,
) -> Ingested {
    let names: std::collections::HashSet<(String, String)> = pods
        .iter()
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .collect();
    h.retain_pods(|ns, n| names.contains(&(ns.to_owned(), n.to_owned())));
    for p in pods {
        h.upsert_pod(p);
    }
    h.observe(config, vpas, nodes, usage, now)
}

fn samples(h: &History, value: &str) -> u64 {
    h.vpas
        .get("monitoring/agent")
        .and_then(|c| c.get("agent"))
        .and_then(|c| c.groups.get(value))
        .map_or(0, AggregateContainerState::total_samples)
}

#[test]
fn samples_go_to_the_group_of_the_nodes_label_value_and_to_the_daemonset() {
    let mut h = History::default();
    let pods = [
        pod("p1", "n1"),
        pod("p2", "n2"),
        pod("p3", "n3"),
        pod("p4", "n4"),
    ];
    let u: Vec<_> = ["p1", "p2", "p3", "p4"]
        .iter()
        .map(|p| usage(p, 0, 100, 100 << 20))
        .collect();
    let stats = step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &pods,
        &nodes(),
        &u,
        at(0),
    );
    assert_eq!(
        stats,
        Ingested {
            samples: 8,
            dropped: 0,
            ooms: 0
        }
    );
    assert_eq!(samples(&h, "a"), 2);
    assert_eq!(samples(&h, "b"), 1);
    assert_eq!(samples(&h, "__absent__"), 1);
    assert_eq!(h.keys(), 3);
    assert_eq!(h.pod_counts().get("monitoring/agent"), Some(&4));
}

#[test]
fn a_node_scope_groups_by_node_name_without_node_labels() {
    let mut h = History::default();
    let pods = [pod("p1", "n1"), pod("p9", "unknown-node")];
    let u = [usage("p1", 0, 100, 1 << 20), usage("p9", 0, 100, 1 << 20)];
    step(
        &mut h,
        &config(),
        &[vpa("node")],
        &pods,
        &NodeIndex::default(),
        &u,
        at(0),
    );
    assert_eq!(samples(&h, "n1"), 1);
    assert_eq!(samples(&h, "unknown-node"), 1);
}

#[test]
fn a_pod_on_a_node_the_store_does_not_know_is_not_tracked_under_a_label_scope() {
    let mut h = History::default();
    let pods = [pod("p9", "unknown-node")];
    let stats = step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &pods,
        &nodes(),
        &[usage("p9", 0, 1, 1)],
        at(0),
    );
    assert_eq!(stats, Ingested::default());
    assert_eq!(h.pods["monitoring/p9"].vpa, None);
    assert!(h.pod_counts().is_empty());
}

#[test]
fn duplicate_and_unknown_container_samples_are_dropped() {
    let mut h = History::default();
    let pods = [pod("p1", "n1")];
    let mut odd = usage("p1", 1, 5, 5);
    odd.containers[0].0 = "istio-init".into();
    let u = [
        usage("p1", 0, 100, 1 << 20),
        usage("p1", 0, 200, 1 << 20),
        odd,
    ];
    let stats = step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &pods,
        &nodes(),
        &u,
        at(1),
    );
    // The second sample of minute 0: CPU out of order (dropped); memory of
    // the same time is taken (upstream only drops older memory samples).
    assert_eq!(
        stats,
        Ingested {
            samples: 3,
            dropped: 3,
            ooms: 0
        }
    );
}

#[test]
fn an_oom_kill_is_recorded_once_however_often_the_pod_is_seen() {
    let mut h = History::default();
    let mut p = pod("p1", "n1");
    p.oom_kills.push(("agent".into(), at(0)));
    for minute in 0..3 {
        let stats = step(
            &mut h,
            &config(),
            &[vpa("zone")],
            &[p.clone()],
            &nodes(),
            &[usage("p1", minute, 10, 100 << 20)],
            at(minute),
        );
        assert_eq!(stats.ooms, u64::from(minute == 0));
    }
    let state = h.pods["monitoring/p1"].containers[0].2;
    // max(256Mi + 100Mi, 1.2 × 256Mi) = 356Mi.
    assert_eq!(state.oom_peak, 356 << 20);
}

#[test]
fn a_pod_that_is_gone_is_forgotten_and_its_empty_group_collected() {
    let mut h = History::default();
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[pod("p1", "n1"), pod("p3", "n3")],
        &nodes(),
        &[usage("p1", 0, 10, 10)],
        at(0),
    );
    assert_eq!(h.pods.len(), 2);
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[pod("p1", "n1")],
        &nodes(),
        &[],
        at(1),
    );
    assert_eq!(h.pods.keys().collect::<Vec<_>>(), vec!["monitoring/p1"]);
    // p3's group "b" never had a sample and no pod feeds it.
    assert!(!h.vpas["monitoring/agent"]["agent"].groups.contains_key("b"));
    assert_eq!(samples(&h, "a"), 1);
}

#[test]
fn history_older_than_the_aggregation_window_is_dropped() {
    let mut h = History::default();
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[pod("p1", "n1")],
        &nodes(),
        &[usage("p1", 0, 10, 10)],
        at(0),
    );
    let eight_days = 8 * 24 * 60;
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[],
        &nodes(),
        &[],
        at(eight_days - 1),
    );
    assert_eq!(samples(&h, "a"), 1);
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[],
        &nodes(),
        &[],
        at(eight_days),
    );
    assert!(h.vpas.is_empty());
}

#[test]
fn a_pod_whose_node_changes_value_starts_its_window_afresh_in_the_new_group() {
    let mut h = History::default();
    let p = pod("p1", "n1");
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        std::slice::from_ref(&p),
        &nodes(),
        &[usage("p1", 0, 10, 10)],
        at(0),
    );
    let mut relabelled = nodes();
    relabelled.insert(&json!({"metadata": {"name": "n1", "labels": {"zone": "b"}}}));
    step(
        &mut h,
        &config(),
        &[vpa("zone")],
        &[p],
        &relabelled,
        &[usage("p1", 1, 10, 10)],
        at(1),
    );
    assert_eq!(samples(&h, "a"), 1);
    assert_eq!(samples(&h, "b"), 1);
    assert_eq!(h.pods["monitoring/p1"].value.as_deref(), Some("b"));
}

#[test]
fn a_vpas_own_oom_bump_up_ratio_changes_only_that_vpas_groups_and_only_under_the_gate() {
    let scoped = |name: &str, policies: serde_json::Value| {
        ScopedVpa::from_value(&json!({
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "monitoring", "generation": 1},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
                     "scope": "zone", "resourcePolicy": {"containerPolicies": policies}},
        }))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{name} is scoped"))
    };
    let vpas = [
        scoped(
            "agent",
            json!([{"containerName": "*", "oomBumpUpRatio": "3"}]),
        ),
        scoped("logger", json!([])),
    ];
    let oomed = |name: &str, daemonset: &str| {
        let mut p = pod(name, "n1");
        p.daemonset = daemonset.into();
        p.oom_kills.push(("agent".into(), at(0)));
        p
    };
    let pods = [oomed("p1", "agent"), oomed("q1", "logger")];
    let run = |gate: bool| {
        let mut config = config();
        config.per_vpa_config = gate;
        let mut h = History::default();
        for minute in 0..3 {
            step(
                &mut h,
                &config,
                &vpas,
                &pods,
                &nodes(),
                &[
                    usage("p1", minute, 10, 100 << 20),
                    usage("q1", minute, 10, 100 << 20),
                ],
                at(minute),
            );
        }
        h
    };
    let (on, off) = (run(true), run(false));
    let peak = |h: &History, pod: &str| h.pods[pod].containers[0].2.oom_peak;
    // max(256Mi + 100Mi, 3 × 256Mi) = 768Mi for agent's pod; logger keeps
    // the flags' max(256Mi + 100Mi, 1.2 × 256Mi) = 356Mi.
    assert_eq!(peak(&on, "monitoring/p1"), 768 << 20);
    assert_eq!(peak(&on, "monitoring/q1"), 356 << 20);
    assert_eq!(peak(&off, "monitoring/p1"), 356 << 20);
    assert_eq!(on.vpas["monitoring/logger"], off.vpas["monitoring/logger"]);
    assert_ne!(on.vpas["monitoring/agent"], off.vpas["monitoring/agent"]);
}

#[test]
fn a_vpas_own_memory_window_decides_when_its_history_expires() {
    let mut agent = vpa("zone");
    agent.per_vpa = vec![(
        "*".into(),
        crate::recommend::per_vpa::PerVpaConfig {
            memory_aggregation_interval_count: Some(1),
            ..Default::default()
        },
    )];
    let mut config = config();
    config.per_vpa_config = true;
    let mut h = History::default();
    let p = pod("p1", "n1");
    step(
        &mut h,
        &config,
        &[agent.clone()],
        std::slice::from_ref(&p),
        &nodes(),
        &[usage("p1", 0, 10, 1 << 20)],
        at(0),
    );
    // One day (1 × 24h) later the group is gone; under the flags' 8 days
    // it would stay.
    step(
        &mut h,
        &config,
        &[agent.clone()],
        std::slice::from_ref(&p),
        &nodes(),
        &[],
        at(24 * 60 - 1),
    );
    assert_eq!(samples(&h, "a"), 1);
    step(&mut h, &config, &[agent], &[p], &nodes(), &[], at(24 * 60));
    assert_eq!(samples(&h, "a"), 0);
}
