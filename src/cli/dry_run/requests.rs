//! Turning documents into the requests the apiserver would send: reviews
//! replayed as they are, manifests defaulted and wrapped in a review, a
//! DaemonSet followed by its pods on `--nodes`.

use super::{expand, Engine, Request, RunError};
use crate::apiserver::review::{self, User};
use crate::input::{check_object, is_review, InputError, SourceDocument};
use crate::json::str_at;
use serde_json::Value;

/// What the requests are made of, besides the objects.
#[derive(Debug, Clone)]
pub struct RequestOptions<'a> {
    pub operation: &'a str,
    /// For UPDATE: the subresource (`resize`, `status`), if any.
    pub sub_resource: Option<&'a str>,
    pub user: &'a User,
    pub nodes: &'a [String],
    /// Keep each request's objects as the client sends them
    /// ([`Request::written`]), for callers that send the requests to a real
    /// apiserver; off for `dry-run`, which has no use for the copies.
    pub keep_written: bool,
}

/// A request's objects as written: what a client sends to the apiserver,
/// which then defaults them itself. The engine evaluates the defaulted
/// ones, so sending these reproduces the request it evaluated.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The object of a CREATE or UPDATE.
    pub object: Option<Value>,
    /// The object stored before an UPDATE or DELETE, as it was created (for
    /// a subresource write without `--old`, the object itself).
    pub old_object: Option<Value>,
}

/// Turns documents from `-f` into requests: reviews are replayed as they
/// are; manifests are defaulted and wrapped in a review, DaemonSets are
/// followed by their per-node pods. `old` are the previous versions for
/// UPDATE, as written, matched by kind, namespace and name; each is
/// defaulted as the apiserver did when it was created. Uids go on from
/// `uid`, which is left at the last one given, so that documents can be
/// turned into requests in batches.
///
/// # Errors
/// A document that is not an object, an object of a kind no apiserver
/// would serve, or an UPDATE without its old object.
pub fn requests(
    engine: &Engine,
    documents: Vec<SourceDocument>,
    old: &[Value],
    options: &RequestOptions<'_>,
    uid: &mut usize,
) -> Result<Vec<Request>, RunError> {
    let mut out = Vec::with_capacity(documents.len());
    let mut next_uid = || {
        *uid += 1;
        format!("nodescope-dry-run-{uid}")
    };
    for document in documents {
        if is_review(&document.value) {
            let request = document.value.get("request").unwrap_or(&Value::Null);
            let subject = [request.get("object"), request.get("oldObject")]
                .into_iter()
                .flatten()
                .find(|v| v.is_object());
            let label = review_label(request, subject);
            out.push(Request {
                label,
                location: Some(document.location),
                node: None,
                review: document.value,
                written: None,
            });
            continue;
        }
        check_object(&document)?;
        let served = engine
            .kinds()
            .lookup(
                str_at(&document.value, "/apiVersion"),
                str_at(&document.value, "/kind"),
            )
            .map_err(|why| InputError::document(&document.location, why))?
            .clone();
        let mut object = document.value;
        let written = options.keep_written.then(|| object.clone());
        engine.default(&mut object, options.operation);
        let label = crate::manifest::object_ref(&object);
        let pods: Vec<(String, Value)> = if options.operation == "CREATE" {
            options
                .nodes
                .iter()
                .map_while(|node| expand::daemonset_pod(&object, node).map(|p| (node.clone(), p)))
                .collect()
        } else {
            Vec::new()
        };
        let mut sent = Written {
            object: written,
            old_object: None,
        };
        let review = match options.operation {
            "DELETE" => {
                sent.old_object = sent.object.take();
                review::build(
                    &next_uid(),
                    "DELETE",
                    None,
                    Some(object),
                    options.user,
                    &served,
                )
            }
            "UPDATE" => {
                let previous = old.iter().find(|o| same_object(o, &object)).cloned();
                let previous = match (previous, options.sub_resource) {
                    (Some(mut previous), _) => {
                        if options.keep_written {
                            sent.old_object = Some(previous.clone());
                        }
                        engine.default(&mut previous, "CREATE");
                        previous
                    }
                    // A subresource write carries the whole object on both sides.
                    (None, Some(_)) => {
                        sent.old_object.clone_from(&sent.object);
                        object.clone()
                    }
                    (None, None) => {
                        return Err(InputError::document(
                            &document.location,
                            format!("--operation UPDATE: no old version of {label} in --old"),
                        )
                        .into())
                    }
                };
                let mut review = review::build(
                    &next_uid(),
                    "UPDATE",
                    Some(object),
                    Some(previous),
                    options.user,
                    &served,
                );
                if let Some(sub) = options.sub_resource {
                    review["request"]["subResource"] = Value::from(sub);
                    review["request"]["requestSubResource"] = Value::from(sub);
                }
                review
            }
            op => review::build(&next_uid(), op, Some(object), None, options.user, &served),
        };
        out.push(Request {
            label,
            location: Some(document.location.clone()),
            node: None,
            review,
            written: options.keep_written.then_some(sent),
        });
        let pod_kind = engine
            .kinds()
            .lookup("v1", "Pod")
            .map_err(RunError::Internal)?;
        for (node, mut pod) in pods {
            let written = options.keep_written.then(|| Written {
                object: Some(pod.clone()),
                old_object: None,
            });
            engine.default(&mut pod, "CREATE");
            let label = format!(
                "Pod/{}/{}[{node}]",
                str_at(&pod, "/metadata/namespace"),
                str_at(&pod, "/metadata/generateName")
            );
            let review = review::build(
                &next_uid(),
                "CREATE",
                Some(pod),
                None,
                &User::daemonset_controller(),
                pod_kind,
            );
            out.push(Request {
                label,
                location: Some(document.location.clone()),
                node: Some(node),
                review,
                written,
            });
        }
    }
    Ok(out)
}

fn same_object(a: &Value, b: &Value) -> bool {
    ["/kind", "/metadata/namespace", "/metadata/name"]
        .iter()
        .all(|p| str_at(a, p) == str_at(b, p))
}

fn review_label(request: &Value, subject: Option<&Value>) -> String {
    let kind = str_at(request, "/kind/kind");
    let name = match str_at(request, "/name") {
        "" => subject.map_or("", |s| str_at(s, "/metadata/generateName")),
        name => name,
    };
    let name = if name.is_empty() { "<no name>" } else { name };
    let sub = match str_at(request, "/subResource") {
        "" => String::new(),
        sub => format!(" ({sub})"),
    };
    match str_at(request, "/namespace") {
        "" => format!("{kind}/{name}{sub}"),
        ns => format!("{kind}/{ns}/{name}{sub}"),
    }
}
