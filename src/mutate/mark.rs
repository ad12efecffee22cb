//! nodescope's own mark on a pod it resized: the container resources as
//! they were before its first pass.
//!
//! Upstream's VPA admission controller also matches DaemonSet pods and,
//! without AEP-10031's gate, applies the DaemonSet-wide recommendation. It
//! writes the same `vpaUpdates` annotation naming the same VPA, so that
//! annotation cannot tell the two passes apart. With the original values
//! recorded, a reinvoked nodescope recomputes exactly what its first pass
//! did, whatever another webhook wrote in between, and a pass over its own
//! output is a no-op.

use super::patch::write_json_str;
use super::pod::{JsonMap, PodView, ResourceTexts, Str};
use serde::Deserialize;

/// The annotation holding the original resources, as compact JSON:
/// `{"<container>":{"requests":{...},"limits":{...}}}`.
pub const ORIGINAL_RESOURCES_ANNOTATION: &str = "nodescope.dev/original-resources";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Resources<'a> {
    #[serde(borrow)]
    requests: Option<ResourceTexts<'a>>,
    #[serde(borrow)]
    limits: Option<ResourceTexts<'a>>,
}

/// The recorded resources, by container name.
#[derive(Debug)]
pub struct Originals<'a>(JsonMap<Str<'a>, Resources<'a>>);

impl<'a> Originals<'a> {
    /// The mark on `pod`: `Ok(None)` when there is none, `Err` with a
    /// reason when the annotation is not the JSON nodescope writes.
    pub fn of(pod: &'a PodView<'_>) -> Result<Option<Self>, String> {
        pod.annotation(ORIGINAL_RESOURCES_ANNOTATION)
            .map(Self::parse)
            .transpose()
    }

    /// Reads the annotation's value.
    ///
    /// # Errors
    /// When it is not the JSON nodescope writes, naming the annotation.
    pub fn parse(text: &'a str) -> Result<Self, String> {
        serde_json::from_str(text)
            .map(Originals)
            .map_err(|e| format!("annotation {ORIGINAL_RESOURCES_ANNOTATION}: {e}"))
    }

    /// The mark made of lists already read, for a controller that keeps
    /// pods read between passes rather than parsing the annotation each
    /// time: (container, requests, limits).
    pub fn from_lists(
        lists: impl IntoIterator<
            Item = (
                &'a str,
                Option<ResourceTexts<'a>>,
                Option<ResourceTexts<'a>>,
            ),
        >,
    ) -> Self {
        Originals(JsonMap(
            lists
                .into_iter()
                .map(|(name, requests, limits)| {
                    (
                        Str(std::borrow::Cow::Borrowed(name)),
                        Resources { requests, limits },
                    )
                })
                .collect(),
        ))
    }

    /// Every recorded container: (name, requests, limits).
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (&str, Option<&ResourceTexts<'a>>, Option<&ResourceTexts<'a>>)> {
        self.0
            .iter()
            .map(|(name, r)| (&**name, r.requests.as_ref(), r.limits.as_ref()))
    }

    /// The original (requests, limits) of `container`, if it was recorded.
    #[must_use]
    pub fn get(
        &self,
        container: &str,
    ) -> Option<(Option<&ResourceTexts<'a>>, Option<&ResourceTexts<'a>>)> {
        self.0
            .get(container)
            .map(|r| (r.requests.as_ref(), r.limits.as_ref()))
    }
}

/// The mark for `pod`: the current resources of the containers at
/// `indices`, as the annotation's value, in the pod's own order.
///
/// Written by hand rather than through `serde_json::Value`: it is on every
/// resized pod's request path, and a tree costs several times the bytes.
#[must_use]
pub fn record(pod: &PodView<'_>, indices: impl Iterator<Item = usize>) -> String {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    for (n, index) in indices.enumerate() {
        let Some(c) = pod.spec.containers.get(index) else {
            continue;
        };
        if n > 0 {
            out.push(b',');
        }
        write_json_str(&mut out, &c.name);
        out.extend_from_slice(b":{");
        let mut first = true;
        for (field, list) in [("requests", c.requests()), ("limits", c.limits())] {
            let Some(list) = list else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            write_json_str(&mut out, field);
            out.extend_from_slice(b":{");
            for (i, (resource, quantity)) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(&mut out, resource);
                out.push(b':');
                write_json_str(&mut out, &quantity.0);
            }
            out.push(b'}');
        }
        out.push(b'}');
    }
    out.push(b'}');
    // Only valid UTF-8 strings and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}
