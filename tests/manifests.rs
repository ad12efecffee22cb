//! The Kubernetes manifests under `manifests/`: every YAML file parses, the
//! kustomize base resolves (with a tiny resolver: resources, components,
//! generators and `$patch: delete` patches), and the objects say what
//! docs/operations.md promises: where the webhooks call, when they fail
//! closed, what RBAC allows, how the pod is locked down. When `kubectl` (with
//! its built-in kustomize) or `kustomize` is on PATH, the overlays are also
//! rendered for real; without it that part prints a note and passes.

mod manifest_support;

use manifest_support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const DAEMONSET_CONDITION: &str = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.kind == 'DaemonSet' && r.apiVersion == 'apps/v1')";
const SECURITY_WEBHOOKS: [&str; 4] = [
    "balloon-pods.nodescope.dev",
    "balloon-priorityclass.nodescope.dev",
    "feature-gates.nodescope.dev",
    "node-resizer.nodescope.dev",
];

#[test]
fn every_yaml_file_under_manifests_parses_into_objects_with_api_version_kind_and_name() {
    let files = yaml_files(&manifests());
    assert!(files.len() > 20, "only {} YAML files found", files.len());
    for file in files {
        let docs = load(&file);
        assert!(!docs.is_empty(), "{}: no documents", file.display());
        for doc in docs {
            let kind = str_at(&doc, "/kind");
            assert!(
                !str_at(&doc, "/apiVersion").is_empty(),
                "{}: no apiVersion",
                file.display()
            );
            assert!(!kind.is_empty(), "{}: no kind", file.display());
            if file.file_name().unwrap() == "kustomization.yaml" {
                assert!(
                    ["Kustomization", "Component"].contains(&kind),
                    "{}",
                    file.display()
                );
            } else {
                assert!(
                    !str_at(&doc, "/metadata/name").is_empty(),
                    "{}: a {kind} without metadata.name",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_root_kustomization_resolves_to_the_whole_base_and_nothing_twice() {
    let objects = base();
    let mut seen = BTreeSet::new();
    for o in &objects {
        let id = (kind_name(o), str_at(o, "/metadata/namespace").to_owned());
        assert!(seen.insert(id.clone()), "{id:?} appears twice");
    }
    for (kind, name) in [
        ("Namespace", NAMESPACE),
        ("ServiceAccount", "nodescope"),
        ("ClusterRole", "nodescope"),
        ("ClusterRoleBinding", "nodescope"),
        ("Role", "nodescope"),
        ("RoleBinding", "nodescope"),
        ("Deployment", "nodescope"),
        ("Service", "nodescope"),
        ("PodDisruptionBudget", "nodescope"),
        ("NetworkPolicy", "nodescope"),
        ("MutatingWebhookConfiguration", "nodescope"),
        ("ValidatingWebhookConfiguration", "nodescope"),
        (
            "CustomResourceDefinition",
            "features.featureflags.nodescope.dev",
        ),
        ("PriorityClass", "node-balloon"),
        ("ConfigMap", "nodescope-balloon-resizers"),
        ("ConfigMap", "nodescope-policies"),
        ("ServiceAccount", "nodescope-features"),
        ("ClusterRole", "nodescope-features"),
        ("ClusterRoleBinding", "nodescope-features"),
        ("Role", "nodescope-features"),
        ("RoleBinding", "nodescope-features"),
        ("Deployment", "nodescope-features"),
        ("PodDisruptionBudget", "nodescope-features"),
    ] {
        find(&objects, kind, name);
    }
    // The native policies are an opt-in component, not part of the base.
    assert!(!objects
        .iter()
        .any(|o| str_at(o, "/kind").starts_with("ValidatingAdmissionPolicy")));
    let pdb = find(&objects, "PodDisruptionBudget", "nodescope");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(pdb["spec"].get("minAvailable").is_none());
    let policy = find(&objects, "NetworkPolicy", "nodescope");
    assert_eq!(strings(&policy["spec"]["policyTypes"]), ["Ingress"]);
    let ports: BTreeSet<i64> = policy["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["ports"].as_array().unwrap().iter())
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ports,
        BTreeSet::from([8443, 9090]),
        "webhook and metrics only"
    );
}

#[test]
fn webhook_configurations_call_only_the_nodescope_service_on_443_at_mutate_and_validate() {
    let objects = base();
    for (kind, path) in [
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ] {
        let config = find(&objects, kind, "nodescope");
        assert!(!webhooks(config).is_empty());
        for hook in webhooks(config) {
            let name = str_at(hook, "/name");
            let service = &hook["clientConfig"]["service"];
            assert_eq!(service["name"], "nodescope", "{name}");
            assert_eq!(service["namespace"], NAMESPACE, "{name}");
            assert_eq!(service["port"], 443, "{name}");
            assert_eq!(service["path"], path, "{name}");
            assert!(hook["clientConfig"].get("url").is_none(), "{name}");
            assert_eq!(hook["sideEffects"], "None", "{name}");
            assert_eq!(strings(&hook["admissionReviewVersions"]), ["v1"], "{name}");
            assert!(name.ends_with(".nodescope.dev"), "{name}");
        }
    }
}

#[test]
fn the_mutating_webhook_only_sees_daemonset_pod_creations_and_never_blocks_them() {
    let objects = base();
    let config = find(&objects, "MutatingWebhookConfiguration", "nodescope");
    let [hook] = webhooks(config).as_slice() else {
        panic!("expected exactly one mutating webhook");
    };
    assert_eq!(hook["name"], "mutate.nodescope.dev");
    assert_eq!(hook["failurePolicy"], "Ignore");
    assert_eq!(hook["timeoutSeconds"], 2);
    assert_eq!(hook["reinvocationPolicy"], "IfNeeded");
    let rules = hook["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(strings(&rules[0]["apiGroups"]), [""]);
    assert_eq!(strings(&rules[0]["operations"]), ["CREATE"]);
    assert_eq!(strings(&rules[0]["resources"]), ["pods"]);
    let conditions = hook["matchConditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| str_at(c, "/expression").trim() == DAEMONSET_CONDITION),
        "the DaemonSet matchCondition is missing or changed"
    );
    let ns = &hook["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(ns["key"], "kubernetes.io/metadata.name");
    assert_eq!(ns["operator"], "NotIn");
    assert_eq!(strings(&ns["values"]), [NAMESPACE]);
    let balloon = &hook["objectSelector"]["matchExpressions"][0];
    assert_eq!(balloon["key"], "node.kubernetes.io/balloon");
    assert_eq!(balloon["operator"], "NotIn");
    assert_eq!(strings(&balloon["values"]), ["true"]);
}

#[test]
fn every_validating_webhook_is_narrowed_by_match_conditions_and_fails_closed_only_for_security_rules(
) {
    let objects = base();
    let config = find(&objects, "ValidatingWebhookConfiguration", "nodescope");
    let mut names = BTreeSet::new();
    for hook in webhooks(config) {
        let name = str_at(hook, "/name");
        names.insert(name.to_owned());
        let conditions = hook["matchConditions"].as_array();
        assert!(
            conditions.is_some_and(|c| !c.is_empty()),
            "{name}: no matchConditions"
        );
        let timeout = hook["timeoutSeconds"].as_i64().unwrap();
        assert!(
            (2..=3).contains(&timeout),
            "{name}: timeoutSeconds {timeout}"
        );
        let expected = if SECURITY_WEBHOOKS.contains(&name) {
            "Fail"
        } else {
            "Ignore"
        };
        assert_eq!(hook["failurePolicy"], expected, "{name}");
        for rule in hook["rules"].as_array().unwrap() {
            let operations = strings(&rule["operations"]);
            for op in &operations {
                assert!(
                    ["CREATE", "UPDATE"].contains(&op.as_str()),
                    "{name}: operation {op}"
                );
            }
            for resource in strings(&rule["resources"]) {
                assert!(
                    !resource.contains('*'),
                    "{name}: wildcard resource {resource}"
                );
                assert!(!resource.ends_with("/status"), "{name}: {resource}");
                if resource == "pods/resize" {
                    assert_eq!(operations, ["UPDATE"], "{name}: a resize is an UPDATE");
                }
            }
            for group in strings(&rule["apiGroups"]) {
                assert_ne!(group, "*", "{name}");
            }
        }
    }
    let expected: BTreeSet<String> = SECURITY_WEBHOOKS
        .iter()
        .chain(["vpa-scope.nodescope.dev"].iter())
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, expected);
    let balloon = webhooks(config)
        .iter()
        .find(|h| h["name"] == "balloon-pods.nodescope.dev")
        .unwrap();
    let resources: Vec<String> = balloon["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| strings(&r["resources"]))
        .collect();
    for r in ["pods", "pods/resize", "daemonsets"] {
        assert!(
            resources.contains(&r.to_owned()),
            "balloon-pods webhook lacks {r}"
        );
    }
    let text = serde_json::to_string(&balloon["matchConditions"]).unwrap();
    for needle in [
        "oldObject",
        "node-balloon",
        "node.kubernetes.io/balloon",
        "resize",
    ] {
        assert!(
            text.contains(needle),
            "balloon-pods matchConditions never mention {needle}"
        );
    }
}

/// The two VPA webhooks split the writes with a non-empty spec.scope (any
/// scope, not only "node") by whether the old object had one; which writes
/// each receives is tests/webhook_match_conditions.rs.
#[test]
fn the_vpa_webhooks_match_any_non_empty_scope_split_by_whether_it_is_new() {
    let objects = base();
    let config = find(&objects, "ValidatingWebhookConfiguration", "nodescope");
    for (name, expected) in [
        (
            "feature-gates.nodescope.dev",
            ["uses-scope", "did-not-use-scope-before"],
        ),
        (
            "vpa-scope.nodescope.dev",
            ["uses-scope", "used-scope-before"],
        ),
    ] {
        let hook = webhooks(config)
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("no webhook {name}"));
        let conditions = hook["matchConditions"].as_array().unwrap();
        let names: Vec<&str> = conditions.iter().map(|c| str_at(c, "/name")).collect();
        assert_eq!(names, expected, "{name}");
        for condition in conditions {
            let expression = str_at(condition, "/expression");
            assert!(!expression.contains("'node'"), "{name}: {expression}");
            assert!(expression.contains("scope != ''") || expression.contains("scope == ''"));
        }
    }
}

#[test]
fn the_webhook_servers_rbac_reads_without_wildcards_and_writes_only_its_status_lease_and_its_feature_reports(
) {
    use clap::Parser;
    let mut roles = Vec::new();
    for file in yaml_files(&manifests()) {
        for doc in load(&file) {
            if ["Role", "ClusterRole"].contains(&str_at(&doc, "/kind"))
                && str_at(&doc, "/metadata/name") == "nodescope"
            {
                roles.push(doc);
            }
        }
    }
    let mut cluster_resources = BTreeSet::new();
    // The one Role that writes: the status Lease in the pods' namespace.
    let (lease_roles, roles): (Vec<Value>, Vec<Value>) = roles
        .into_iter()
        .partition(|r| str_at(r, "/metadata/namespace") == NAMESPACE);
    assert_eq!(lease_roles.len(), 1, "one Role in {NAMESPACE}");
    assert_eq!(
        lease_roles[0]["rules"],
        serde_json::json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["nodescope-webhook"], "verbs": ["get", "patch", "update"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        ])
    );
    let objects = base();
    let binding = find_in(&objects, "RoleBinding", "nodescope", NAMESPACE);
    assert_eq!(binding["roleRef"]["name"], "nodescope");
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "nodescope", "namespace": NAMESPACE}])
    );
    // The Lease the Role names is the one the server renews by default.
    let container = &deployment(&objects)["spec"]["template"]["spec"]["containers"][0];
    let mut argv = vec!["nodescope".to_owned()];
    argv.extend(strings(&container["args"]));
    match nodescope::cli::Cli::try_parse_from(&argv) {
        Ok(nodescope::cli::Cli {
            command: nodescope::cli::Command::Serve(args),
        }) => assert_eq!(args.status_lease_name, "nodescope-webhook"),
        other => panic!("{argv:?}: {other:?}"),
    }
    assert_eq!(
        env_from_fields(container),
        [
            ("POD_NAME".to_owned(), "metadata.name".to_owned()),
            ("POD_NAMESPACE".to_owned(), "metadata.namespace".to_owned())
        ]
    );
    for role in &roles {
        assert!(role.get("aggregationRule").is_none());
        for rule in role["rules"].as_array().unwrap() {
            // The one cluster-wide write: each replica's own report in the
            // status of the two Features it obeys.
            if strings(&rule["resources"]) == ["features/status"] {
                assert_eq!(
                    rule,
                    &serde_json::json!({"apiGroups": ["featureflags.nodescope.dev"],
                        "resources": ["features/status"],
                        "resourceNames": ["vpa-node-scope", "balloon-pods"],
                        "verbs": ["patch"]})
                );
                continue;
            }
            for verb in strings(&rule["verbs"]) {
                assert!(
                    ["get", "list", "watch"].contains(&verb.as_str()),
                    "verb {verb}"
                );
            }
            for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                for value in strings(&rule[field]) {
                    assert!(!value.contains('*'), "wildcard {value} in {field}");
                }
            }
            assert!(rule.get("nonResourceURLs").is_none());
            for resource in strings(&rule["resources"]) {
                if str_at(role, "/kind") == "ClusterRole" {
                    cluster_resources.insert(resource);
                } else {
                    assert_eq!(str_at(role, "/metadata/namespace"), "kube-system");
                    assert_eq!(resource, "configmaps");
                }
            }
        }
    }
    let expected: BTreeSet<String> = [
        "verticalpodautoscalers",
        "features",
        "limitranges",
        "namespaces",
        "nodes",
    ]
    .map(String::from)
    .into();
    assert_eq!(cluster_resources, expected);
}

