//! The renewal against an in-memory apiserver that keeps one Lease with a
//! resourceVersion, and takes a forced server-side apply as the real one
//! does: creating the Lease or replacing the fields applied.

use super::*;
use crate::leader::status::{lease_is_fresh, renew_time, DEFAULT_LEASE_NAME};
use crate::metrics::WebhookMetrics;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/nodescope-system/leases";

#[derive(Default)]
struct Apiserver {
    lease: Mutex<Option<Lease>>,
    version: Mutex<u64>,
    calls: Mutex<Vec<String>>,
    /// Every call answers 500.
    failing: AtomicBool,
}

fn status_body(code: u16, reason: &str) -> (u16, String) {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": reason, "reason": reason, "code": code});
    (code, body.to_string())
}

impl Apiserver {
    fn store(&self, mut lease: Lease) -> String {
        let mut version = self.version.lock().unwrap_or_else(|e| e.into_inner());
        *version += 1;
        lease.metadata.resource_version = Some(version.to_string());
        let text = serde_json::to_string(&lease).unwrap_or_default();
        *self.lease.lock().unwrap_or_else(|e| e.into_inner()) = Some(lease);
        text
    }

    fn stored(&self) -> Option<Lease> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn answer(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{method} {path}"));
        if self.failing.load(Ordering::SeqCst) {
            return status_body(500, "InternalError");
        }
        let named = format!("{PATH}/{DEFAULT_LEASE_NAME}");
        let sent: Option<Lease> = serde_json::from_slice(body).ok();
        match (method, path) {
            ("PATCH", p) if p == format!("{named}?&force=true&fieldManager={FIELD_MANAGER}") => {
                match (self.stored(), sent) {
                    (_, None) => status_body(400, "BadRequest"),
                    (None, Some(lease)) => (201, self.store(lease)),
                    (Some(mut stored), Some(lease)) => {
                        stored.spec = lease.spec;
                        (200, self.store(stored))
                    }
                }
            }
            _ => status_body(404, "NotFound"),
        }
    }
}

fn client(server: &Arc<Apiserver>) -> Client {
    let server = server.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let server = server.clone();
        async move {
            let method = request.method().to_string();
            let path = request
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default();
            let body = request
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let (code, text) = server.answer(&method, &path, &body);
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(text)))
                .unwrap_or_default();
            Ok::<_, Infallible>(response)
        }
    });
    Client::new(service, "nodescope-system")
}

fn status(identity: &str) -> StatusLease {
    StatusLease {
        namespace: "nodescope-system".to_owned(),
        name: DEFAULT_LEASE_NAME.to_owned(),
        identity: identity.to_owned(),
    }
}

fn api(server: &Arc<Apiserver>) -> Api<Lease> {
    Api::namespaced(client(server), "nodescope-system")
}

fn holder(lease: Option<Lease>) -> Option<String> {
    lease.and_then(|l| l.spec).and_then(|s| s.holder_identity)
}

#[tokio::test]
async fn each_renewal_is_one_forced_apply_that_creates_the_lease_then_renews_it() {
    let server = Arc::new(Apiserver::default());
    let api = api(&server);
    let first = renew_once(&api, &status("nodescope-a")).await;
    assert_eq!(
        first.ok(),
        Some(StatusLeaseRenewal::Success),
        "{:?}",
        server.calls()
    );
    assert_eq!(holder(server.stored()).as_deref(), Some("nodescope-a"));
    let second = renew_once(&api, &status("nodescope-b")).await;
    assert_eq!(second.ok(), Some(StatusLeaseRenewal::Success));
    let stored = server.stored();
    assert_eq!(holder(stored.clone()).as_deref(), Some("nodescope-b"));
    assert_eq!(
        stored
            .as_ref()
            .and_then(|l| l.metadata.resource_version.as_deref()),
        Some("2")
    );
    assert_eq!(
        stored
            .as_ref()
            .and_then(|l| l.metadata.labels.clone())
            .and_then(|l| l.get("app.kubernetes.io/component").cloned())
            .as_deref(),
        Some("webhook")
    );
    assert!(lease_is_fresh(
        stored.as_ref().and_then(renew_time),
        SystemTime::now(),
        Duration::from_secs(60)
    ));
    let apply =
        format!("PATCH {PATH}/{DEFAULT_LEASE_NAME}?&force=true&fieldManager={FIELD_MANAGER}");
    assert_eq!(server.calls(), [apply.clone(), apply]);
}

