//! The hollow apiserver: plain HTTP on loopback, routes as kube-apiserver
//! does for the kinds in [`RESOURCES`]. LISTs page (`limit`, `continue`),
//! select (`labelSelector`, `fieldSelector`; one it cannot evaluate is
//! answered 400 and recorded in `refused`), and answer
//! PartialObjectMetadataList when asked; WATCHes stay open until
//! `timeoutSeconds`, with bookmarks when allowed and the writes made to the
//! writable kinds. Every write is accepted. Every request is counted under
//! the component being measured as `METHOD path-pattern`.

use super::store::{partial, resource, Collection, Objects, Query, Resource, RESOURCES};
use super::{selector, watch};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{body::Incoming, Request, Response};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use tokio::sync::broadcast;

pub type Body = BoxBody<Bytes, Infallible>;

/// A write to a writable kind, for the watches on it.
#[derive(Clone)]
pub struct Change {
    pub key: String,
    pub kind: &'static str,
    pub object: Value,
}

/// What one component asked.
#[derive(Default, Clone)]
pub struct Tally {
    /// `METHOD path-pattern verb` → requests.
    pub requests: BTreeMap<String, u64>,
    /// Response bytes sent (watch streams included).
    pub bytes: u64,
    /// LISTs begun (asked without `continue`), by pattern (metadata-only
    /// ones apart): a pass marker.
    pub starts: BTreeMap<String, u64>,
}

impl Tally {
    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }
    /// What was asked since `before`.
    pub fn since(&self, before: &Tally) -> Tally {
        let mut requests = self.requests.clone();
        for (k, v) in &before.requests {
            if let Some(n) = requests.get_mut(k) {
                *n -= v;
            }
        }
        requests.retain(|_, n| *n > 0);
        Tally {
            requests,
            bytes: self.bytes - before.bytes,
            starts: BTreeMap::new(),
        }
    }
}

pub struct State {
    pub pods: RwLock<Collection>,
    pub nodes: RwLock<Collection>,
    pub objects: Mutex<Objects>,
    pub changes: broadcast::Sender<Change>,
    /// The component whose requests are counted now.
    pub component: Mutex<String>,
    pub tallies: Mutex<BTreeMap<String, Tally>>,
    /// Per component, each distinct query (digits as `#`).
    pub queries: Mutex<BTreeMap<String, BTreeSet<String>>>,
    pub refused: Mutex<Vec<String>>,
    /// The LIST (component, pattern key, pid) that begins a pass.
    pub mark: Mutex<Option<(String, String, u32)>>,
    /// At each such LIST, as it arrives: the component's tally before it
    /// and the process's CPU time.
    pub marks: Mutex<Vec<(std::time::Instant, Tally, f64)>>,
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn full(code: u16, bytes: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(bytes.into()).boxed())
        .unwrap_or_default()
}

pub fn json(code: u16, value: &Value) -> Response<Body> {
    full(code, serde_json::to_vec(value).unwrap_or_default())
}

pub fn failure_of(code: u16, reason: &str, message: &str) -> Response<Body> {
    json(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code}),
    )
}

/// `%XX` and `+` decoded.
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(text.get(i + 1..i + 3).unwrap_or(""), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a request goes.
pub struct Route {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

impl Route {
    fn pattern(&self) -> String {
        let r = self.resource;
        let mut p = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        if self.namespace.is_some() {
            p.push_str("/namespaces/{ns}");
        }
        p.push('/');
        p.push_str(r.plural);
        if self.name.is_some() {
            p.push_str("/{name}");
        }
        if let Some(sub) = &self.sub {
            p.push('/');
            p.push_str(sub);
        }
        p
    }
}

/// The group and version a path is under, and the segments after them.
fn split(path: &str) -> Option<(&str, &str, Vec<&str>)> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["api", v, rest @ ..] => Some(("", v, rest.to_vec())),
        ["apis", g, v, rest @ ..] => Some((g, v, rest.to_vec())),
        _ => None,
    }
}

pub fn route(path: &str) -> Option<Route> {
    let (group, version, rest) = split(path)?;
    let (namespace, rest) = match rest.as_slice() {
        ["namespaces", ns, plural, ..] if resource(group, version, plural).is_some() => {
            (Some(ns.to_string()), rest[2..].to_vec())
        }
        _ => (None, rest),
    };
    let resource = resource(group, version, rest.first()?)?;
    Some(Route {
        resource,
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
    })
}

fn discovery(path: &str) -> Option<Value> {
    let resources = |group: &str, version: &str| -> Vec<Value> {
        RESOURCES.iter().filter(|r| r.group == group && r.version == version).flat_map(|r| {
            let mut out = vec![json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})];
            for sub in ["status", "resize", "eviction"] {
                if sub == "status" || r.plural == "pods" {
                    out.push(json!({"name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": ["get", "patch", "update"]}));
                }
            }
            out
        }).collect()
    };
    match path.trim_end_matches('/') {
        "/api" => Some(json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})),
        "/apis" => {
            let groups: BTreeSet<(&str, &str)> = RESOURCES
                .iter()
                .filter(|r| !r.group.is_empty())
                .map(|r| (r.group, r.version))
                .collect();
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(g, v)| {
                    let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
                    json!({"name": g, "versions": [gv], "preferredVersion": gv})
                })
                .collect();
            Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        "/version" => Some(
            json!({"major": "1", "minor": "33", "gitVersion": "v1.33.1", "platform": "linux/amd64"}),
        ),
        p => {
            let (group, version, rest) = split(p)?;
            if !rest.is_empty()
                || !RESOURCES
                    .iter()
                    .any(|r| r.group == group && r.version == version)
            {
                return None;
            }
            let gv = if group.is_empty() {
                version.to_owned()
            } else {
                format!("{group}/{version}")
            };
            Some(
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources(group, version)}),
            )
        }
    }
}