#[test]
fn every_deployment_container_runs_non_root_read_only_without_capabilities() {
    let objects = base();
    let spec = &deployment(&objects)["spec"]["template"]["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["automountServiceAccountToken"], true,
        "the watch needs the token"
    );
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    let containers = spec["containers"]
        .as_array()
        .into_iter()
        .chain(spec["initContainers"].as_array())
        .flatten();
    for c in containers {
        let name = str_at(c, "/name");
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{name}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{name}");
        assert!(sc["capabilities"].get("add").is_none(), "{name}");
        let seccomp = sc["seccompProfile"]["type"]
            .as_str()
            .or(spec["securityContext"]["seccompProfile"]["type"].as_str());
        assert_eq!(seccomp, Some("RuntimeDefault"), "{name}");
        assert_eq!(c["image"], "ghcr.io/nodescope/nodescope:0.1.0", "{name}");
        let resources = &c["resources"];
        assert_eq!(resources["requests"]["cpu"], "100m", "{name}");
        assert_eq!(resources["requests"]["memory"], "64Mi", "{name}");
        assert_eq!(resources["limits"]["memory"], "128Mi", "{name}");
        assert!(
            resources["limits"].get("cpu").is_none(),
            "{name}: no CPU limit"
        );
    }
    assert_eq!(deployment(&objects)["spec"]["replicas"], 2);
    let anti = &spec["affinity"]["podAntiAffinity"];
    assert!(serde_json::to_string(anti)
        .unwrap()
        .contains("kubernetes.io/hostname"));
}

