//! The patch builder: a structured pod (containers with any mix of present,
//! absent, null and malformed resources), a VPA recommendation with container
//! policies and LimitRanges, through `mutate_pod`.
//!
//! Checks, for every input:
//! - the patch applies to the pod with `json_patch` (paths exist, resource
//!   names with `/` or `~` are escaped);
//! - every quantity the patch writes parses;
//! - the apiserver would accept the result: a container whose limit was not
//!   below its request still has request <= limit;
//! - a second pass over the patched pod produces no patch (reinvocation),
//!   except after LimitRange max capping or int64 saturation (known issues,
//!   recorded as ignored tests in src/mutate/tests.rs).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nodescope::mutate::pod::PodView;
use nodescope::mutate::recommendation::{
    ContainerMode, ContainerPolicy, ContainerRecommendation, ControlledValues, LimitKind,
    LimitRangeItem, RecommendationTable, ResourceList, VpaPolicy,
};
use nodescope::mutate::{mutate_pod, MissingNodeRecommendation};
use nodescope::quantity::{Format, Quantity};
use serde_json::{json, Map, Value};

const NODE: &str = "node-a-1";

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Name {
    App,
    Sidecar,
    Other,
    Odd,
}

impl Name {
    fn as_str(self) -> &'static str {
        match self {
            Name::App => "app",
            Name::Sidecar => "sidecar",
            Name::Other => "other",
            // Characters JSON Pointer must escape.
            Name::Odd => "a/b~c",
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Resource {
    Cpu,
    Memory,
    Gpu,
    Tilde,
}

impl Resource {
    fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Gpu => "example.com/gpu",
            Resource::Tilde => "example.com/a~b",
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Amount {
    Milli(u32),
    Bytes(u64),
    Negative(u16),
    Text(String),
}

impl Amount {
    fn text(&self) -> String {
        match self {
            Amount::Milli(m) => Quantity::from_milli(i64::from(*m), Format::DecimalSI).to_string(),
            Amount::Bytes(b) => Quantity::from_i64((*b >> 1) as i64, Format::BinarySI).to_string(),
            Amount::Negative(m) => format!("-{m}m"),
            Amount::Text(t) => t.clone(),
        }
    }

    /// Recommendations and policies come from the store, which only holds
    /// parsed, non-negative quantities.
    fn quantity(&self) -> Option<Quantity> {
        Quantity::parse(&self.text()).ok().filter(|q| q.sign() >= 0)
    }
}

#[derive(Arbitrary, Debug)]
enum Map3 {
    Absent,
    Null,
    Entries(Vec<(Resource, Amount)>),
}

impl Map3 {
    fn insert_into(&self, key: &str, out: &mut Map<String, Value>) {
        match self {
            Map3::Absent => {}
            Map3::Null => {
                out.insert(key.to_owned(), Value::Null);
            }
            Map3::Entries(entries) => {
                let map = entries
                    .iter()
                    .map(|(r, a)| (r.as_str().to_owned(), Value::String(a.text())))
                    .collect();
                out.insert(key.to_owned(), Value::Object(map));
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Container {
    name: Name,
    /// false: no `resources` key at all.
    has_resources: bool,
    requests: Map3,
    limits: Map3,
}

#[derive(Arbitrary, Debug)]
struct Policy {
    name: Option<Name>,
    off: bool,
    requests_only: bool,
    min: Vec<(Resource, Amount)>,
    max: Vec<(Resource, Amount)>,
    controlled: Option<Vec<Resource>>,
}

#[derive(Arbitrary, Debug)]
struct Range {
    pod: bool,
    min: Vec<(Resource, Amount)>,
    max: Vec<(Resource, Amount)>,
    default: Vec<(Resource, Amount)>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    containers: Vec<Container>,
    annotations: Option<Vec<(u8, String)>>,
    recommendations: Vec<(Name, Vec<(Resource, Amount)>)>,
    policies: Vec<Policy>,
    ranges: Vec<Range>,
    node_known: bool,
    aggregate: bool,
}

fn list(entries: &[(Resource, Amount)]) -> ResourceList {
    entries
        .iter()
        .filter_map(|(r, a)| Some((r.as_str().to_owned(), a.quantity()?)))
        .collect()
}

fn pod_json(input: &Input) -> Value {
    let containers: Vec<Value> = input
        .containers
        .iter()
        .take(4)
        .map(|c| {
            let mut container = Map::new();
            container.insert("name".into(), json!(c.name.as_str()));
            if c.has_resources {
                let mut resources = Map::new();
                c.requests.insert_into("requests", &mut resources);
                c.limits.insert_into("limits", &mut resources);
                container.insert("resources".into(), Value::Object(resources));
            }
            Value::Object(container)
        })
        .collect();
    let mut metadata = json!({"name": "ds-x", "namespace": "monitoring"});
    if let Some(annotations) = &input.annotations {
        let map: Map<String, Value> = annotations
            .iter()
            .take(4)
            .map(|(k, v)| {
                let key = match k % 4 {
                    0 => "vpaUpdates",
                    1 => "vpaObservedContainers",
                    2 => "a/b~c",
                    _ => "keep",
                };
                (key.to_owned(), json!(v))
            })
            .collect();
        metadata["annotations"] = Value::Object(map);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": containers}})
}

fn vpa(input: &Input) -> VpaPolicy {
    let recs: Vec<ContainerRecommendation> = input
        .recommendations
        .iter()
        .take(4)
        .map(|(name, target)| ContainerRecommendation {
            container_name: name.as_str().to_owned(),
            target: list(target),
        })
        .collect();
    let mut vpa = VpaPolicy {
        namespace: "monitoring".into(),
        name: "vpa".into(),
        container_policies: input
            .policies
            .iter()
            .take(3)
            .map(|p| ContainerPolicy {
                mode: if p.off {
                    ContainerMode::Off
                } else {
                    ContainerMode::Auto
                },
                min_allowed: list(&p.min),
                max_allowed: list(&p.max),
                controlled_resources: match &p.controlled {
                    Some(rs) => rs.iter().map(|r| r.as_str().to_owned()).collect(),
                    None => nodescope::mutate::recommendation::default_controlled_resources(),
                },
                controlled_values: if p.requests_only {
                    ControlledValues::RequestsOnly
                } else {
                    ControlledValues::RequestsAndLimits
                },
                ..ContainerPolicy::new(p.name.map_or("*", Name::as_str))
            })
            .collect(),
        ..Default::default()
    };
    let groups = input.node_known.then_some((NODE, recs.as_slice()));
    let aggregate = input.aggregate.then_some(recs.as_slice());
    vpa.recommendations = RecommendationTable::new(groups, aggregate);
    vpa
}

fn ranges(input: &Input) -> Vec<LimitRangeItem> {
    input
        .ranges
        .iter()
        .take(3)
        .map(|r| LimitRangeItem {
            min: list(&r.min),
            max: list(&r.max),
            default: list(&r.default),
            ..LimitRangeItem::new(if r.pod {
                LimitKind::Pod
            } else {
                LimitKind::Container
            })
        })
        .collect()
}

fn mutate(pod: &Value, vpa: &VpaPolicy, ranges: &[LimitRangeItem]) -> Option<json_patch::Patch> {
    let bytes = serde_json::to_vec(pod).expect("serializes");
    let view = PodView::from_json(&bytes).ok()?;
    let m = mutate_pod(
        &view,
        vpa,
        NODE,
        ranges,
        MissingNodeRecommendation::Aggregate,
    );
    Some(json_patch::Patch(m.patch.operations()))
}

/// Every string the patch writes under a `resources` path parses.
fn check_written_quantities(patch: &json_patch::Patch) {
    fn walk(path: &str, value: &Value) {
        match value {
            Value::String(s) => {
                Quantity::parse(s).unwrap_or_else(|e| panic!("patch writes {s:?} at {path}: {e}"));
            }
            Value::Object(map) => map.values().for_each(|v| walk(path, v)),
            other => panic!("patch writes {other} at {path}"),
        }
    }
    for op in &patch.0 {
        if let json_patch::PatchOperation::Add(add) = op {
            let path = add.path.to_string();
            if path.contains("/resources") {
                walk(&path, &add.value);
            }
        }
    }
}

fn parsed(v: &Value) -> Option<Quantity> {
    Quantity::parse(v.as_str()?).ok()
}

/// The apiserver rejects a container whose request exceeds its limit; the
/// mutation must not create that in a container that had both, in order.
fn check_requests_within_limits(before: &Value, after: &Value) {
    let (Some(old), Some(new)) = (
        before["spec"]["containers"].as_array(),
        after["spec"]["containers"].as_array(),
    ) else {
        return;
    };
    for (i, (old, new)) in old.iter().zip(new).enumerate() {
        let Some(limits) = new["resources"]["limits"].as_object() else {
            continue;
        };
        for (resource, limit) in limits {
            let (Some(limit), Some(request)) = (
                parsed(limit),
                parsed(&new["resources"]["requests"][resource]),
            ) else {
                continue;
            };
            let was_valid = match (
                parsed(&old["resources"]["limits"][resource]),
                parsed(&old["resources"]["requests"][resource]),
            ) {
                // Negative values are rejected by the apiserver anyway.
                (Some(l), Some(r)) => r.sign() >= 0 && r <= l,
                // The apiserver defaults a missing request to the limit, and
                // LimitRanger fills a missing limit before webhooks run, so
                // the webhook never sees those pods.
                _ => false,
            };
            if was_valid && request > limit {
                panic!(
                    "container {i} {resource}: request {request} > limit {limit} after the patch\nbefore: {old}\nafter: {new}"
                );
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let pod = pod_json(&input);
    let vpa = vpa(&input);
    let ranges = ranges(&input);
    let Some(patch) = mutate(&pod, &vpa, &ranges) else {
        return;
    };
    check_written_quantities(&patch);
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch)
        .unwrap_or_else(|e| panic!("patch {patch:?} does not apply to {pod}: {e}"));
    check_requests_within_limits(&pod, &patched);
    let again = mutate(&patched, &vpa, &ranges).expect("the patched pod is still readable");
    // Reinvocation sees this VPA's vpaUpdates and must change nothing, in
    // every situation (the rounding cases once skipped here included).
    assert!(
        again.0.is_empty(),
        "second pass patched again: {again:?}\npatched pod: {patched}"
    );
});