/// Runs of digits as `#`, so a query per node counts once in the log.
fn shape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub struct Asked {
    pub method: String,
    pub path: String,
    pub params: BTreeMap<String, String>,
    pub accept: String,
    pub content_type: String,
    pub body: Bytes,
}

impl Asked {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }
    pub fn metadata_only(&self) -> bool {
        self.accept.contains("as=PartialObjectMetadata")
    }
}

pub async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    let header = |h: &str| {
        request
            .headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (accept, content_type) = (header("accept"), header("content-type"));
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let params = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect();
    let asked = Asked {
        method,
        path,
        params,
        accept,
        content_type,
        body,
    };
    let component = lock(&state.component).clone();
    let verb = if asked.method != "GET" {
        ""
    } else if asked
        .param("watch")
        .is_some_and(|w| w == "true" || w == "1")
    {
        " watch"
    } else if route(&asked.path).is_some_and(|r| r.name.is_none()) {
        " list"
    } else {
        " get"
    };
    let pattern = route(&asked.path).map_or_else(|| asked.path.clone(), |r| r.pattern());
    {
        let mut shown: Vec<String> = asked
            .params
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "continue" | "resourceVersion"))
            .map(|(k, v)| format!("{k}={}", shape(v)))
            .collect();
        shown.sort();
        let accept = asked.accept.split(',').next().unwrap_or("");
        let line = format!(
            "{} {}{verb} ?{} {}",
            asked.method,
            pattern,
            shown.join("&"),
            if accept.contains("as=PartialObjectMetadata") {
                "(metadata only)"
            } else {
                ""
            }
        );
        lock(&state.queries)
            .entry(component.clone())
            .or_default()
            .insert(line);
    }
    if verb == " list" && asked.param("continue").is_none() {
        let key = if asked.metadata_only() {
            format!("{pattern} (metadata only)")
        } else {
            pattern.clone()
        };
        let mark = lock(&state.mark).clone();
        if let Some((_, _, pid)) = mark.filter(|(c, p, _)| *c == component && *p == key) {
            let before = lock(&state.tallies)
                .get(&component)
                .cloned()
                .unwrap_or_default();
            let cpu = super::process::cpu_of(pid);
            lock(&state.marks).push((std::time::Instant::now(), before, cpu));
        }
    }
    let response = answer(&state, &asked).await;
    let mut tallies = lock(&state.tallies);
    let tally = tallies.entry(component).or_default();
    *tally
        .requests
        .entry(format!("{} {pattern}{verb}", asked.method))
        .or_default() += 1;
    if verb == " list" && asked.param("continue").is_none() {
        let key = if asked.metadata_only() {
            format!("{pattern} (metadata only)")
        } else {
            pattern
        };
        *tally.starts.entry(key).or_default() += 1;
    }
    if let Some(n) = hyper::body::Body::size_hint(response.body()).exact() {
        tally.bytes += n;
    }
    Ok(response)
}

fn refuse(state: &State, asked: &Asked, why: &str) -> Response<Body> {
    let line = format!("{} {} {:?}: {why}", asked.method, asked.path, asked.params);
    eprintln!("hollow apiserver REFUSED {line}");
    lock(&state.refused).push(line);
    failure_of(400, "BadRequest", why)
}

async fn answer(state: &Arc<State>, asked: &Asked) -> Response<Body> {
    if asked.accept.contains("as=Table")
        || asked.accept.contains("protobuf") && !asked.accept.contains("json")
    {
        return refuse(state, asked, "only JSON is served");
    }
    if asked.method == "GET" {
        if let Some(d) = discovery(&asked.path) {
            return json(200, &d);
        }
    }
    if matches!(asked.path.as_str(), "/healthz" | "/readyz" | "/livez") {
        return full(200, "ok");
    }
    let Some(route) = route(&asked.path) else {
        return refuse(state, asked, "no such path on the hollow apiserver");
    };
    let labels = match selector::labels(asked.param("labelSelector").unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return refuse(state, asked, &e),
    };
    let fields = match selector::fields(asked.param("fieldSelector").unwrap_or("")) {
        Ok(f) => f,
        Err(e) => return refuse(state, asked, &e),
    };
    let query = Query {
        namespace: route.namespace.clone(),
        labels,
        fields,
    };
    let r = route.resource;
    if asked.method == "GET" && route.name.is_none() {
        if asked
            .param("watch")
            .is_some_and(|w| w == "true" || w == "1")
        {
            if asked
                .param("sendInitialEvents")
                .is_some_and(|s| s == "true")
            {
                return refuse(
                    state,
                    asked,
                    "sendInitialEvents (streaming lists) is not served",
                );
            }
            return watch::open(state, asked, r, query);
        }
        return super::list::list(state, asked, r, &query);
    }
    super::write::one(state, asked, &route).await
}

/// The object a GET of a writable kind, or the echo of a write, answers:
/// whole, or its metadata when asked.
pub fn shaped(asked: &Asked, object: &Value) -> Value {
    if asked.metadata_only() {
        partial(object)
    } else {
        object.clone()
    }
}
