//! What kube-apiserver's own validation refuses of a new Pod, among the
//! fields nodescope reads, in the apiserver's words.
//!
//! The apiserver validates a pod after the mutating webhooks and before the
//! validating ones, so an invalid pod never gets past it. nodescope answers
//! the same before it sizes or judges one: a pod without `spec` has nothing
//! to check, and a negative request patched into a "valid-looking" pod
//! would hide the typo the apiserver names. Only `spec.containers` is read
//! (present, and its requests and limits not negative), as in
//! `ValidatePodSpec` and `ValidateContainerResourceRequirements`.

use crate::mutate::pod::PodView;
use crate::policy::{AdmissionRequestInput, Json, Shape};
use crate::quantity::Quantity;

/// The requests and limits of one container, as `(resource, text)`.
#[derive(Debug, Default)]
pub struct Resources<'a> {
    pub requests: Vec<(&'a str, &'a str)>,
    pub limits: Vec<(&'a str, &'a str)>,
}

/// The apiserver's 422 message for a new pod `name` with `containers`
/// (`None`: no `spec.containers` at all), or `None` when it would admit it:
/// `Pod "p" is invalid: spec.containers: Required value`, and for several
/// errors `Pod "p" is invalid: [first, second]`.
#[must_use]
pub fn invalid_pod(name: &str, containers: Option<&[Resources<'_>]>) -> Option<String> {
    let mut errors = Vec::new();
    let containers = containers.unwrap_or_default();
    if containers.is_empty() {
        errors.push("spec.containers: Required value".to_owned());
    }
    for (i, container) in containers.iter().enumerate() {
        for (kind, list) in [
            ("limits", &container.limits),
            ("requests", &container.requests),
        ] {
            let mut list = list.clone();
            list.sort_unstable();
            for (resource, text) in list {
                // A quantity that does not parse never reaches admission:
                // the apiserver cannot decode the pod.
                if let Ok(quantity) = Quantity::parse(text) {
                    if quantity.sign() < 0 {
                        errors.push(format!(
                            "spec.containers[{i}].resources.{kind}[{resource}]: Invalid value: \
                             \"{quantity}\": must be greater than or equal to 0"
                        ));
                    }
                }
            }
        }
    }
    match errors.as_slice() {
        [] => None,
        [one] => Some(format!("Pod \"{name}\" is invalid: {one}")),
        many => Some(format!("Pod \"{name}\" is invalid: [{}]", many.join(", "))),
    }
}

/// [`invalid_pod`] for the pod the mutating webhook read.
#[must_use]
pub fn invalid_pod_view(pod: &PodView<'_>) -> Option<String> {
    let meta = &pod.metadata;
    let name = meta
        .name
        .as_ref()
        .or(meta.generate_name.as_ref())
        .map_or("", |s| s.0.as_ref());
    let containers: Vec<Resources<'_>> = pod
        .spec
        .containers
        .iter()
        .map(|c| Resources {
            requests: texts(c.requests()),
            limits: texts(c.limits()),
        })
        .collect();
    invalid_pod(name, Some(&containers))
}

/// [`invalid_pod`] for a request the validating webhook (or a dry run)
/// reads: only a pod CREATE, which the apiserver validates whole; `None`
/// for anything else.
#[must_use]
pub fn invalid_pod_request(input: &AdmissionRequestInput<'_>) -> Option<String> {
    let is_pod_create = input.operation() == "CREATE"
        && input.group().is_empty()
        && input.resource() == "pods"
        && input.sub_resource().is_empty();
    let object = input.object_json().filter(|_| is_pod_create)?;
    let metadata = object.get("metadata");
    let name = match text(metadata.and_then(|m| m.get("name"))) {
        "" => match text(metadata.and_then(|m| m.get("generateName"))) {
            "" => input.name(),
            generated => generated,
        },
        name => name,
    };
    let containers = object.get("spec").and_then(|s| s.get("containers"));
    let containers = match containers.map(Json::shape) {
        None | Some(Shape::Null) => None,
        Some(Shape::Array(items)) => Some(
            (0..items.len())
                .filter_map(|i| items.get(i))
                .map(|c| {
                    let resources = c.get("resources");
                    Resources {
                        requests: pairs(resources.and_then(|r| r.get("requests"))),
                        limits: pairs(resources.and_then(|r| r.get("limits"))),
                    }
                })
                .collect::<Vec<_>>(),
        ),
        // Not a list: the apiserver could not have decoded it.
        Some(_) => return None,
    };
    invalid_pod(name, containers.as_deref())
}

fn texts<'a>(map: Option<&'a crate::mutate::pod::ResourceTexts<'_>>) -> Vec<(&'a str, &'a str)> {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| (k.0.as_ref(), v.0 .0.as_ref()))
            .collect()
    })
    .unwrap_or_default()
}

fn text(json: Option<Json<'_>>) -> &str {
    json.and_then(Json::as_str).unwrap_or_default()
}

/// The string fields of a JSON object, as `(key, text)`.
fn pairs(json: Option<Json<'_>>) -> Vec<(&str, &str)> {
    match json.map(Json::shape) {
        Some(Shape::Object(fields)) => fields
            .iter()
            .filter_map(|(k, v)| Some((k, v.as_str()?)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_without_containers_or_with_a_negative_quantity_is_refused_in_the_apiservers_words() {
        assert_eq!(
            invalid_pod("p", None).as_deref(),
            Some("Pod \"p\" is invalid: spec.containers: Required value")
        );
        let negative = [Resources {
            requests: vec![("memory", "64Mi"), ("cpu", "-5")],
            limits: vec![("cpu", "-0.5")],
        }];
        assert_eq!(
            invalid_pod("p", Some(&negative)).as_deref(),
            Some(
                "Pod \"p\" is invalid: [spec.containers[0].resources.limits[cpu]: Invalid value: \
                 \"-500m\": must be greater than or equal to 0, \
                 spec.containers[0].resources.requests[cpu]: Invalid value: \"-5\": must be \
                 greater than or equal to 0]"
            )
        );
        let fine = [Resources {
            requests: vec![("cpu", "0"), ("memory", "1Gi")],
            limits: vec![("cpu", "lots")],
        }];
        assert_eq!(invalid_pod("p", Some(&fine)), None);
    }
}
