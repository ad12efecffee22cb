//! Usage, as the metrics API (metrics-server) reports it: `PodMetrics`,
//! read item by item into [`PodUsage`], the same from a recorded file and
//! from the cluster.

use super::input::{input_error, InputError, Meta};
use crate::quantity::Quantity;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

/// One PodMetrics item: a pod's containers' usage over a window ending at
/// `timestamp` (metrics.k8s.io/v1beta1, what metrics-server serves).
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub namespace: String,
    pub name: String,
    pub timestamp: Timestamp,
    /// (container, CPU millicores, memory working set bytes), each rounded up
    /// as upstream's `MilliValue()`/`Value()` do.
    pub containers: Vec<(String, i64, i64)>,
}

/// A `PodMetricsList` as the API sends it, each item turned into a
/// [`PodUsage`] as soon as it is read (not a `Value` tree, and not a list of
/// parsed items first: a namespace with 500,000 DaemonSet pods sends that
/// many items each interval, BENCHMARKS.md).
#[derive(Deserialize)]
pub struct PodMetricsList {
    #[serde(default, deserialize_with = "usage_items")]
    pub items: Vec<Result<PodUsage, InputError>>,
}

fn usage_items<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Result<PodUsage, InputError>>, D::Error> {
    struct Items;
    impl<'de> serde::de::Visitor<'de> for Items {
        type Value = Vec<Result<PodUsage, InputError>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of PodMetrics")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(doc) = seq.next_element::<PodMetricsDoc>()? {
                out.push(PodUsage::from_doc(doc));
            }
            Ok(out)
        }
    }
    deserializer.deserialize_seq(Items)
}

/// One `PodMetrics` as sent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetricsDoc {
    /// Set on a PodMetrics of its own or in a `List`; items of a
    /// `PodMetricsList` leave it out.
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    timestamp: String,
    #[serde(default)]
    containers: Vec<ContainerMetricsDoc>,
}

#[derive(Deserialize)]
pub struct ContainerMetricsDoc {
    name: String,
    #[serde(default)]
    usage: UsageDoc,
}

/// The two resources recommended; others are skipped unread (a map per
/// container would cost half a KiB each, half a million times).
#[derive(Deserialize, Default)]
struct UsageDoc {
    cpu: Option<String>,
    memory: Option<String>,
}

impl PodMetricsDoc {
    /// `kind`, when the object says it.
    #[must_use]
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

impl PodUsage {
    /// One `PodMetrics` object.
    ///
    /// # Errors
    /// A missing or unreadable `timestamp` or usage quantity.
    pub fn from_value(value: &Value) -> Result<Self, InputError> {
        // Items of a PodMetricsList carry no kind of their own.
        let meta = |field: &str| {
            value
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or("<none>")
                .to_owned()
        };
        let object = format!("PodMetrics/{}/{}", meta("namespace"), meta("name"));
        let doc: PodMetricsDoc = serde_json::from_value(value.clone())
            .map_err(|e| input_error(&object, "PodMetrics", e.to_string()))?;
        Self::from_doc(doc)
    }

    /// One `PodMetrics` as read by [`PodMetricsList`].
    ///
    /// # Errors
    /// A missing or unreadable `timestamp` or usage quantity.
    pub fn from_doc(doc: PodMetricsDoc) -> Result<Self, InputError> {
        let object = || {
            format!(
                "PodMetrics/{}/{}",
                doc.metadata.namespace, doc.metadata.name
            )
        };
        let timestamp = doc
            .timestamp
            .parse::<Timestamp>()
            .map_err(|e| input_error(&object(), "timestamp", e.to_string()))?;
        let mut containers = Vec::with_capacity(doc.containers.len());
        for (i, c) in doc.containers.iter().enumerate() {
            let read = |resource: &str| -> Result<Option<Quantity>, InputError> {
                let text = if resource == "cpu" {
                    &c.usage.cpu
                } else {
                    &c.usage.memory
                };
                text.as_ref()
                    .map(|t| {
                        t.parse::<Quantity>().map_err(|e| {
                            input_error(
                                &object(),
                                &format!("containers[{i}].usage.{resource}"),
                                e.to_string(),
                            )
                        })
                    })
                    .transpose()
            };
            let cpu = read("cpu")?.map_or(-1, |q| q.milli_value());
            let memory = read("memory")?.map_or(-1, |q| q.value());
            containers.push((c.name.clone(), cpu, memory));
        }
        Ok(PodUsage {
            namespace: doc.metadata.namespace,
            name: doc.metadata.name,
            timestamp,
            containers,
        })
    }
}
