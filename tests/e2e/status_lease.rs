//! The webhook's status Lease on the real apiserver. The shipped RBAC
//! (manifests/base/server/rbac.yaml) lets the webhook's ServiceAccount
//! create and renew `nodescope-webhook` and no other Lease; the real
//! `nodescope serve --store kube` renews it while ready, as its pod; once
//! the server stops, the Lease goes stale for the updater's check.

use crate::common::{self, H1};
use crate::support::admission::Clients;
use crate::support::nodescope as ns;
use crate::support::{cluster, eventually, ControlPlane};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use nodescope::apiserver::review::User;
use nodescope::leader::status::renew::renew_once;
use nodescope::leader::status::{lease_is_fresh, renew_time, StatusLease, DEFAULT_LEASE_NAME};
use nodescope::metrics::StatusLeaseRenewal;
use serde_json::json;
use std::time::{Duration, SystemTime};

const SYSTEM: &str = "nodescope-system";
const OWN: &str = "e2e-status";
const LIMIT: Duration = Duration::from_secs(30);

fn status(namespace: &str, name: &str, identity: &str) -> StatusLease {
    StatusLease {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        identity: identity.to_owned(),
    }
}

/// The shipped Role and RoleBinding in nodescope-system suffice for the
/// renewal, and grant no other Lease.
async fn shipped_rbac(plane: &ControlPlane) {
    let admin = plane.client().await;
    cluster::apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
    )
    .await;
    for object in cluster::documents("manifests/base/server/rbac.yaml") {
        if object["metadata"]["namespace"] == SYSTEM {
            cluster::apply(&admin, &object).await;
        }
    }
    let mut clients = Clients::new(plane).await;
    let webhook = clients.as_user(&User {
        username: format!("system:serviceaccount:{SYSTEM}:nodescope"),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{SYSTEM}"),
        ],
    });
    let leases: Api<Lease> = Api::namespaced(webhook, SYSTEM);
    let mine = status(SYSTEM, DEFAULT_LEASE_NAME, "e2e-webhook-rbac");
    // Other steps' servers renew the same Lease when they run, so another
    // writer winning the race (a conflict) also shows the write was let in.
    for attempt in ["creates", "renews"] {
        let result = eventually(
            &format!("the webhook's ServiceAccount {attempt} its status Lease"),
            LIMIT,
            || {
                let (leases, mine) = (leases.clone(), mine.clone());
                async move { renew_once(&leases, &mine).await.ok() }
            },
        )
        .await;
        assert!(
            matches!(
                result,
                StatusLeaseRenewal::Success | StatusLeaseRenewal::Conflict
            ),
            "{result:?}"
        );
    }
    let stored = Api::<Lease>::namespaced(admin.clone(), SYSTEM)
        .get(DEFAULT_LEASE_NAME)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(lease_is_fresh(
        renew_time(&stored),
        SystemTime::now(),
        LIMIT
    ));
    let other = renew_once(
        &leases,
        &status(SYSTEM, "nodescope-features", "e2e-webhook-rbac"),
    )
    .await;
    assert!(
        matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
        "the webhook may touch another Lease: {other:?}"
    );
    println!("  the shipped RBAC: its own Lease created and renewed, another refused");
}

fn renewed_at(lease: &Lease) -> Option<SystemTime> {
    renew_time(lease)
}

pub async fn run(plane: &ControlPlane) {
    shipped_rbac(plane).await;

    let admin = plane.client().await;
    cluster::apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OWN}}),
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(admin, OWN);
    let mut server = ns::start(
        plane,
        &[
            "--status-lease-namespace=e2e-status",
            "--status-lease-update-interval=1s",
            "--instance=e2e-webhook-a",
        ],
    )
    .await;
    let first = eventually("the server's status Lease", LIMIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt(DEFAULT_LEASE_NAME).await.ok().flatten()?;
            let spec = lease.spec.clone()?;
            (spec.holder_identity.as_deref() == Some("e2e-webhook-a")
                && spec.lease_duration_seconds == Some(60))
            .then(|| renewed_at(&lease))
            .flatten()
        }
    })
    .await;
    let later = eventually("a renewal after the first", LIMIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt(DEFAULT_LEASE_NAME).await.ok().flatten()?;
            renewed_at(&lease).filter(|at| *at > first)
        }
    })
    .await;
    assert!(lease_is_fresh(Some(later), SystemTime::now(), LIMIT));
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let metrics = client
        .send(common::request("GET", "/metrics", None, Vec::new()))
        .await
        .text();
    let count = |result: &str| {
        let prefix = format!("nodescope_status_lease_renewals_total{{result=\"{result}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).and_then(|n| n.parse::<u64>().ok()))
    };
    assert!(count("success").is_some_and(|n| n >= 2), "{metrics}");
    assert_eq!(count("failure"), Some(0), "{metrics}");
    println!("  serve renews e2e-status/{DEFAULT_LEASE_NAME} every second as e2e-webhook-a");

    server.sigterm();
    assert!(
        server.wait(Duration::from_secs(30)).is_some(),
        "serve did not stop"
    );
    let last = leases
        .get(DEFAULT_LEASE_NAME)
        .await
        .ok()
        .and_then(|l| renewed_at(&l));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = leases
        .get(DEFAULT_LEASE_NAME)
        .await
        .ok()
        .and_then(|l| renewed_at(&l));
    assert_eq!(now, last, "renewed after the server stopped");
    assert!(!lease_is_fresh(
        now,
        SystemTime::now(),
        Duration::from_secs(2)
    ));
    println!("  once serve stopped, no renewal: stale after any timeout shorter than its age");
}
