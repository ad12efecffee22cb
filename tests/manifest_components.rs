//! The optional components under `manifests/components/` that run a
//! controller: least RBAC, the Deployment, and that the base leaves them out.

mod manifest_support;

use manifest_support::*;

#[test]
fn the_recommender_component_has_least_rbac_two_replicas_and_its_checkpoint_crd() {
    let objects = build(&manifests().join("components/recommender"));
    let role = find(&objects, "ClusterRole", "nodescope-recommender");
    let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        vec![
            (
                s(&["autoscaling.k8s.io"]),
                s(&["verticalpodautoscalers"]),
                s(&["get", "list", "watch"])
            ),
            (
                s(&["autoscaling.k8s.io"]),
                s(&["verticalpodautoscalers/status"]),
                s(&["patch"])
            ),
            (
                s(&[""]),
                s(&["pods", "nodes"]),
                s(&["get", "list", "watch"])
            ),
            (s(&["metrics.k8s.io"]), s(&["pods"]), s(&["get", "list"])),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features"]),
                s(&["get", "list", "watch"])
            ),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features/status"]),
                s(&["patch"])
            ),
            (
                s(&["nodescope.dev"]),
                s(&["recommendationcheckpoints"]),
                s(&["get", "list", "watch", "create", "patch", "delete"])
            ),
            (
                s(&["autoscaling.k8s.io"]),
                s(&["verticalpodautoscalercheckpoints"]),
                s(&["get", "list", "create", "patch"])
            ),
        ]
    );
    let lease = find(&objects, "Role", "nodescope-recommender");
    assert_eq!(strings(&lease["rules"][0]["resources"]), s(&["leases"]));
    assert_eq!(
        strings(&lease["rules"][0]["verbs"]),
        s(&["get", "list", "watch", "create", "patch"])
    );
    let deployment = find(&objects, "Deployment", "nodescope-recommender");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(strings(&container["args"])[0], "recommend");
    // The real command line takes them under upstream's names, and the
    // rest keeps its defaults: upstream's port, nodescope's own Lease.
    use clap::Parser;
    let mut argv = vec!["nodescope".to_owned()];
    argv.extend(strings(&container["args"]));
    match nodescope::cli::Cli::try_parse_from(&argv) {
        Ok(nodescope::cli::Cli {
            command: nodescope::cli::Command::Recommend(args),
        }) => {
            assert_eq!(
                args.running.lease_duration,
                std::time::Duration::from_secs(15)
            );
            assert_eq!(args.running.lease_name, "nodescope-recommender");
            assert_eq!(args.running.address.port(), 8942);
            assert_eq!(
                args.upstream.recommender_interval,
                std::time::Duration::from_secs(60)
            );
        }
        Ok(other) => panic!("not a recommend command: {other:?}"),
        Err(e) => panic!("{argv:?} rejected: {e}"),
    }
    assert_eq!(container["ports"][0]["containerPort"], 8942);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        "nodescope-recommender"
    );
    let crd = find(
        &objects,
        "CustomResourceDefinition",
        "recommendationcheckpoints.nodescope.dev",
    );
    assert_structural(
        "recommendationcheckpoints",
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
    );
    // Not in the base: a cluster with upstream's recommender must not get two.
    let base = build(&manifests().join("base"));
    assert!(base
        .iter()
        .all(|o| o["metadata"]["name"] != "nodescope-recommender"));
}