#[tokio::test]
async fn two_replicas_renewing_together_both_land_without_a_conflict() {
    let server = Arc::new(Apiserver::default());
    let (a, b) = (api(&server), api(&server));
    let (sa, sb) = (status("nodescope-a"), status("nodescope-b"));
    let (ra, rb) = tokio::join!(renew_once(&a, &sa), renew_once(&b, &sb));
    assert_eq!(ra.ok(), Some(StatusLeaseRenewal::Success));
    assert_eq!(rb.ok(), Some(StatusLeaseRenewal::Success));
    assert!(server.calls().iter().all(|c| c.starts_with("PATCH ")));
}

#[tokio::test]
async fn an_apiserver_error_is_returned_not_hidden() {
    let server = Arc::new(Apiserver::default());
    server.failing.store(true, Ordering::SeqCst);
    let failed = renew_once(&api(&server), &status("nodescope-a")).await;
    assert!(
        matches!(&failed, Err(kube::Error::Api(s)) if s.code == 500),
        "{failed:?}"
    );
}

/// The count of `result`; `None` while the series is absent.
fn series(metrics: &WebhookMetrics, result: &str) -> Option<u64> {
    let prefix = format!("nodescope_status_lease_renewals_total{{result=\"{result}\"}} ");
    metrics
        .registry()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|n| n.parse().ok()))
}

fn counted(metrics: &WebhookMetrics, result: &str) -> u64 {
    series(metrics, result).unwrap_or(0)
}

/// Runs the loop at a 10 ms interval until `until` holds of the metrics.
async fn run_until(
    server: &Arc<Apiserver>,
    ready: Arc<AtomicBool>,
    metrics: &WebhookMetrics,
    until: impl Fn(&WebhookMetrics) -> bool,
) -> bool {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(
        client(server),
        status("nodescope-a"),
        Duration::from_millis(10),
        move || ready.load(Ordering::SeqCst),
        metrics.status_lease.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    let mut met = false;
    for _ in 0..500 {
        if until(metrics) {
            met = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop.send(());
    met && task.await.is_ok()
}

#[tokio::test]
async fn every_result_is_counted_from_zero_and_nothing_is_written_while_not_ready() {
    let server = Arc::new(Apiserver::default());
    let metrics = WebhookMetrics::new("kube");
    let ready = Arc::new(AtomicBool::new(false));
    assert!(
        run_until(&server, ready.clone(), &metrics, |m| counted(
            m,
            "not_ready"
        ) >= 3)
        .await,
        "{}",
        metrics.registry().render()
    );
    assert_eq!(
        series(&metrics, "success"),
        Some(0),
        "{}",
        metrics.registry().render()
    );
    assert_eq!(series(&metrics, "failure"), Some(0));
    assert_eq!(series(&metrics, "conflict"), Some(0));
    assert!(server.calls().is_empty(), "{:?}", server.calls());
    assert_eq!(server.stored(), None);

    ready.store(true, Ordering::SeqCst);
    assert!(run_until(&server, ready, &metrics, |m| counted(m, "success") >= 2).await);
    assert_eq!(holder(server.stored()).as_deref(), Some("nodescope-a"));
}

#[tokio::test]
async fn failures_are_counted_and_the_loop_goes_on_until_the_apiserver_answers_again() {
    let server = Arc::new(Apiserver::default());
    server.failing.store(true, Ordering::SeqCst);
    let metrics = WebhookMetrics::new("kube");
    let ready = Arc::new(AtomicBool::new(true));
    let flip = server.clone();
    assert!(
        run_until(&server, ready, &metrics, move |m| {
            if counted(m, "failure") >= 3 {
                flip.failing.store(false, Ordering::SeqCst);
            }
            counted(m, "success") >= 1
        })
        .await,
        "{}",
        metrics.registry().render()
    );
    assert!(counted(&metrics, "failure") >= 3);
    assert_eq!(holder(server.stored()).as_deref(), Some("nodescope-a"));
}
