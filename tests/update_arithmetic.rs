//! One arithmetic: for every pod the updater would resize, what it asks for
//! is exactly what the webhook's patch gives that pod at creation, now.
//! Generated over node-, zone- and `__absent__`-scoped VPAs, limit ratios,
//! LimitRanges, maxAllowed and RequestsOnly; for pods nodescope admitted
//! earlier (with its mark, under an older group) and pods it never saw
//! (created from the template before it ran).
//!
//! Targets include what no recommender should write but the VPA CRD lets
//! through (negative, zero, huge, malformed), in the group and in the
//! VPA-wide fallback: neither the webhook's patch nor the updater's desired
//! resources ever hold a negative or unparsable quantity (issue #30).

use base64::Engine;
use nodescope::admission::{answer, Decider};
use nodescope::cli::update::plan_objects;
use nodescope::metrics::Webhook;
use nodescope::policy::PolicySet;
use nodescope::store::Snapshot;
use nodescope::update::{Action, UpdateConfig};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

const NOW: i64 = 1_795_000_000;

#[derive(Clone, Debug)]
struct Case {
    /// 0: `node`, 1: a zone label the node has, 2: a zone label it lacks.
    scope: u8,
    cpu: u32,
    memory: u32,
    /// Limit = request * ratio, or no limit.
    cpu_ratio: Option<u32>,
    memory_ratio: Option<u32>,
    old_target: (String, String),
    new_target: (String, String),
    fallback: (String, String),
    requests_only: bool,
    max_cpu: Option<u32>,
    limit_range_max_cpu: Option<u32>,
}

/// A target as a recommender (or a hand) may have written it: mostly
/// sensible, sometimes negative, zero, huge or not a quantity at all.
fn target(unit: &'static str, max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (1u32..max).prop_map(move |v| format!("{v}{unit}")),
        1 => Just("0".to_owned()),
        1 => (1u32..max).prop_map(move |v| format!("-{v}{unit}")),
        1 => Just("99999999999999999999999".to_owned()),
        1 => prop_oneof![Just("lots"), Just("1.5.5"), Just(""), Just("-")].prop_map(str::to_owned),
    ]
}

fn targets() -> impl Strategy<Value = (String, String)> {
    (target("m", 8000), target("Mi", 8192))
}

fn case() -> impl Strategy<Value = Case> {
    (
        0u8..4,
        (1u32..4000, 1u32..4096),
        (proptest::option::of(1u32..5), proptest::option::of(1u32..5)),
        (targets(), targets(), targets()),
        any::<bool>(),
        (
            proptest::option::of(100u32..6000),
            proptest::option::of(2u32..12),
        ),
    )
        .prop_map(
            |(
                scope,
                (cpu, memory),
                (cpu_ratio, memory_ratio),
                (old_target, new_target, fallback),
                requests_only,
                (max_cpu, lr),
            )| Case {
                scope,
                cpu,
                memory,
                cpu_ratio,
                memory_ratio,
                old_target,
                new_target,
                fallback,
                requests_only,
                max_cpu,
                limit_range_max_cpu: lr,
            },
        )
}

const NS: &str = "monitoring";
const NODE: &str = "node-p";

/// The scope and the group's value. Scope 3: the node is in zone `zb`,
/// which has no group, so the pod gets the VPA-wide fallback.
fn scope_and_value(c: &Case) -> (&'static str, &'static str) {
    match c.scope {
        0 => ("node", NODE),
        1 | 3 => ("topology.kubernetes.io/zone", "za"),
        _ => ("topology.kubernetes.io/zone", "__absent__"),
    }
}

fn vpa(c: &Case, (cpu, memory): &(String, String)) -> Value {
    let (scope, value) = scope_and_value(c);
    let mut policy = json!({"containerName": "agent"});
    if c.requests_only {
        policy["controlledValues"] = json!("RequestsOnly");
    }
    if let Some(max) = c.max_cpu {
        policy["maxAllowed"] = json!({"cpu": format!("{max}m")});
    }
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": NS, "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"scope": scope, "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"}, "resourcePolicy": {"containerPolicies": [policy]}},
        "status": {"recommendation": {"containerRecommendations": [{"containerName": "agent", "target": {"cpu": c.fallback.0, "memory": c.fallback.1}}]},
            "recommendationGroups": [{"scopeValue": value, "containerRecommendations": [
                {"containerName": "agent", "target": {"cpu": cpu, "memory": memory}}]}]}})
}

fn template_resources(c: &Case) -> Value {
    let mut r =
        json!({"requests": {"cpu": format!("{}m", c.cpu), "memory": format!("{}Mi", c.memory)}});
    if let Some(k) = c.cpu_ratio {
        r["limits"]["cpu"] = json!(format!("{}m", c.cpu * k));
    }
    if let Some(k) = c.memory_ratio {
        r["limits"]["memory"] = json!(format!("{}Mi", c.memory * k));
    }
    r
}

fn cluster(c: &Case, target: &(String, String)) -> Vec<Value> {
    let mut labels = json!({});
    if c.scope == 1 {
        labels["topology.kubernetes.io/zone"] = json!("za");
    }
    if c.scope == 3 {
        labels["topology.kubernetes.io/zone"] = json!("zb");
    }
    let mut objects = vec![
        vpa(c, target),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
            "spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "x", "resources": template_resources(c)}]}}},
            "status": {"desiredNumberScheduled": 1}}),
    ];
    if let Some(max) = c.limit_range_max_cpu {
        objects.push(json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": NS},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": format!("{max}")}}]}}));
    }
    objects
}