#[test]
fn the_updater_component_has_least_rbac_two_replicas_probes_and_is_not_in_the_base() {
    use clap::Parser;
    let objects = build(&manifests().join("components/updater"));
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let read = s(&["get", "list", "watch"]);
    let role = find(&objects, "ClusterRole", "nodescope-updater");
    assert_eq!(
        rules(role),
        [
            (s(&[""]), s(&["pods"]), read.clone()),
            (s(&[""]), s(&["pods/resize"]), s(&["patch"])),
            // The unboost's annotations (CPUStartupBoost).
            (s(&[""]), s(&["pods"]), s(&["patch"])),
            (s(&[""]), s(&["pods/eviction"]), s(&["create"])),
            (s(&[""]), s(&["events"]), s(&["create", "patch"])),
            (
                s(&["events.k8s.io"]),
                s(&["events"]),
                s(&["create", "patch"])
            ),
            (
                s(&["autoscaling.k8s.io"]),
                s(&["verticalpodautoscalers"]),
                read.clone()
            ),
            (s(&["apps"]), s(&["daemonsets"]), read.clone()),
            (
                s(&[""]),
                s(&["limitranges", "namespaces", "nodes"]),
                read.clone()
            ),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features"]),
                read.clone()
            ),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features/status"]),
                s(&["patch"])
            ),
        ]
    );
    // Every kind the store the updater shares with `serve --store kube`
    // watches (ConfigMaps aside: they are the policies' params, which the
    // updater does not evaluate) can be listed.
    for kind in nodescope::store::kube::default_kinds(None, &[]) {
        assert!(
            rules(role)
                .iter()
                .any(|(g, r, verbs)| g.contains(&kind.group.to_owned())
                    && r.contains(&kind.plural.to_owned())
                    && verbs.contains(&"watch".to_owned())),
            "{}/{} cannot be watched",
            kind.group,
            kind.plural
        );
    }
    // No wildcard, no delete: pods leave only through the Eviction API.
    for (groups, resources, verbs) in rules(role) {
        for value in groups.iter().chain(&resources).chain(&verbs) {
            assert!(!value.contains('*'), "wildcard {value}");
        }
        assert!(!verbs.contains(&"delete".to_owned()), "{resources:?}");
        assert!(!verbs.contains(&"update".to_owned()), "{resources:?}");
    }
    let leases = find(&objects, "Role", "nodescope-updater");
    assert_eq!(str_at(leases, "/metadata/namespace"), NAMESPACE);
    assert_eq!(
        named_rules(leases),
        [
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&["nodescope-updater"]),
                s(&["get", "list", "watch", "patch"])
            ),
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&[]),
                s(&["create"])
            ),
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&["nodescope-webhook"]),
                s(&["get"])
            ),
        ]
    );
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let binding = find(&objects, kind, "nodescope-updater");
        assert_eq!(binding["roleRef"]["name"], "nodescope-updater", "{kind}");
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "nodescope-updater", "namespace": NAMESPACE}]),
            "{kind}"
        );
    }
    find(&objects, "ServiceAccount", "nodescope-updater");

    let deployment = find(&objects, "Deployment", "nodescope-updater");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "nodescope-updater");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let container = &spec["containers"][0];
    assert_eq!(
        strings(&container["args"]),
        s(&[
            "update",
            "--store=kube",
            "--updater-interval=1m",
            "--address=:8943",
            "--log-format=json"
        ])
    );
    // The real command line takes them, and the rest keeps upstream's
    // updater's defaults; the Leases are the ones the Role names.
    let mut argv = vec!["nodescope".to_owned()];
    argv.extend(strings(&container["args"]));
    match nodescope::cli::Cli::try_parse_from(&argv) {
        Ok(nodescope::cli::Cli {
            command: nodescope::cli::Command::Update(args),
        }) => {
            assert_eq!(args.store, "kube");
            assert!(!args.plan);
            assert_eq!(args.updater_interval, std::time::Duration::from_secs(60));
            assert_eq!(Some(args.address), "0.0.0.0:8943".parse().ok());
            assert_eq!(args.min_replicas, 2);
            assert!(args.use_admission_controller_status);
            assert_eq!(args.lease_name, "nodescope-updater");
            assert_eq!(
                args.admission_controller_status_lease_name,
                "nodescope-webhook"
            );
        }
        Ok(other) => panic!("not an update command: {other:?}"),
        Err(e) => panic!("{argv:?} rejected: {e}"),
    }
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        strings(&container["securityContext"]["capabilities"]["drop"]),
        ["ALL"]
    );
    assert_eq!(str_at(container, "/ports/0/name"), "metrics");
    assert_eq!(container["ports"][0]["containerPort"], 8943);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(str_at(&container[probe], "/httpGet/path"), path);
        assert_eq!(str_at(&container[probe], "/httpGet/port"), "metrics");
    }
    assert_eq!(
        env_from_fields(container),
        [
            ("POD_NAME".to_owned(), "metadata.name".to_owned()),
            ("POD_NAMESPACE".to_owned(), "metadata.namespace".to_owned())
        ]
    );
    let service = find(&objects, "Service", "nodescope-updater");
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(service["spec"]["ports"][0]["port"], 8943);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    // Not in the base: it changes running pods, and a cluster that runs
    // upstream's updater must first keep it away from scoped pods.
    let base = build(&manifests().join("base"));
    assert!(base
        .iter()
        .all(|o| o["metadata"]["name"] != "nodescope-updater"));
}

