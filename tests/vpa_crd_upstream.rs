//! nodescope's VerticalPodAutoscaler CRD is a strict superset of upstream's.
//!
//! `components/vpa-crd` replaces the CRD object an upstream VPA install
//! created (same name), so anything upstream serves that it lacks breaks an
//! upstream component: a missing field is pruned from every VPA written, a
//! narrowed enum or an extra `required` refuses VPAs upstream accepts, a
//! version no longer served breaks its clients. This walks upstream's
//! schema (tests/fixtures/upstream/vpa-v1-crd.yaml, a verbatim copy) for
//! every version, field by field, and lists every place where nodescope's
//! CRD differs other than by adding: a field, a description, a printer
//! column after upstream's, or a CEL rule that no object without the added
//! field can fail.

use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

const UPSTREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/upstream/vpa-v1-crd.yaml"
);
const OURS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/components/vpa-crd/vpa-crd.yaml"
);
/// Upstream's released checkpoint CRD, and PR #10012's with `scopeValue`.
const UPSTREAM_CHECKPOINT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/upstream/vpa-checkpoint-crd-released.yaml"
);
const PR_CHECKPOINT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/upstream/vpa-checkpoint-crd.yaml"
);
const OURS_CHECKPOINT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/components/vpa-crd/vpa-checkpoint-crd.yaml"
);

/// Schema keywords that decide what a field accepts or how it is stored:
/// nodescope's value must be upstream's wherever upstream has the field,
/// and nodescope may not add one upstream's field lacks.
const SHAPE: &[&str] = &[
    "type",
    "format",
    "enum",
    "required",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "nullable",
    "default",
    "anyOf",
    "allOf",
    "oneOf",
    "not",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-map-type",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
];

/// Keywords the walk handles itself (descriptions are free to differ).
const WALKED: &[&str] = &[
    "description",
    "properties",
    "items",
    "additionalProperties",
    "x-kubernetes-validations",
];

fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Where nodescope's CRD differs from upstream's: `differences` (anything
/// removed, narrowed or changed) and `additions` (what it may add).
#[derive(Debug, Default)]
struct Comparison {
    differences: Vec<String>,
    additions: Vec<String>,
}

impl Comparison {
    fn of(upstream: &Value, ours: &Value) -> Self {
        let mut c = Comparison::default();
        for pointer in [
            "/apiVersion",
            "/kind",
            "/metadata/name",
            "/metadata/annotations/api-approved.kubernetes.io",
            "/spec/group",
            "/spec/names",
            "/spec/scope",
            "/spec/conversion",
        ] {
            c.same(pointer, upstream.pointer(pointer), ours.pointer(pointer));
        }
        let versions = |crd: &Value| {
            crd["spec"]["versions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (theirs, mine) = (versions(upstream), versions(ours));
        let names = |v: &[Value]| json!(v.iter().map(|v| v["name"].clone()).collect::<Vec<_>>());
        c.same("versions", Some(&names(&theirs)), Some(&names(&mine)));
        for version in &theirs {
            let name = version["name"].as_str().unwrap_or_default();
            if let Some(ours) = mine.iter().find(|v| v["name"] == version["name"]) {
                c.version(name, version, ours);
            }
        }
        c
    }

    /// Records a difference unless `upstream` and `ours` are equal.
    fn same(&mut self, path: &str, upstream: Option<&Value>, ours: Option<&Value>) {
        if upstream != ours {
            let show = |v: Option<&Value>| v.map_or("nothing".to_owned(), Value::to_string);
            self.differences.push(format!(
                "{path}: upstream has {}, nodescope {}",
                show(upstream),
                show(ours)
            ));
        }
    }

    fn version(&mut self, name: &str, upstream: &Value, ours: &Value) {
        let keys: BTreeSet<&String> = [upstream, ours]
            .iter()
            .filter_map(|v| v.as_object())
            .flat_map(|m| m.keys())
            .collect();
        // served, storage, deprecated, deprecationWarning, subresources,
        // selectableFields...: exactly upstream's, present or absent.
        for key in keys {
            if !["name", "schema", "additionalPrinterColumns"].contains(&key.as_str()) {
                self.same(&format!("{name}.{key}"), upstream.get(key), ours.get(key));
            }
        }
        let columns = |v: &Value| {
            v["additionalPrinterColumns"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (theirs, mine) = (columns(upstream), columns(ours));
        let kept = mine.get(..theirs.len()).map(<[Value]>::to_vec);
        self.same(
            &format!("{name}.additionalPrinterColumns (upstream's, first)"),
            Some(&json!(theirs)),
            Some(&json!(kept)),
        );
        for extra in mine.iter().skip(theirs.len()) {
            self.additions
                .push(format!("{name}: printer column {}", extra["name"]));
        }
        let schema = |v: &Value| v.pointer("/schema/openAPIV3Schema").cloned();
        match (schema(upstream), schema(ours)) {
            (Some(theirs), Some(mine)) => self.node(&format!("{name}:"), &theirs, &mine),
            (theirs, mine) => self.same(&format!("{name}.schema"), theirs.as_ref(), mine.as_ref()),
        }
    }

    fn node(&mut self, path: &str, upstream: &Value, ours: &Value) {
        let empty = Map::new();
        let theirs = upstream.as_object().unwrap_or(&empty);
        let mine = ours.as_object().unwrap_or(&empty);
        let keys: BTreeSet<&String> = theirs.keys().chain(mine.keys()).collect();
        for key in keys {
            if SHAPE.contains(&key.as_str()) {
                self.same(&child(path, key), theirs.get(key), mine.get(key));
            } else if !WALKED.contains(&key.as_str()) {
                self.differences.push(format!(
                    "{path} keyword {key:?} is unknown to this test: teach it"
                ));
            }
        }
        self.rules(path, upstream, ours);
        let fields = |m: &Map<String, Value>| {
            m.get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let (their_fields, my_fields) = (fields(theirs), fields(mine));
        for (field, schema) in &their_fields {
            match my_fields.get(field) {
                Some(mine) => self.node(&child(path, field), schema, mine),
                None => self
                    .differences
                    .push(format!("{}: missing", child(path, field))),
            }
        }
        for field in my_fields.keys().filter(|f| !their_fields.contains_key(*f)) {
            self.additions.push(child(path, field));
        }
        for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
            match (theirs.get(key), mine.get(key)) {
                (Some(t @ Value::Object(_)), Some(m)) => {
                    self.node(&format!("{path}{suffix}"), t, m)
                }
                (t, m) => self.same(&child(path, key), t, m),
            }
        }
    }

    /// Upstream's CEL rules, each exactly; an added rule only where it
    /// starts `!has(self.<field>) ||` for a field nodescope added there, so
    /// that no object without that field (every upstream object) fails it.
    /// (A textual check; tests/crd_policy_parity.rs evaluates the rules on
    /// VPAs without scope too.)
    fn rules(&mut self, path: &str, upstream: &Value, ours: &Value) {
        let rules = |v: &Value| {
            v["x-kubernetes-validations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (theirs, mine) = (rules(upstream), rules(ours));
        for rule in theirs.iter().filter(|r| !mine.contains(r)) {
            self.differences.push(format!("{path} rule {rule} missing"));
        }
        let added: Vec<&String> = ours["properties"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|f| upstream["properties"].get(f.as_str()).is_none())
            .collect();
        for rule in mine.iter().filter(|r| !theirs.contains(r)) {
            let text = rule["rule"].as_str().unwrap_or_default();
            let guard = added
                .iter()
                .map(|f| format!("!has(self.{f})"))
                .find(|guard| text.starts_with(&format!("{guard} ||")));
            match guard {
                Some(guard) => self
                    .additions
                    .push(format!("{path} rule guarded by {guard}")),
                None => self.differences.push(format!(
                    "{path} added rule {text:?} can fail an upstream object"
                )),
            }
        }
    }
}

/// The path of `field` under `path` (`v1:` is a version's root).
fn child(path: &str, field: &str) -> String {
    if path.ends_with(':') {
        format!("{path} {field}")
    } else {
        format!("{path}.{field}")
    }
}

#[test]
fn the_fixture_is_upstreams_vertical_pod_autoscaler_crd() {
    let upstream = load(UPSTREAM);
    assert_eq!(upstream["kind"], "CustomResourceDefinition");
    assert_eq!(
        upstream["metadata"]["name"],
        "verticalpodautoscalers.autoscaling.k8s.io"
    );
    let versions: Vec<(&Value, &Value, &Value)> = upstream["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| (&v["name"], &v["served"], &v["storage"]))
        .collect();
    assert_eq!(
        versions,
        [
            (&json!("v1"), &json!(true), &json!(true)),
            (&json!("v1beta2"), &json!(false), &json!(false)),
        ]
    );
}

#[test]
fn the_vpa_crd_removes_narrows_and_changes_nothing_upstream_serves() {
    let comparison = Comparison::of(&load(UPSTREAM), &load(OURS));
    assert!(
        comparison.differences.is_empty(),
        "nodescope's VPA CRD differs from upstream's:\n{}",
        comparison.differences.join("\n")
    );
}

#[test]
fn the_vpa_crd_adds_scope_recommendation_groups_their_rules_and_the_scope_column() {
    let comparison = Comparison::of(&load(UPSTREAM), &load(OURS));
    assert_eq!(
        comparison.additions,
        [
            r#"v1: printer column "Scope""#,
            "v1: spec rule guarded by !has(self.scope)",
            "v1: spec rule guarded by !has(self.scope)",
            // Present before this test; not in upstream's CRD either.
            "v1: spec.resourcePolicy.containerPolicies[].targetCPUPercentile",
            "v1: spec.resourcePolicy.containerPolicies[].targetMemoryPercentile",
            "v1: spec.scope",
            "v1: status.recommendationGroups",
        ]
    );
}

#[test]
fn the_checkpoint_crd_is_upstreams_released_one_plus_scope_value_as_pr_10012_defines_it() {
    let released = load(UPSTREAM_CHECKPOINT);
    assert_eq!(
        released["metadata"]["name"],
        "verticalpodautoscalercheckpoints.autoscaling.k8s.io"
    );
    let ours = load(OURS_CHECKPOINT);
    let comparison = Comparison::of(&released, &ours);
    assert!(
        comparison.differences.is_empty(),
        "nodescope's checkpoint CRD differs from upstream's:\n{}",
        comparison.differences.join("\n")
    );
    assert_eq!(comparison.additions, ["v1: spec.scopeValue"]);
    // The field itself is the PR's, description included.
    assert_eq!(ours["spec"], load(PR_CHECKPOINT)["spec"]);
}

#[test]
fn the_walk_reports_a_missing_field_a_narrowed_enum_an_unserved_version_and_a_stricter_rule() {
    let upstream = load(UPSTREAM);
    assert!(Comparison::of(&upstream, &upstream).differences.is_empty());
    let mut ours = upstream.clone();
    let v1 = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
    if let Some(policy) = ours.pointer_mut(&format!("{v1}/updatePolicy/properties")) {
        policy.as_object_mut().map(|p| p.remove("minReplicas"));
        policy["updateMode"]["enum"] = json!(["Off", "Initial"]);
    }
    ours["spec"]["versions"][1]["served"] = json!(true);
    if let Some(target) = ours.pointer_mut(&format!("{v1}/targetRef")) {
        target["x-kubernetes-validations"] = json!([{"rule": "self.kind == 'DaemonSet'"}]);
    }
    assert_eq!(
        Comparison::of(&upstream, &ours).differences,
        [
            "v1: spec.targetRef added rule \"self.kind == 'DaemonSet'\" can fail an upstream object",
            "v1: spec.updatePolicy.minReplicas: missing",
            r#"v1: spec.updatePolicy.updateMode.enum: upstream has ["Off","Initial","Recreate","InPlaceOrRecreate","InPlace","Auto"], nodescope ["Off","Initial"]"#,
            "v1beta2.served: upstream has false, nodescope true",
        ]
    );
}