fn container_port(objects: &[Value], port: &Value) -> i64 {
    if let Some(n) = port.as_i64() {
        return n;
    }
    let name = port.as_str().unwrap();
    let c = &deployment(objects)["spec"]["template"]["spec"]["containers"][0];
    c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_i64())
        .unwrap_or_else(|| panic!("no container port named {name}"))
}

#[test]
fn the_service_maps_443_to_the_containers_8443() {
    let objects = base();
    let service = find(&objects, "Service", "nodescope");
    assert_eq!(str_at(service, "/metadata/namespace"), NAMESPACE);
    let https = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == 443)
        .expect("port 443");
    assert_eq!(container_port(&objects, &https["targetPort"]), 8443);
    let selector = service["spec"]["selector"].as_object().unwrap();
    let labels = deployment(&objects)["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (k, v) in selector {
        assert_eq!(labels.get(k), Some(v), "the Service selects {k}={v}");
    }
    let args = strings(&deployment(&objects)["spec"]["template"]["spec"]["containers"][0]["args"]);
    for arg in [
        "--listen=0.0.0.0:8443",
        "--tls-cert=/etc/nodescope/tls/tls.crt",
        "--tls-key=/etc/nodescope/tls/tls.key",
        "--metrics-listen=0.0.0.0:9090",
        "--store=kube",
        "--policies=/etc/nodescope/policies",
        "--log-format=json",
    ] {
        assert!(args.contains(&arg.to_owned()), "missing {arg}");
    }
    assert_eq!(args[0], "serve");
}

