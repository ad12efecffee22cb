//! A case's request ([`nodescope::cli::test_suite::cases::CaseRequest`]) sent
//! to the apiserver for real, with `dryRun=All`, as the case's user, and
//! the apiserver's answer sorted by who gave it: the admission enforcer
//! under test, or the apiserver itself (an answer that says nothing about
//! the enforcers).

use super::cluster::FIELD_MANAGER;
use super::ControlPlane;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::Client;
use nodescope::apiserver::review::User;
use nodescope::cli::test_suite::cases::{CaseRequest, Verdict};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// What the apiserver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    /// Denied by an admission enforcer: a ValidatingAdmissionPolicy binding
    /// or a webhook. `message` is the enforcer's own, without the prefixes
    /// the apiserver adds (`<resource> "<name>" is forbidden: ` before a
    /// policy's message, `admission webhook "<name>" denied the request: `
    /// before a webhook's).
    Denied {
        code: u16,
        message: String,
    },
    /// Refused by the apiserver itself (validation, a missing namespace or
    /// object, a webhook that could not be called...).
    Refused {
        code: u16,
        message: String,
    },
}

impl Answer {
    /// Whether this is the engine's verdict: the same decision, code and
    /// message.
    pub fn is(&self, verdict: &Verdict) -> bool {
        match self {
            Answer::Allowed => verdict.allowed,
            Answer::Denied { code, message } => {
                !verdict.allowed && *code == verdict.code && *message == verdict.message
            }
            Answer::Refused { .. } => false,
        }
    }

    fn from_error(error: kube::Error) -> Answer {
        let (code, message) = match error {
            kube::Error::Api(status) => (status.code, status.message),
            other => (0, other.to_string()),
        };
        const POLICY: &str = "ValidatingAdmissionPolicy '";
        if let Some(rest) = message.strip_prefix("admission webhook \"") {
            if let Some((_, own)) = rest.split_once("\" denied the request: ") {
                return Answer::Denied {
                    code,
                    message: own.to_owned(),
                };
            }
        } else if let Some(at) = message.find(POLICY) {
            return Answer::Denied {
                code,
                message: message[at..].to_owned(),
            };
        }
        Answer::Refused { code, message }
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Allowed => write!(f, "allowed"),
            Answer::Denied { code, message } => write!(f, "denied {code}: {message}"),
            Answer::Refused { code, message } => {
                write!(f, "refused by the apiserver {code}: {message}")
            }
        }
    }
}

/// The engine's verdict, written as an [`Answer`] is.
pub fn show(verdict: &Verdict) -> String {
    if verdict.allowed {
        "allowed".to_owned()
    } else {
        format!("denied {}: {}", verdict.code, verdict.message)
    }
}

/// Clients that impersonate users (`Impersonate-User`,
/// `Impersonate-Group`), one per user, made from the admin's kubeconfig.
pub struct Clients {
    admin: Client,
    config: kube::Config,
    by_user: HashMap<(String, Vec<String>), Client>,
}

impl Clients {
    pub async fn new(plane: &ControlPlane) -> Clients {
        Clients {
            admin: plane.client().await,
            config: plane.config().await,
            by_user: HashMap::new(),
        }
    }

    /// A client acting as `user`; the admin for a request without a
    /// username (impersonation needs one). The apiserver adds
    /// `system:authenticated` to an impersonated user's groups.
    pub fn as_user(&mut self, user: &User) -> Client {
        if user.username.is_empty() {
            return self.admin.clone();
        }
        let key = (user.username.clone(), user.groups.clone());
        let config = &self.config;
        self.by_user
            .entry(key)
            .or_insert_with(|| {
                let mut config = config.clone();
                config.auth_info.impersonate = Some(user.username.clone());
                config.auth_info.impersonate_groups =
                    (!user.groups.is_empty()).then(|| user.groups.clone());
                Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"))
            })
            .clone()
    }
}

/// The `Api` of the request's resource, in its namespace.
pub fn api(client: &Client, request: &CaseRequest, kind: &str) -> Api<DynamicObject> {
    let (group, version, plural) = &request.resource;
    let resource = ApiResource {
        group: group.clone(),
        version: version.clone(),
        api_version: if group.is_empty() {
            version.clone()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.to_owned(),
        plural: plural.clone(),
    };
    // A review names a Namespace's own name as its namespace.
    match &request.namespace {
        Some(ns) if plural != "namespaces" => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

fn kind_of(request: &CaseRequest) -> String {
    let object = request.object.as_ref().or(request.old_object.as_ref());
    object
        .and_then(|o| o["kind"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Sends `request` with `dryRun=All` as `client`. `stored` is the name of the object
/// created for its `old_object` (UPDATE, DELETE): an UPDATE is a JSON merge
/// patch from the old object as written to the new one, applied to the
/// stored object, as a client changing it would send (a PUT of the object
/// as written would drop what the apiserver added, and pods refuse that).
pub async fn send(client: &Client, request: &CaseRequest, stored: Option<&str>) -> Answer {
    let api = api(client, request, &kind_of(request));
    let outcome = match (request.operation.as_str(), stored) {
        ("CREATE", _) => {
            let object = request.object.clone().unwrap_or_default();
            match serde_json::from_value::<DynamicObject>(object) {
                Ok(object) => api.create(&dry_run_post(), &object).await.map(|_| ()),
                Err(e) => {
                    return Answer::Refused {
                        code: 0,
                        message: format!("not an object: {e}"),
                    }
                }
            }
        }
        ("UPDATE", Some(name)) => {
            let empty = Value::Object(Map::new());
            let patch = merge_patch(
                request.old_object.as_ref().unwrap_or(&empty),
                request.object.as_ref().unwrap_or(&empty),
            );
            let params = PatchParams {
                dry_run: true,
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            match &request.sub_resource {
                Some(sub) => api
                    .patch_subresource(sub, name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
                None => api
                    .patch(name, &params, &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            }
        }
        ("DELETE", Some(name)) => {
            let params = DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            };
            api.delete(name, &params).await.map(|_| ())
        }
        (operation, _) => {
            return Answer::Refused {
                code: 0,
                message: format!("{operation} without a stored object"),
            }
        }
    };
    match outcome {
        Ok(()) => Answer::Allowed,
        // The apiserver looks for an existing object after admission: a
        // CREATE that meets one was admitted (a case can list an object
        // both as a param and among the objects it creates).
        Err(kube::Error::Api(status))
            if request.operation == "CREATE" && status.reason == "AlreadyExists" =>
        {
            Answer::Allowed
        }
        Err(e) => Answer::from_error(e),
    }
}

fn dry_run_post() -> PostParams {
    PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch = Map::new();
            for (key, old) in from {
                match to.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        patch.insert(key.clone(), merge_patch(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in to {
                if !from.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}
