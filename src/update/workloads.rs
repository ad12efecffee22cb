//! The DaemonSets and pods the updater acts on, indexed once per change.

use crate::pods::{resource_texts, PodError, RunningPod, Texts};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Resource texts of one template container: (requests, limits).
pub type TemplateResources = (Option<Texts>, Option<Texts>);

/// One apps/v1 DaemonSet, reduced to what the updater reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DaemonSetInfo {
    /// `status.desiredNumberScheduled`, when the controller wrote it.
    pub desired_number_scheduled: Option<usize>,
    /// The pod template's containers: name and resources, in order.
    pub template: Vec<(Box<str>, TemplateResources)>,
}

impl DaemonSetInfo {
    /// Reads a DaemonSet object.
    ///
    /// # Errors
    /// Names the DaemonSet and the field that cannot be read.
    pub fn from_value(ds: &Value) -> Result<((String, String), DaemonSetInfo), String> {
        let meta = |k: &str| {
            ds.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
        };
        let (Some(namespace), Some(name)) = (meta("namespace"), meta("name")) else {
            return Err("DaemonSet: metadata.name and metadata.namespace are required".into());
        };
        let fail = |field: &str| format!("DaemonSet {namespace}/{name}: {field}");
        let desired = match ds.pointer("/status/desiredNumberScheduled") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| fail("status.desiredNumberScheduled: expected a count"))?,
            ),
        };
        let mut template = Vec::new();
        for (i, c) in ds
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = c.get("name").and_then(Value::as_str).ok_or_else(|| {
                fail(&format!(
                    "spec.template.spec.containers[{i}].name: expected a string"
                ))
            })?;
            let list = |field: &str| {
                resource_texts(c.pointer(&format!("/resources/{field}")), field)
                    .map_err(|e| fail(&format!("spec.template.spec.containers[{i}].{e}")))
            };
            template.push((name.into(), (list("requests")?, list("limits")?)));
        }
        Ok((
            (namespace.to_owned(), name.to_owned()),
            DaemonSetInfo {
                desired_number_scheduled: desired,
                template,
            },
        ))
    }
}

/// Every DaemonSet and pod the updater knows, by key.
#[derive(Clone, Debug, Default)]
pub struct Workloads {
    /// (namespace, name) -> DaemonSet.
    pub daemonsets: HashMap<(String, String), DaemonSetInfo>,
    /// `namespace/name` -> pod.
    pub pods: HashMap<String, RunningPod>,
}

impl Workloads {
    /// Adds or replaces a pod.
    pub fn put_pod(&mut self, pod: RunningPod) {
        self.pods.insert(pod.key(), pod);
    }

    /// The pods controlled by a DaemonSet, grouped by (namespace,
    /// DaemonSet), each group in name order so a pass is deterministic.
    #[must_use]
    pub fn by_daemonset(&self) -> BTreeMap<(&str, &str), Vec<&RunningPod>> {
        let mut groups: BTreeMap<(&str, &str), Vec<&RunningPod>> = BTreeMap::new();
        for pod in self.pods.values() {
            if let Some(ds) = pod.daemonset.as_deref() {
                groups.entry((&pod.namespace, ds)).or_default().push(pod);
            }
        }
        for pods in groups.values_mut() {
            // Names are unique in a namespace: no need for a stable sort.
            pods.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        }
        groups
    }

    /// Splits `objects` into the Pods and DaemonSets read here and the rest
    /// (for the store snapshot).
    ///
    /// # Errors
    /// Every Pod or DaemonSet that cannot be read, each naming itself.
    pub fn split(objects: Vec<Value>) -> Result<(Workloads, Vec<Value>), Vec<String>> {
        let mut workloads = Workloads::default();
        let mut rest = Vec::new();
        let mut errors = Vec::new();
        for object in objects {
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let api = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match (api, kind) {
                ("v1", "Pod") => match RunningPod::from_value(&object) {
                    Ok(pod) => workloads.put_pod(pod),
                    Err(PodError { object, reason }) => {
                        errors.push(format!("Pod {object}: {reason}"))
                    }
                },
                ("apps/v1", "DaemonSet") => match DaemonSetInfo::from_value(&object) {
                    Ok((key, ds)) => {
                        workloads.daemonsets.insert(key, ds);
                    }
                    Err(e) => errors.push(e),
                },
                _ => rest.push(object),
            }
        }
        if errors.is_empty() {
            Ok((workloads, rest))
        } else {
            Err(errors)
        }
    }
}