#[test]
fn probes_hit_readyz_and_healthz_on_the_plain_http_metrics_port() {
    let objects = base();
    let c = &deployment(&objects)["spec"]["template"]["spec"]["containers"][0];
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(container_port(&objects, &get["port"]), 9090, "{probe}");
        assert!(get.get("scheme").is_none_or(|s| s == "HTTP"), "{probe}");
    }
}

#[test]
fn the_deployment_mounts_the_tls_secret_and_the_generated_policy_bundle() {
    let objects = base();
    let spec = &deployment(&objects)["spec"]["template"]["spec"];
    let volumes: BTreeMap<String, &Value> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (str_at(v, "/name").to_owned(), v))
        .collect();
    let mounts: BTreeMap<String, &Value> = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (str_at(m, "/mountPath").to_owned(), m))
        .collect();
    let tls = mounts.get("/etc/nodescope/tls").expect("tls mount");
    assert_eq!(
        volumes[str_at(tls, "/name")]["secret"]["secretName"],
        "nodescope-tls"
    );
    let policies = mounts
        .get("/etc/nodescope/policies")
        .expect("policies mount");
    let cm = str_at(volumes[str_at(policies, "/name")], "/configMap/name");
    let generated = find(&objects, "ConfigMap", cm);
    assert_eq!(str_at(generated, "/metadata/namespace"), NAMESPACE);
    for m in mounts.values() {
        assert!(
            m.get("subPath").is_none(),
            "subPath mounts never see updates"
        );
    }
}

#[test]
fn the_policy_mirror_matches_the_repository_bundle_and_is_fully_listed() {
    let mirror = manifests().join("base/policies");
    let mirrored: BTreeSet<String> = yaml_files(&mirror)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .filter(|n| n != "kustomization.yaml")
        .collect();
    assert!(!mirrored.is_empty());
    let source = repo().join("policies");
    if source.is_dir() {
        let originals: BTreeSet<String> = std::fs::read_dir(&source)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
            .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
            .collect();
        assert_eq!(mirrored, originals, "run scripts/sync-policies.sh");
        for name in &originals {
            assert_eq!(
                std::fs::read(source.join(name)).unwrap(),
                std::fs::read(mirror.join(name)).unwrap(),
                "manifests/base/policies/{name} differs from policies/{name}: run scripts/sync-policies.sh"
            );
        }
    } else {
        println!("note: no policies/ directory yet; the mirror is not compared");
    }
    let objects = base();
    let bundle = find(&objects, "ConfigMap", "nodescope-policies");
    let listed: BTreeSet<String> = bundle["data"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        listed, mirrored,
        "the configMapGenerator must list every bundle file"
    );
    // Every file holding a policy is in the native-policies kustomization.
    let native = load_one(&mirror.join("kustomization.yaml"));
    let native: BTreeSet<String> = strings(&native["resources"]).into_iter().collect();
    for name in &mirrored {
        let has_policy = load(&mirror.join(name))
            .iter()
            .any(|d| str_at(d, "/kind").starts_with("ValidatingAdmissionPolicy"));
        assert_eq!(
            native.contains(name),
            has_policy,
            "{name} in base/policies/kustomization.yaml"
        );
    }
    // With the component, the whole bundle is there, nothing twice.
    let mut with_native = objects.clone();
    with_native.extend(build(&manifests().join("components/native-policies")));
    let mut ids = BTreeSet::new();
    for o in &with_native {
        let id = (kind_name(o), str_at(o, "/metadata/namespace").to_owned());
        assert!(ids.insert(id.clone()), "{id:?} twice with native-policies");
    }
    find(
        &with_native,
        "ValidatingAdmissionPolicy",
        "nodescope-balloon-resize",
    );
    find(
        &with_native,
        "ValidatingAdmissionPolicyBinding",
        "nodescope-balloon-resize",
    );
}

