//! Building the AdmissionReview the apiserver would send for a manifest, so
//! the CLI enters the webhook's pipeline at "review".

use super::kinds::KindInfo;
use crate::json::str_at;
use serde_json::{json, Map, Value};

/// The user the DaemonSet controller creates pods as.
pub const DAEMONSET_CONTROLLER: &str = "system:serviceaccount:kube-system:daemon-set-controller";

/// `request.userInfo`: who makes the request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// Empty for an anonymous request without a username.
    pub username: String,
    pub groups: Vec<String>,
}

impl User {
    /// The DaemonSet controller, which creates DaemonSet pods.
    #[must_use]
    pub fn daemonset_controller() -> Self {
        Self {
            username: DAEMONSET_CONTROLLER.to_owned(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                "system:serviceaccounts:kube-system".to_owned(),
                "system:authenticated".to_owned(),
            ],
        }
    }

    fn to_json(&self) -> Value {
        let mut user = Map::new();
        if !self.username.is_empty() {
            user.insert("username".to_owned(), Value::from(self.username.clone()));
        }
        if !self.groups.is_empty() {
            user.insert("groups".to_owned(), Value::from(self.groups.clone()));
        }
        Value::Object(user)
    }
}

/// `(group, version)` of an `apiVersion`: `apps/v1` -> `("apps", "v1")`.
#[must_use]
pub fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The AdmissionReview for `operation` on `object` (CREATE, UPDATE) or
/// `old_object` (UPDATE, DELETE), with `dryRun: true`, for an object of a
/// kind served as `served`.
///
/// The caller guarantees that the object has a kind and apiVersion
/// (the CLI checks it on input) and looked the kind up
/// ([`super::kinds::Kinds::lookup`]).
#[must_use]
pub fn build(
    uid: &str,
    operation: &str,
    object: Option<Value>,
    old_object: Option<Value>,
    user: &User,
    served: &KindInfo,
) -> Value {
    let subject = object
        .as_ref()
        .or(old_object.as_ref())
        .unwrap_or(&Value::Null);
    let kind = str_at(subject, "/kind").to_owned();
    let (group, version) = group_version(str_at(subject, "/apiVersion"));
    let (group, version) = (group.to_owned(), version.to_owned());
    let name = str_at(subject, "/metadata/name").to_owned();
    let namespace = if kind == "Namespace" {
        name.clone()
    } else if served.namespaced {
        str_at(subject, "/metadata/namespace").to_owned()
    } else {
        String::new()
    };
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": served.resource});
    let options_kind = match operation {
        "UPDATE" => "UpdateOptions",
        "DELETE" => "DeleteOptions",
        _ => "CreateOptions",
    };
    let mut request = Map::new();
    request.insert("uid".to_owned(), Value::from(uid));
    request.insert("kind".to_owned(), gvk.clone());
    request.insert("resource".to_owned(), gvr.clone());
    request.insert("requestKind".to_owned(), gvk);
    request.insert("requestResource".to_owned(), gvr);
    if !name.is_empty() {
        request.insert("name".to_owned(), Value::from(name));
    }
    if !namespace.is_empty() {
        request.insert("namespace".to_owned(), Value::from(namespace));
    }
    request.insert("operation".to_owned(), Value::from(operation));
    request.insert("userInfo".to_owned(), user.to_json());
    request.insert("object".to_owned(), object.unwrap_or(Value::Null));
    request.insert("oldObject".to_owned(), old_object.unwrap_or(Value::Null));
    request.insert("dryRun".to_owned(), Value::Bool(true));
    request.insert(
        "options".to_owned(),
        json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}),
    );
    // Built by hand: `json!` would deep-copy the request (and the objects).
    let mut review = Map::new();
    review.insert("apiVersion".to_owned(), Value::from("admission.k8s.io/v1"));
    review.insert("kind".to_owned(), Value::from("AdmissionReview"));
    review.insert("request".to_owned(), Value::Object(request));
    Value::Object(review)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(resource: &str, namespaced: bool) -> KindInfo {
        KindInfo {
            resource: resource.to_owned(),
            namespaced,
            versions: vec!["v1".to_owned()],
        }
    }

    #[test]
    fn a_create_review_carries_the_object_the_user_and_dry_run() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "p-", "namespace": "ns"}});
        let user = User {
            username: "alice".into(),
            groups: vec!["devs".into()],
        };
        let review = build(
            "u1",
            "CREATE",
            Some(pod),
            None,
            &user,
            &served("pods", true),
        );
        let request = &review["request"];
        assert_eq!(
            request["resource"],
            json!({"group": "", "version": "v1", "resource": "pods"})
        );
        assert_eq!(request["namespace"], "ns");
        assert!(request.get("name").is_none());
        assert_eq!(
            request["userInfo"],
            json!({"username": "alice", "groups": ["devs"]})
        );
        assert_eq!(request["dryRun"], true);
        assert_eq!(request["oldObject"], Value::Null);
        assert!(crate::admission::parse(review.to_string().as_bytes()).is_ok());
    }

    #[test]
    fn a_delete_review_has_only_the_old_object_and_cluster_scope_has_no_namespace() {
        let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}});
        let review = build(
            "u",
            "DELETE",
            None,
            Some(pc.clone()),
            &User::default(),
            &served("priorityclasses", false),
        );
        assert_eq!(review["request"]["object"], Value::Null);
        assert_eq!(review["request"]["oldObject"], pc);
        assert!(review["request"].get("namespace").is_none());
        assert_eq!(review["request"]["userInfo"], json!({}));
        assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
    }
}
