//! Step 5: Failure modes: the serving certificate rotated on disk while the
//! apiserver keeps calling (no request fails), then nodescope stopped: pods
//! are still created, unmutated (`Ignore`); what the validating webhook
//! matches is refused (`Fail`); what its `matchConditions` exclude is not
//! affected at all.

use crate::common;
use crate::mutation::{resources, STORE};
use crate::support::cluster::{self, dry_run_create, dry_run_pod};
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane};
use crate::watches::node_scoped_vpa;
use base64::Engine as _;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::apply_files(&client, &STORE).await;
    let server = ns::start(plane, &[]).await;
    // The next certificate comes from another CA; the caBundle trusts both,
    // as it does during a real CA rotation.
    let next = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    common::make_certs(next.path());
    let next_ca = std::fs::read(next.path().join("ca.crt")).unwrap_or_else(|e| panic!("{e}"));
    let bundle =
        base64::engine::general_purpose::STANDARD.encode([server.ca(), next_ca.clone()].concat());
    let mut configs = Vec::new();
    for file in ["mutating.yaml", "validating.yaml"] {
        let mut config = ns::webhook_configuration(file, "e2e-failures", &server);
        for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
            webhook["clientConfig"]["caBundle"] = json!(bundle);
        }
        cluster::apply(&client, &config).await;
        configs.push(config);
    }
    let vpa = node_scoped_vpa("failures");
    eventually(
        "the validating webhook in place",
        Duration::from_secs(30),
        || {
            let (client, vpa) = (client.clone(), vpa.clone());
            async move { dry_run_create(&client, &vpa).await.ok() }
        },
    )
    .await;

    // Callers through the apiserver, both webhooks, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load = {
        let (client, vpa, stop, sent, failed) = (
            client.clone(),
            vpa.clone(),
            stop.clone(),
            sent.clone(),
            failed.clone(),
        );
        tokio::spawn(async move {
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = dry_run_create(&client, &vpa).await {
                    failures.push(format!("VPA: {e}"));
                }
                let pod = dry_run_pod(&client, "node-a-1").await;
                if resources(&pod)[0].1["requests"]["cpu"] != "150m" {
                    failures.push("pod: not mutated".to_owned());
                }
                sent.fetch_add(2, Ordering::Relaxed);
                failed.store(failures.len(), Ordering::Relaxed);
            }
            failures
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    rotate(server.certs.path(), next.path());
    eventually(
        "nodescope serving the next certificate",
        Duration::from_secs(30),
        || {
            let (addr, ca) = (server.addr, next_ca.clone());
            async move { presents_cert_of(addr, &ca).await.then_some(()) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let failures = load.await.unwrap_or_else(|e| panic!("the load task: {e}"));
    assert!(
        failures.is_empty(),
        "requests failed during rotation: {failures:?}"
    );
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent >= 4, "only {sent} requests were sent");
    println!(
        "  certificate rotated on disk under load: {sent} requests through the apiserver, 0 failed"
    );

    drop(server);
    // Mutating webhook, failurePolicy Ignore: the pod is created as written.
    let pod = dry_run_pod(&client, "node-a-1").await;
    assert_eq!(
        resources(&pod)[0].1["requests"],
        json!({"cpu": "102m", "memory": "180Mi"})
    );
    println!("  nodescope stopped: a DaemonSet pod is admitted unmutated (Ignore)");
    // feature-gates webhook, failurePolicy Fail: refused.
    let refused = dry_run_create(&client, &node_scoped_vpa("refused"))
        .await
        .err()
        .unwrap_or_else(|| panic!("a node-scoped VPA was admitted with nodescope down"));
    assert!(
        refused.starts_with(
            "500 Internal error occurred: failed calling webhook \"feature-gates.nodescope.dev\""
        ),
        "{refused}"
    );
    println!("  nodescope stopped: a node-scoped VPA is refused (Fail): {refused}");
    // Outside every matchCondition: not affected.
    let plain: Value = json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "plain", "namespace": "monitoring"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    });
    dry_run_create(&client, &plain)
        .await
        .unwrap_or_else(|e| panic!("a VPA without scope was refused with nodescope down: {e}"));
    println!("  nodescope stopped: a VPA without scope is admitted (outside matchConditions)");

    for config in &configs {
        cluster::delete(&client, config).await;
    }
}

/// Replaces the served pair the way a Secret volume update does: each file
/// renamed into place, key first.
fn rotate(served: &std::path::Path, next: &std::path::Path) {
    for name in ["tls.key", "tls.crt"] {
        let staged = served.join(format!(".{name}.next"));
        std::fs::copy(next.join(name), &staged).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(&staged, served.join(name)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Whether the server at `addr` completes a handshake verified against `ca`.
async fn presents_cert_of(addr: std::net::SocketAddr, ca: &[u8]) -> bool {
    let Ok(tcp) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let Ok(name) = rustls::pki_types::ServerName::try_from("localhost") else {
        return false;
    };
    let handshake = common::tls_connector(ca, &[b"http/1.1"]).connect(name, tcp);
    matches!(
        tokio::time::timeout(Duration::from_secs(2), handshake).await,
        Ok(Ok(_))
    )
}