#[test]
fn the_self_signed_overlays_ca_bundle_patch_covers_every_webhook_of_both_configurations() {
    let overlay = manifests().join("overlays/self-signed");
    let kustomization = load_one(&overlay.join("kustomization.yaml"));
    let patches: Vec<&str> = kustomization["patches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert!(patches.contains(&"cabundle-patch.yaml"));
    let generator = &kustomization["secretGenerator"][0];
    assert_eq!(generator["name"], "nodescope-tls");
    assert_eq!(generator["namespace"], NAMESPACE);
    assert_eq!(generator["options"]["disableNameSuffixHash"], true);
    let files = strings(&generator["files"]);
    assert!(files.contains(&"tls.crt=certs/tls.crt".to_owned()));
    assert!(files.contains(&"tls.key=certs/tls.key".to_owned()));
    let patch = load(&overlay.join("cabundle-patch.yaml"));
    let objects = base();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let target = find(&patch, kind, "nodescope");
        let patched: BTreeMap<&str, &str> = webhooks(target)
            .iter()
            .map(|h| (str_at(h, "/name"), str_at(h, "/clientConfig/caBundle")))
            .collect();
        for hook in webhooks(find(&objects, kind, "nodescope")) {
            let name = str_at(hook, "/name");
            let bundle = patched
                .get(name)
                .unwrap_or_else(|| panic!("{kind}: {name} not patched"));
            // The placeholder, or the base64 PEM scripts/self-signed.sh put in.
            assert!(
                *bundle == "CA_BUNDLE" || bundle.starts_with("LS0tLS1CRUdJTi"),
                "{name}: caBundle {bundle}"
            );
        }
        assert_eq!(
            patched.len(),
            webhooks(find(&objects, kind, "nodescope")).len()
        );
    }
    let ignore = std::fs::read_to_string(overlay.join(".gitignore")).unwrap();
    assert!(
        ignore.lines().any(|l| l.trim() == "certs/"),
        "certs/ must be gitignored"
    );
}

#[test]
fn the_cert_manager_overlay_issues_nodescope_tls_and_injects_the_ca_into_both_configurations() {
    let overlay = manifests().join("overlays/cert-manager");
    let objects = build(&overlay);
    let cert = find(&objects, "Certificate", "nodescope");
    assert_eq!(cert["spec"]["secretName"], "nodescope-tls");
    assert!(
        strings(&cert["spec"]["dnsNames"]).contains(&"nodescope.nodescope-system.svc".to_owned())
    );
    let issuer = str_at(cert, "/spec/issuerRef/name");
    assert!(find(&objects, "Issuer", issuer)["spec"].get("ca").is_some());
    let patch = load(&overlay.join("inject-ca-patch.yaml"));
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let target = find(&patch, kind, "nodescope");
        assert_eq!(
            target["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "nodescope-system/nodescope"
        );
    }
}

fn vpa_crd() -> Value {
    let objects = build(&manifests().join("components/vpa-crd"));
    find(
        &objects,
        "CustomResourceDefinition",
        "verticalpodautoscalers.autoscaling.k8s.io",
    )
    .clone()
}

