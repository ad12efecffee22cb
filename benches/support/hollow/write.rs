//! GET of one object and every write, applied as kube-apiserver would
//! (a stale resourceVersion in a Pod or Node patch is a 409), so a pass
//! that wrote finds its writes in the next, through the watches. A pod's
//! resize is actuated at once, as by a kubelet. Creating or deleting a Pod
//! or Node, and an eviction, are accepted and change nothing (there is no
//! DaemonSet controller to make the pod again); Events are accepted and
//! dropped.

use super::server::{
    failure_of, full, json, lock, shaped, write, Asked, Body, Change, Route, State,
};
use hyper::Response;
use serde_json::{json, Value};
use std::sync::Arc;

fn is_hollow(route: &Route) -> bool {
    route.resource.group.is_empty() && matches!(route.resource.plural, "pods" | "nodes")
}

/// As a kubelet that actuates at once: a pod's status carries what its
/// spec asks.
fn actuate(pod: &mut Value) {
    let specs = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for status in pod["status"]["containerStatuses"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if let Some(spec) = specs.iter().find(|c| c["name"] == status["name"]) {
            status["resources"] = spec["resources"].clone();
            status["allocatedResources"] = spec["resources"]["requests"].clone();
        }
    }
}

/// A write to a Pod or Node: applied (a resize actuated at once), the
/// object re-serialized, and sent to the watches.
fn hollow_write(state: &State, asked: &Asked, route: &Route, body: Value) -> Response<Body> {
    let (r, ns, name) = (
        route.resource,
        route.namespace.as_deref().unwrap_or(""),
        route.name.as_deref().unwrap_or(""),
    );
    let collection = if r.plural == "pods" {
        &state.pods
    } else {
        &state.nodes
    };
    if asked.method == "POST" {
        return json(201, &body);
    }
    let mut c = write(collection);
    let Some(i) = c.index(ns, name) else {
        return failure_of(
            404,
            "NotFound",
            &format!("{} {ns}/{name} not found", r.kind),
        );
    };
    if asked.method == "GET" || asked.method == "DELETE" {
        let o = &c.items[i];
        return full(
            200,
            if asked.metadata_only() {
                o.meta.clone()
            } else {
                o.full.clone()
            },
        );
    }
    let old: Value = serde_json::from_slice(&c.items[i].full).unwrap_or_default();
    let want = &body["metadata"]["resourceVersion"];
    if want.is_string() && *want != old["metadata"]["resourceVersion"] {
        return failure_of(
            409,
            "Conflict",
            &format!(
                "{} {ns}/{name}: resourceVersion {want} is not the latest",
                r.kind
            ),
        );
    }
    let mut object = match asked.method.as_str() {
        "PUT" if route.sub.as_deref() == Some("status") => {
            let mut o = old;
            o["status"] = body["status"].clone();
            o
        }
        "PUT" => body,
        _ => match patched(old, asked, body) {
            Ok(o) => o,
            Err(e) => return failure_of(422, "Invalid", &e),
        },
    };
    if r.plural == "pods" {
        actuate(&mut object);
    }
    let revision = {
        let mut objects = lock(&state.objects);
        objects.revision += 1;
        objects.revision
    };
    object["metadata"]["resourceVersion"] = json!(revision.to_string());
    c.replace(i, super::store::Hollow::of(&object));
    drop(c);
    let reply = shaped(asked, &object);
    let _ = state.changes.send(Change {
        key: r.key(),
        kind: "MODIFIED",
        object,
    });
    json(200, &reply)
}

/// `body` patched as its content type says (strategic merge and apply
/// as merge: enough for the fields the components write).
fn patched(mut object: Value, asked: &Asked, patch: Value) -> Result<Value, String> {
    if asked.content_type.contains("json-patch") {
        let p: json_patch::Patch = serde_json::from_value(patch).map_err(|e| e.to_string())?;
        json_patch::patch(&mut object, &p).map_err(|e| e.to_string())?;
    } else {
        json_patch::merge(&mut object, &patch);
    }
    Ok(object)
}

pub async fn one(state: &Arc<State>, asked: &Asked, route: &Route) -> Response<Body> {
    let r = route.resource;
    let ns = route.namespace.clone().unwrap_or_default();
    let name = route.name.clone().unwrap_or_default();
    let body: Value = if asked.body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&asked.body) {
            Ok(v) => v,
            Err(e) => return failure_of(400, "BadRequest", &format!("body: {e}")),
        }
    };
    let sub = route.sub.as_deref();
    if sub == Some("eviction") {
        return json(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        );
    }
    if matches!(r.plural, "events") {
        return json(201, &body);
    }
    if is_hollow(route) {
        return hollow_write(state, asked, route, body);
    }
    let mut objects = lock(&state.objects);
    let existing = objects.get(r, &ns, &name).cloned();
    let (code, object, kind) = match (asked.method.as_str(), existing) {
        ("GET", Some(o)) => return json(200, &shaped(asked, &o)),
        ("POST", Some(_)) => {
            return failure_of(
                409,
                "AlreadyExists",
                &format!("{} {ns}/{name} exists", r.kind),
            )
        }
        ("POST", None) => {
            let mut o = body;
            if o["metadata"]["name"].is_null() {
                let prefix = o["metadata"]["generateName"]
                    .as_str()
                    .unwrap_or("x-")
                    .to_owned();
                o["metadata"]["name"] = json!(format!("{prefix}{}", objects.revision));
            }
            if r.namespaced {
                o["metadata"]["namespace"] = json!(ns);
            }
            (201, o, "ADDED")
        }
        ("PUT", Some(old)) => {
            let o = if sub == Some("status") {
                let mut o = old;
                o["status"] = body["status"].clone();
                o
            } else {
                body
            };
            (200, o, "MODIFIED")
        }
        ("PATCH", old) => {
            let created = old.is_none();
            if created && !asked.content_type.contains("apply-patch") {
                return failure_of(
                    404,
                    "NotFound",
                    &format!("{} {ns}/{name} not found", r.kind),
                );
            }
            let mut base =
                old.unwrap_or_else(|| json!({"metadata": {"name": name, "namespace": ns}}));
            if !r.namespaced {
                if let Some(m) = base["metadata"].as_object_mut() {
                    m.remove("namespace");
                }
            }
            match patched(base, asked, body) {
                Ok(o) => (
                    if created { 201 } else { 200 },
                    o,
                    if created { "ADDED" } else { "MODIFIED" },
                ),
                Err(e) => return failure_of(422, "Invalid", &e),
            }
        }
        ("DELETE", Some(old)) => {
            objects.remove(r, &ns, &name);
            let _ = state.changes.send(Change {
                key: r.key(),
                kind: "DELETED",
                object: old.clone(),
            });
            return json(200, &old);
        }
        (_, None) => {
            return failure_of(
                404,
                "NotFound",
                &format!("{} {ns}/{name} not found", r.kind),
            )
        }
        (m, Some(_)) => return failure_of(405, "MethodNotAllowed", &format!("{m} {}", asked.path)),
    };
    let stored = objects.put(r, object);
    drop(objects);
    let _ = state.changes.send(Change {
        key: r.key(),
        kind,
        object: stored.clone(),
    });
    json(code, &shaped(asked, &stored))
}