#[test]
fn the_balloon_component_runs_as_node_resizer_with_least_rbac_two_replicas_probes_and_is_not_in_the_base(
) {
    let objects = build(&manifests().join("components/balloon"));
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let read = s(&["get", "list", "watch"]);
    let role = find(&objects, "ClusterRole", "nodescope-node-resizer");
    assert_eq!(
        rules(role),
        [
            (
                s(&[""]),
                s(&["nodes"]),
                s(&["get", "list", "watch", "patch"])
            ),
            (s(&[""]), s(&["pods"]), read.clone()),
            (s(&[""]), s(&["pods/resize"]), s(&["patch"])),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features"]),
                read.clone()
            ),
            (
                s(&["featureflags.nodescope.dev"]),
                s(&["features/status"]),
                s(&["patch"])
            ),
            (s(&[""]), s(&["events"]), s(&["create", "patch"])),
            (
                s(&["events.k8s.io"]),
                s(&["events"]),
                s(&["create", "patch"])
            ),
        ]
    );
    let leases = find(&objects, "Role", "nodescope-node-resizer");
    assert_eq!(str_at(leases, "/metadata/namespace"), "kube-system");
    assert_eq!(
        named_rules(leases),
        [
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&["nodescope-balloon"]),
                s(&["get", "list", "watch", "patch"])
            ),
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&[]),
                s(&["create"])
            ),
        ]
    );
    // The identity the bundle's balloon-resize policy allows.
    let account = find(&objects, "ServiceAccount", "node-resizer");
    assert_eq!(str_at(account, "/metadata/namespace"), "kube-system");
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let binding = find(&objects, kind, "nodescope-node-resizer");
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "node-resizer", "namespace": "kube-system"}]),
            "{kind}"
        );
    }
    let policy = std::fs::read_to_string(repo().join("policies/balloon-resize.yaml"))
        .expect("policies/balloon-resize.yaml");
    assert!(policy.contains("system:serviceaccount:kube-system:node-resizer"));

    let deployment = find(&objects, "Deployment", "nodescope-balloon");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "node-resizer");
    let container = &spec["containers"][0];
    assert_eq!(
        strings(&container["args"]),
        s(&[
            "balloon",
            "controller",
            "--interval=10s",
            "--metrics-listen=0.0.0.0:8944",
            "--log-format=json"
        ])
    );
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["ports"][0]["containerPort"], 8944);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(str_at(&container[probe], "/httpGet/path"), path);
        assert_eq!(str_at(&container[probe], "/httpGet/port"), "metrics");
    }
    let service = find(&objects, "Service", "nodescope-balloon");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    find(&objects, "DaemonSet", "node-balloon");
    // Not in the base: it changes how much of every node workloads may use.
    let base = build(&manifests().join("base"));
    assert!(base.iter().all(|o| o["kind"] == "PriorityClass"
        || !["nodescope-balloon", "node-resizer", "node-balloon"]
            .contains(&str_at(o, "/metadata/name"))));
}

/// The base and each component that runs a controller, built alone, by
/// the directory's name.
fn builds() -> Vec<(String, Vec<serde_json::Value>)> {
    [
        "base",
        "components/recommender",
        "components/updater",
        "components/balloon",
    ]
    .into_iter()
    .map(|dir| (dir.to_owned(), build(&manifests().join(dir))))
    .collect()
}

#[test]
fn every_deployment_with_more_than_one_replica_has_a_budget_of_one_unavailable_and_prefers_other_nodes(
) {
    let mut replicated = Vec::new();
    for (dir, objects) in builds() {
        for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
            let name = str_at(deployment, "/metadata/name");
            let namespace = str_at(deployment, "/metadata/namespace");
            if deployment["spec"]["replicas"].as_i64().unwrap_or(1) < 2 {
                continue;
            }
            replicated.push(name.to_owned());
            let labels = &deployment["spec"]["template"]["metadata"]["labels"];
            let selector = &deployment["spec"]["selector"]["matchLabels"];
            let budgets: Vec<&serde_json::Value> = objects
                .iter()
                .filter(|o| {
                    o["kind"] == "PodDisruptionBudget"
                        && str_at(o, "/metadata/namespace") == namespace
                        && o["spec"]["selector"]["matchLabels"] == *selector
                })
                .collect();
            assert_eq!(budgets.len(), 1, "{dir}: Deployment {name}: one PDB");
            let budget = &budgets[0]["spec"];
            assert_eq!(budget["maxUnavailable"], 1, "{dir}: PDB of {name}");
            assert!(budget.get("minAvailable").is_none(), "{dir}: {name}");
            // The budget's selector picks exactly this Deployment's pods.
            for (key, value) in selector.as_object().into_iter().flatten() {
                assert_eq!(&labels[key], value, "{dir}: {name}: {key}");
            }
            let anti = &deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
            assert!(
                anti.get("requiredDuringSchedulingIgnoredDuringExecution")
                    .is_none(),
                "{dir}: {name}: preferred, so a 1-node cluster runs both"
            );
            assert_eq!(
                anti["preferredDuringSchedulingIgnoredDuringExecution"],
                serde_json::json!([{"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": selector}}}]),
                "{dir}: {name}"
            );
        }
    }
    replicated.sort();
    assert_eq!(
        replicated,
        [
            "nodescope",
            "nodescope-balloon",
            "nodescope-features",
            "nodescope-recommender",
            "nodescope-updater"
        ]
    );
}

#[test]
fn every_nodescope_container_logs_json_and_its_probes_time_out() {
    let mut seen = 0;
    for (dir, objects) in builds() {
        for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
            let name = str_at(deployment, "/metadata/name");
            let containers = deployment["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten();
            for container in containers {
                seen += 1;
                let args = strings(&container["args"]);
                assert!(
                    args.contains(&"--log-format=json".to_owned()),
                    "{dir}: {name}: {args:?}"
                );
                for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")]
                {
                    let probe_of = &container[probe];
                    assert_eq!(str_at(probe_of, "/httpGet/path"), path, "{dir}: {name}");
                    assert_eq!(
                        str_at(probe_of, "/httpGet/port"),
                        "metrics",
                        "{dir}: {name}"
                    );
                    // Stated, not the kubelet's 1 s default: a pass over a
                    // large cluster can hold a core for a second, and a
                    // probe that times out then restarts a healthy pod.
                    assert_eq!(probe_of["timeoutSeconds"], 2, "{dir}: {name}: {probe}");
                }
            }
        }
    }
    assert_eq!(seen, 5, "one container in each of the five Deployments");
}