#[test]
fn the_vpa_crd_component_adds_scope_and_recommendation_groups_with_their_cel_rules() {
    let crd = vpa_crd();
    assert_eq!(crd["spec"]["group"], "autoscaling.k8s.io");
    let versions = crd["spec"]["versions"].as_array().unwrap();
    let v1 = versions.iter().find(|v| v["name"] == "v1").unwrap();
    assert_eq!(v1["served"], true);
    assert_eq!(v1["storage"], true);
    assert!(v1["subresources"].get("status").is_some());
    for v in versions.iter().filter(|v| v["name"] != "v1") {
        assert_eq!(v["storage"], false);
    }
    let root = &v1["schema"]["openAPIV3Schema"];
    assert_structural("", root);
    let spec = &root["properties"]["spec"];
    assert_eq!(strings(&spec["required"]), ["targetRef"]);
    // No enum: the CEL rule alone answers, in the policy's words, so a
    // wrong scope gets one sentence rather than an enum error beside it.
    assert!(spec["properties"]["scope"].get("enum").is_none());
    let rules: Vec<(&str, &str, bool)> = spec["x-kubernetes-validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                str_at(r, "/message"),
                str_at(r, "/rule"),
                r.get("messageExpression").is_some(),
            )
        })
        .map(|(message, rule, has_expression)| (message, &rule[..16], has_expression))
        .collect();
    assert_eq!(
        rules,
        [
            (
                "spec.scope must be absent, \"\", \"node\" or a node label key such as \"topology.kubernetes.io/zone\" (an optional DNS subdomain prefix of at most 253 characters and \"/\", then a name of at most 63 characters: alphanumerics, \"-\", \"_\" or \".\", starting and ending with an alphanumeric)",
                "!has(self.scope)",
                true
            ),
            (
                "a non-empty spec.scope requires spec.targetRef to be an apps/v1 DaemonSet",
                "!has(self.scope)",
                true
            ),
        ]
    );
    for field in [
        "recommenders",
        "resourcePolicy",
        "startupBoost",
        "targetRef",
        "updatePolicy",
    ] {
        assert!(
            spec["properties"].get(field).is_some(),
            "upstream spec.{field} missing"
        );
    }
    let status = &root["properties"]["status"]["properties"];
    let upstream = &status["recommendation"]["properties"]["containerRecommendations"];
    let groups = &status["recommendationGroups"];
    assert_eq!(groups["type"], "array");
    let group = &groups["items"]["properties"];
    assert_eq!(group["scopeValue"]["type"], "string");
    assert_eq!(
        group["containerRecommendations"]["items"],
        upstream["items"]
    );
    assert_eq!(strings(&upstream["items"]["required"]), ["target"]);
}