/// The pod the DaemonSet controller posts, before admission.
fn created(c: &Case) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-p", "namespace": NS, "uid": "u-p", "resourceVersion": "1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d", "controller": true}]},
        "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}},
            "containers": [{"name": "agent", "image": "x", "resources": template_resources(c)}]}})
}

/// The webhook's answer for `pod` against `objects`, applied.
fn admitted(objects: &[Value], pod: &Value) -> Value {
    let policies = PolicySet::from_documents(Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    let decider = Decider::new(
        Arc::new(Snapshot::build(objects.to_vec())),
        Arc::new(policies),
    );
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "r", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": NS,
            "operation": "CREATE", "userInfo": {"username": "system:serviceaccount:kube-system:daemon-set-controller"},
            "object": pod}});
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let out: Value = serde_json::from_slice(&answer(Webhook::Mutate, &body, &decider).body)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut pod = pod.clone();
    if let Some(patch) = out["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap_or_else(|e| panic!("{e}"));
        let patch: json_patch::Patch =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}"));
        json_patch::patch(&mut pod, &patch).unwrap_or_else(|e| panic!("{e}"));
    }
    pod
}

/// `pod`, bound and running for two days with `actual` as its actuated
/// resources.
fn running(mut pod: Value, actual: &Value) -> Value {
    pod["spec"]["nodeName"] = json!(NODE);
    pod["status"] = json!({"phase": "Running", "startTime": "2026-11-17T00:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "agent", "resources": actual}]});
    pod
}

fn map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

fn owned(q: &nodescope::pods::Texts) -> BTreeMap<String, String> {
    q.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// As the apiserver stores them: each quantity in its canonical form (a
/// template's `3072Mi` is stored as `3Gi`, whoever wrote it).
fn stored(texts: BTreeMap<String, String>) -> BTreeMap<String, String> {
    texts
        .into_iter()
        .map(|(k, v)| {
            let canonical = nodescope::quantity::Quantity::parse(&v)
                .map(|q| {
                    let mut out = String::new();
                    q.write_canonical(&mut out);
                    out
                })
                .unwrap_or(v);
            (k, canonical)
        })
        .collect()
}

/// Every quantity of `resources` (requests and limits) parses and is not
/// negative.
fn applicable(resources: &Value) -> Result<(), String> {
    for field in ["requests", "limits"] {
        for (name, text) in map(&resources[field]) {
            match nodescope::quantity::Quantity::parse(&text) {
                Ok(q) if q.sign() >= 0 => {}
                Ok(_) => return Err(format!("{field}.{name} {text:?} is negative")),
                Err(e) => return Err(format!("{field}.{name} {text:?}: {e}")),
            }
        }
    }
    Ok(())
}

fn check(c: &Case, pod: Value) -> Result<(), TestCaseError> {
    let objects = cluster(c, &c.new_target);
    let want = admitted(&objects, &created(c));
    let admitted_resources = &want["spec"]["containers"][0]["resources"];
    prop_assert_eq!(applicable(admitted_resources), Ok(()), "webhook; {:?}", c);
    let mut all = objects;
    all.push(pod);
    let config = UpdateConfig {
        min_replicas: 1,
        ..UpdateConfig::default()
    };
    let plans = plan_objects(all, &config, true, NOW).map_err(TestCaseError::fail)?;
    let plan = plans.iter().find(|p| &*p.pod == "agent-p");
    prop_assert!(plan.is_some(), "no plan: {plans:?}");
    let Some(plan) = plan else { return Ok(()) };
    if plan.action != Action::Resize {
        // Only a pod already (close to) what a new pod would get is left,
        // or one whose recommendation cannot be applied.
        prop_assert!(
            plan.action == Action::None
                && (plan.message == "at its recommendation"
                    || plan.message.ends_with("below --pod-update-threshold 0.10")
                    || plan.message.contains("container \"agent\": its ")),
            "{:?} {}: {:?}",
            plan.action,
            plan.message,
            c
        );
        return Ok(());
    }
    let desired = plan.containers[0].desired.clone().unwrap_or_default();
    let as_value = |t: &nodescope::pods::Texts| json!(owned(t));
    prop_assert_eq!(
        applicable(
            &json!({"requests": as_value(&desired.requests), "limits": as_value(&desired.limits)})
        ),
        Ok(()),
        "updater; {:?}",
        c
    );
    let resources = &want["spec"]["containers"][0]["resources"];
    prop_assert_eq!(
        stored(owned(&desired.requests)),
        stored(map(&resources["requests"])),
        "requests; {:?}",
        c
    );
    prop_assert_eq!(
        stored(owned(&desired.limits)),
        stored(map(&resources["limits"])),
        "limits; {:?}",
        c
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A pod nodescope admitted under the old group (it has the mark).
    #[test]
    fn a_marked_pod_gets_what_a_new_pod_gets(c in case()) {
        let old = admitted(&cluster(&c, &c.old_target), &created(&c));
        let actual = old["spec"]["containers"][0]["resources"].clone();
        check(&c, running(old, &actual))?;
    }

    /// A pod nodescope never saw: the template's resources, no mark.
    #[test]
    fn an_unmarked_pod_gets_what_a_new_pod_gets(c in case()) {
        let pod = created(&c);
        let actual = template_resources(&c);
        check(&c, running(pod, &actual))?;
    }
}
