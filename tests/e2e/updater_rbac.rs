//! `components/updater`'s RBAC on the real apiserver, acting as its
//! ServiceAccount: the narrowed Lease Role (get, list, watch and patch by
//! name, create apart) is enough for `nodescope::leader` to lead on
//! `nodescope-updater`, the webhook's status Lease can be read and not
//! written, and the ClusterRole allows the resize, the eviction, the pod
//! patch of an unboost (CPUStartupBoost) and the reads the updater needs,
//! but no pod delete or update.

use crate::support::admission::Clients;
use crate::support::{cluster, eventually, ControlPlane};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::Client;
use nodescope::apiserver::review::User;
use nodescope::leader::status::DEFAULT_LEASE_NAME;
use nodescope::leader::{elect, LeaseConfig};
use serde_json::json;
use std::time::Duration;

const SYSTEM: &str = "nodescope-system";

/// Whether `client` may `verb` `resource` (`pods/resize` names a
/// subresource) in `namespace`, by name when `name` is not empty.
async fn may(client: &Client, verb: &str, group: &str, resource: &str, name: &str) -> bool {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(SYSTEM.to_owned()),
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                name: (!name.is_empty()).then(|| name.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    api.create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("SelfSubjectAccessReview: {e}"))
        .status
        .is_some_and(|s| s.allowed)
}

pub async fn run(plane: &ControlPlane) {
    let admin = plane.client().await;
    cluster::apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
    )
    .await;
    let rbac = cluster::documents("manifests/components/updater/rbac.yaml");
    for object in &rbac {
        cluster::apply(&admin, object).await;
    }
    let mut clients = Clients::new(plane).await;
    let updater = clients.as_user(&User {
        username: format!("system:serviceaccount:{SYSTEM}:nodescope-updater"),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{SYSTEM}"),
        ],
    });
    eventually(
        "RBAC for nodescope-updater",
        Duration::from_secs(30),
        || {
            let updater = updater.clone();
            async move {
                may(&updater, "patch", "", "pods/resize", "")
                    .await
                    .then_some(())
            }
        },
    )
    .await;
    for (verb, group, resource, name, allowed) in [
        ("patch", "", "pods/resize", "", true),
        ("create", "", "pods/eviction", "", true),
        ("list", "", "pods", "", true),
        ("watch", "apps", "daemonsets", "", true),
        ("create", "events.k8s.io", "events", "", true),
        ("create", "", "events", "", true),
        (
            "get",
            "coordination.k8s.io",
            "leases",
            DEFAULT_LEASE_NAME,
            true,
        ),
        ("delete", "", "pods", "", false),
        ("update", "", "pods", "", false),
        // The unboost removes vpaCpuStartupBoost/ annotations.
        ("patch", "", "pods", "", true),
        (
            "update",
            "coordination.k8s.io",
            "leases",
            DEFAULT_LEASE_NAME,
            false,
        ),
        (
            "patch",
            "coordination.k8s.io",
            "leases",
            DEFAULT_LEASE_NAME,
            false,
        ),
        (
            "patch",
            "coordination.k8s.io",
            "leases",
            "nodescope-features",
            false,
        ),
        ("list", "coordination.k8s.io", "leases", "", false),
    ] {
        assert_eq!(
            may(&updater, verb, group, resource, name).await,
            allowed,
            "{verb} {group}/{resource} {name}"
        );
    }
    println!("  the ClusterRole and Role allow what the updater does, and no pod delete or update");

    let config = LeaseConfig {
        namespace: SYSTEM.to_owned(),
        name: "nodescope-updater".to_owned(),
        duration: Duration::from_secs(3),
    };
    let leadership = elect(updater.clone(), &config, "e2e-updater-a")
        .await
        .unwrap_or_else(|e| panic!("electing as nodescope-updater: {e}"));
    let mut leading = leadership.leading();
    let led = tokio::time::timeout(Duration::from_secs(30), leading.wait_for(|l| *l))
        .await
        .is_ok_and(|seen| seen.is_ok());
    assert!(led, "nodescope-updater never led with the shipped Role");
    leadership
        .release()
        .await
        .unwrap_or_else(|e| panic!("releasing: {e}"));
    let lease = Api::<Lease>::namespaced(admin.clone(), SYSTEM)
        .get("nodescope-updater")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()),
        None,
        "released"
    );
    println!("  leader election on Lease nodescope-updater: led, then released");

    for object in rbac.iter().rev() {
        cluster::delete(&admin, object).await;
    }
}