#[test]
fn the_balloon_priority_class_and_the_component_daemonset_follow_the_balloon_rules() {
    let objects = base();
    let class = find(&objects, "PriorityClass", "node-balloon");
    assert_eq!(class["value"], 1_000_000_000);
    assert_eq!(class["preemptionPolicy"], "Never");
    // Absent, which is false: written `false`, kubectl would send it again
    // on every apply (the apiserver stores false as absent), an UPDATE the
    // Fail webhook refuses while it is down (issue #42).
    assert_eq!(class.get("globalDefault"), None);
    let ds = load_one(&manifests().join("components/balloon/balloon-daemonset.yaml"));
    assert_eq!(ds["kind"], "DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], "kube-system");
    let template = &ds["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["node.kubernetes.io/balloon"],
        "true"
    );
    let pod = &template["spec"];
    assert_eq!(pod["priorityClassName"], "node-balloon");
    let tolerations = pod["tolerations"].as_array().unwrap();
    assert!(tolerations
        .iter()
        .any(|t| t["operator"] == "Exists" && t.get("key").is_none() && t.get("effect").is_none()));
    for c in pod["containers"].as_array().unwrap() {
        assert_eq!(c["image"], "registry.k8s.io/pause:3.10");
        for r in ["cpu", "memory"] {
            assert!(c["resources"]["requests"].get(r).is_some(), "{r} request");
        }
    }
}

/// `kustomize build` or `kubectl kustomize`, whichever is on PATH with a
/// kustomize v5 (components, multi-document strategic-merge patches); older
/// ones, such as Debian's kubernetes-client 1.20, are skipped.
fn kustomize() -> Option<Vec<&'static str>> {
    let stdout = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if stdout("kustomize", &["version"])
        .is_some_and(|v| v.trim_start_matches(|c| c != 'v').starts_with("v5"))
    {
        Some(vec!["kustomize", "build"])
    } else if stdout("kubectl", &["version", "--client"])
        .is_some_and(|v| v.contains("Kustomize Version: v5"))
    {
        Some(vec!["kubectl", "kustomize"])
    } else {
        None
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "certs" {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn kustomize_renders_the_base_every_overlay_and_the_components_when_it_is_installed() {
    let Some(cmd) = kustomize() else {
        println!("note: no kustomize v5 (kustomize or kubectl) on PATH; skipping the real render");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("manifests");
    copy_tree(&manifests(), &root);
    let certs = root.join("overlays/self-signed/certs");
    std::fs::create_dir_all(&certs).unwrap();
    for f in ["tls.crt", "tls.key"] {
        std::fs::write(certs.join(f), format!("test {f}\n")).unwrap();
    }
    let all = root.join("overlays/all-components");
    std::fs::create_dir_all(&all).unwrap();
    std::fs::write(
        all.join("kustomization.yaml"),
        "resources: [../self-signed]\ncomponents: [../../components/native-policies, ../../components/vpa-crd, ../../components/recommender, ../../components/updater, ../../components/balloon, ../../components/upstream-updater-guard, ../../components/monitoring]\n",
    )
    .unwrap();
    let render = |dir: &Path| -> Vec<Value> {
        let out = Command::new(cmd[0])
            .args(&cmd[1..])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd:?} {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
    };
    let strip_hash = |o: &Value| {
        let (kind, name) = kind_name(o);
        let name = match name.rsplit_once('-') {
            Some((stem, hash)) if kind == "ConfigMap" && hash.len() == 10 => stem.to_owned(),
            _ => name,
        };
        (kind, name)
    };
    let rendered: BTreeSet<_> = render(&root).iter().map(strip_hash).collect();
    let resolved: BTreeSet<_> = base().iter().map(kind_name).collect();
    assert_eq!(
        rendered, resolved,
        "the tiny resolver and kustomize disagree"
    );

    let objects = render(&all);
    let deployment = deployment(&objects);
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let policies = volumes.iter().find(|v| v["name"] == "policies").unwrap();
    let cm = str_at(policies, "/configMap/name");
    assert!(
        cm.starts_with("nodescope-policies-"),
        "hashed name rewritten: {cm}"
    );
    find(&objects, "ConfigMap", cm);
    find(&objects, "Secret", "nodescope-tls");
    find(
        &objects,
        "CustomResourceDefinition",
        "verticalpodautoscalers.autoscaling.k8s.io",
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let config = find(&objects, kind, "nodescope");
        for hook in webhooks(config) {
            assert!(
                !str_at(hook, "/clientConfig/caBundle").is_empty(),
                "{kind}: caBundle"
            );
            assert!(hook["rules"].is_array(), "{kind}: the patch kept the rules");
        }
    }
    find(&objects, "Deployment", "nodescope-updater");
    // All together, each replicated Deployment keeps its own budget and
    // each component its PodMonitor.
    for (name, namespace) in [
        ("nodescope", NAMESPACE),
        ("nodescope-features", NAMESPACE),
        ("nodescope-recommender", NAMESPACE),
        ("nodescope-updater", NAMESPACE),
        ("nodescope-balloon", "kube-system"),
    ] {
        let budget = find_in(&objects, "PodDisruptionBudget", name, namespace);
        assert_eq!(budget["spec"]["maxUnavailable"], 1, "{name}");
        let selected = &find_in(&objects, "Deployment", name, namespace)["spec"]["selector"];
        assert_eq!(budget["spec"]["selector"], *selected, "{name}");
    }
    for name in [
        "nodescope-webhook",
        "nodescope-recommender",
        "nodescope-features",
        "nodescope-updater",
        "nodescope-balloon",
    ] {
        find_in(&objects, "PodMonitor", name, NAMESPACE);
    }
    find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "nodescope-upstream-updater-guard",
    );
    find(&objects, "ConfigMap", "nodescope-upstream-updater-guard");
    let ca_injected = render(&root.join("overlays/cert-manager"));
    find(&ca_injected, "Certificate", "nodescope");
}

/// The kubelet writes a ConfigMap volume atomically: the files live in a
/// hidden timestamped directory, `..data` links to it, and each key is a
/// symlink through `..data`. The server must load such a directory as the
/// bundle once, not three times.
#[cfg(unix)]
#[test]
fn the_policy_bundle_loads_once_from_a_configmap_volume_layout() {
    use std::os::unix::fs::symlink;
    let mirror = manifests().join("base/policies");
    let tmp = tempfile::tempdir().unwrap();
    let volume = tmp.path();
    let stamped = volume.join("..2026_01_01_00_00_00.000000001");
    std::fs::create_dir(&stamped).unwrap();
    let objects = base();
    let bundle = find(&objects, "ConfigMap", "nodescope-policies");
    for key in bundle["data"].as_object().unwrap().keys() {
        std::fs::copy(mirror.join(key), stamped.join(key)).unwrap();
        symlink(Path::new("..data").join(key), volume.join(key)).unwrap();
    }
    symlink(stamped.file_name().unwrap(), volume.join("..data")).unwrap();
    let flat = nodescope::policy::PolicySet::load_dir(&mirror);
    assert!(flat.is_ok(), "the mirror itself loads: {:?}", flat.err());
    let mounted = nodescope::policy::PolicySet::load_dir(volume);
    assert!(
        mounted.is_ok(),
        "the mounted bundle does not load: {:?}",
        mounted.err()
    );
}

#[test]
fn the_deployment_args_are_accepted_by_the_real_command_line() {
    use clap::Parser;
    let objects = base();
    let container = &deployment(&objects)["spec"]["template"]["spec"]["containers"][0];
    let mut argv = vec!["nodescope".to_owned()];
    argv.extend(strings(&container["args"]));
    match nodescope::cli::Cli::try_parse_from(&argv) {
        Ok(nodescope::cli::Cli {
            command: nodescope::cli::Command::Serve(args),
        }) => {
            assert_eq!(args.store, nodescope::store::StoreSource::Kube);
            assert_eq!(
                args.policies,
                Some(PathBuf::from("/etc/nodescope/policies"))
            );
            assert!(args.metrics_listen.is_some());
        }
        Ok(other) => panic!("not a serve command: {other:?}"),
        Err(e) => panic!("{argv:?} rejected: {e}"),
    }
}

#[test]
fn the_base_names_the_server_image_once_so_an_overlay_can_replace_it() {
    let kustomization = load_one(&manifests().join("base/kustomization.yaml"));
    let images = kustomization["images"].as_array().expect("images:");
    assert_eq!(images.len(), 1);
    let objects = base();
    let containers = &deployment(&objects)["spec"]["template"]["spec"]["containers"];
    let image = str_at(containers, "/0/image");
    let (name, tag) = image.rsplit_once(':').expect("a tagged image");
    // kustomize's images transformer matches on the name alone.
    assert_eq!(str_at(&images[0], "/name"), name);
    assert_eq!(str_at(&images[0], "/newTag"), tag);
}

#[test]
fn the_features_controller_reads_what_the_gates_match_and_writes_only_features_their_declared_cleanup_events_and_its_lease(
) {
    let objects = base();
    let v = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let read = v(&["get", "list", "watch"]);
    let cluster = find(&objects, "ClusterRole", "nodescope-features");
    assert_eq!(
        rules(cluster),
        [
            (
                v(&["admissionregistration.k8s.io"]),
                v(&[
                    "validatingadmissionpolicies",
                    "validatingadmissionpolicybindings"
                ]),
                read.clone()
            ),
            (
                v(&["featureflags.nodescope.dev"]),
                v(&["features"]),
                read.clone()
            ),
            // Only the Features nodescope owns, when absent (--announce).
            (
                v(&["featureflags.nodescope.dev"]),
                v(&["features"]),
                v(&["create"])
            ),
            (
                v(&["featureflags.nodescope.dev"]),
                v(&["features/status"]),
                v(&["patch"])
            ),
            (v(&[""]), v(&["namespaces"]), read.clone()),
            (
                v(&["autoscaling.k8s.io"]),
                v(&["verticalpodautoscalers"]),
                read.clone()
            ),
            // vpa-node-scope's spec.cleanup, while it is TurningOff.
            (
                v(&["autoscaling.k8s.io"]),
                v(&["verticalpodautoscalers", "verticalpodautoscalers/status"]),
                v(&["patch"])
            ),
            (v(&[""]), v(&["pods"]), read.clone()),
            (v(&["apps"]), v(&["daemonsets"]), read.clone()),
            (
                v(&["events.k8s.io"]),
                v(&["events"]),
                v(&["create", "patch"])
            ),
        ]
    );
    let lease = find(&objects, "Role", "nodescope-features");
    assert_eq!(str_at(lease, "/metadata/namespace"), NAMESPACE);
    assert_eq!(
        rules(lease),
        [(
            v(&["coordination.k8s.io"]),
            v(&["leases"]),
            v(&["get", "list", "watch", "create", "patch"])
        )]
    );
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let binding = find(&objects, kind, "nodescope-features");
        assert_eq!(binding["roleRef"]["name"], "nodescope-features", "{kind}");
        assert_eq!(
            binding["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "nodescope-features", "namespace": NAMESPACE}]),
            "{kind}"
        );
    }
    // Every resource a shipped gating policy matches can be listed.
    let bundle = load(&repo().join("policies/feature-gates.yaml"));
    for policy in bundle
        .iter()
        .filter(|d| str_at(d, "/kind") == "ValidatingAdmissionPolicy")
    {
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
            .as_array()
            .unwrap()
        {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    assert!(
                        rules(cluster).iter().any(|(g, r, verbs)| g.contains(&group)
                            && r.contains(&resource)
                            && verbs.contains(&"list".to_owned())),
                        "{}: {group}/{resource} cannot be listed",
                        str_at(policy, "/metadata/name")
                    );
                }
            }
        }
    }
}

#[test]
fn the_features_controller_deployment_runs_two_replicas_of_an_accepted_command_line() {
    use clap::Parser;
    let objects = base();
    let deployment = find(&objects, "Deployment", "nodescope-features");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "nodescope-features");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let container = &spec["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        strings(&container["securityContext"]["capabilities"]["drop"]),
        ["ALL"]
    );
    let mut argv = vec!["nodescope".to_owned()];
    argv.extend(strings(&container["args"]));
    match nodescope::cli::Cli::try_parse_from(&argv) {
        Ok(nodescope::cli::Cli {
            command: nodescope::cli::Command::Features(args),
        }) => match args.command {
            Some(nodescope::cli::features::FeaturesCommand::Controller(c)) => {
                assert_eq!(c.settle, std::time::Duration::from_secs(30));
                assert_eq!(c.lease_duration, std::time::Duration::from_secs(15));
            }
            other => panic!("not the controller: {other:?}"),
        },
        Ok(other) => panic!("not a features command: {other:?}"),
        Err(e) => panic!("{argv:?} rejected: {e}"),
    }
}
