//! What an operator sees: the exact families each component exports at
//! start, failed handshakes and refusals in the metrics and in the log (at
//! warn, throttled, with a count of the lines held back), and the metrics
//! port's own 404.

mod common;

use common::*;
use nodescope::features::metrics::FeaturesMetrics;
use nodescope::metrics::{family_names, RecommenderMetrics, WebhookMetrics};
use std::time::Duration;

/// What a fresh `serve` shows: every family whose label set is known.
const WEBHOOK_AT_START: [&str; 7] = [
    "nodescope_admission_unusable_recommendations",
    "nodescope_build_info",
    "nodescope_policy_reloads",
    "nodescope_reloads_refused",
    "nodescope_store_errors",
    "nodescope_tls_handshake_errors",
    "nodescope_tls_reloads",
];

/// Everything the webhook registers: the above, and the families whose
/// series appear with the first review or response.
/// What the webhook's registry can export: the status Lease renewals have
/// series only once `--store kube` starts renewing, so they are registered
/// but absent from a fresh file-store server's scrape.
const WEBHOOK_SAMPLES: [&str; 13] = [
    "nodescope_admission_duration_seconds_bucket",
    "nodescope_admission_duration_seconds_count",
    "nodescope_admission_duration_seconds_sum",
    "nodescope_admission_requests_total",
    "nodescope_admission_unusable_recommendations_total",
    "nodescope_build_info",
    "nodescope_http_responses_total",
    "nodescope_policy_reloads_total",
    "nodescope_reloads_refused_total",
    "nodescope_status_lease_renewals_total",
    "nodescope_store_errors_total",
    "nodescope_tls_handshake_errors_total",
    "nodescope_tls_reloads_total",
];

fn sorted(exposition: &str) -> Vec<String> {
    let mut names = family_names(exposition);
    names.sort();
    names
}

fn sorted_samples(registry: &nodescope::metrics::Registry) -> Vec<String> {
    let mut names = registry.sample_names().to_vec();
    names.sort();
    names
}

/// The value of the metrics line that starts with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|v| v.trim().to_owned())
}

async fn scrape(server: &Server) -> String {
    let mut client = H1::connect(server.addr, &server.ca()).await;
    client
        .send(request("GET", "/metrics", None, Vec::new()))
        .await
        .text()
}

#[tokio::test]
async fn a_fresh_webhook_exports_exactly_its_families_with_failures_at_zero() {
    let server = Server::start(&[]);
    let text = scrape(&server).await;
    assert_eq!(sorted(&text), WEBHOOK_AT_START, "{text}");
    for line in [
        r#"nodescope_tls_reloads_total{result="failure"} 0"#,
        r#"nodescope_tls_reloads_total{result="success"} 0"#,
        r#"nodescope_policy_reloads_total{result="failure"} 0"#,
        r#"nodescope_policy_reloads_total{result="success"} 0"#,
        r#"nodescope_store_errors_total{store="file"} 0"#,
        r#"nodescope_reloads_refused_total{source="policies"} 0"#,
        r#"nodescope_reloads_refused_total{source="store"} 0"#,
        r#"nodescope_tls_handshake_errors_total{reason="certificate_rejected"} 0"#,
        r#"nodescope_tls_handshake_errors_total{reason="timeout"} 0"#,
        r#"nodescope_tls_handshake_errors_total{reason="plain_http"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    assert!(
        !text.contains("nodescope_recommender_"),
        "the webhook must not export the recommender's families:\n{text}"
    );
    // The registry renders the same without a server, and registers the
    // families that have no series yet.
    let registry = WebhookMetrics::new("kube");
    assert_eq!(sorted(&registry.render()), WEBHOOK_AT_START);
    assert_eq!(sorted_samples(registry.registry()), WEBHOOK_SAMPLES);
}

#[test]
fn a_fresh_recommender_exports_exactly_its_families_with_failures_at_zero() {
    let metrics = RecommenderMetrics::new("nodescope-system/nodescope-recommender");
    let text = metrics.render();
    assert_eq!(
        sorted_samples(metrics.registry()),
        [
            "nodescope_build_info",
            "nodescope_http_responses_total",
            "nodescope_leader",
            "nodescope_recommender_checkpoint_writes_total",
            "nodescope_recommender_groups_too_large",
            "nodescope_recommender_keys",
            "nodescope_recommender_metrics_source_up",
            "nodescope_recommender_samples_dropped_total",
            "nodescope_recommender_samples_total",
            "nodescope_recommender_status_writes_total",
        ]
    );
    assert_eq!(
        sorted(&text),
        [
            "nodescope_build_info",
            "nodescope_leader",
            "nodescope_recommender_checkpoint_writes",
            "nodescope_recommender_groups_too_large",
            "nodescope_recommender_keys",
            "nodescope_recommender_metrics_source_up",
            "nodescope_recommender_samples",
            "nodescope_recommender_samples_dropped",
            "nodescope_recommender_status_writes",
        ],
        "{text}"
    );
    for line in [
        r#"nodescope_recommender_status_writes_total{result="failure"} 0"#,
        r#"nodescope_recommender_checkpoint_writes_total{result="failure"} 0"#,
        r#"nodescope_leader{lease="nodescope-system/nodescope-recommender"} 0"#,
        "nodescope_recommender_samples_total 0",
        "nodescope_recommender_groups_too_large 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
}

#[test]
fn a_fresh_features_controller_exports_exactly_its_families() {
    let metrics = FeaturesMetrics::new("nodescope-system/nodescope-features");
    let text = metrics.render();
    assert_eq!(
        sorted_samples(metrics.registry()),
        [
            "nodescope_build_info",
            "nodescope_feature_cleanup_patches_total",
            "nodescope_feature_reports_missing",
            "nodescope_feature_state",
            "nodescope_feature_transitions_total",
            "nodescope_feature_uses",
            "nodescope_http_responses_total",
            "nodescope_leader"
        ]
    );
    // The per-Feature gauges have series from the leader's first pass.
    assert_eq!(
        sorted(&text),
        [
            "nodescope_build_info",
            "nodescope_feature_cleanup_patches",
            "nodescope_feature_transitions",
            "nodescope_leader"
        ],
        "{text}"
    );
    for line in [
        r#"nodescope_leader{lease="nodescope-system/nodescope-features"} 0"#,
        r#"nodescope_feature_cleanup_patches_total{result="conflict"} 0"#,
        r#"nodescope_feature_cleanup_patches_total{result="failed"} 0"#,
        r#"nodescope_feature_transitions_total{from="TurningOff",to="Off"} 0"#,
        r#"nodescope_feature_transitions_total{from="none",to="TurningOff"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    metrics
        .features
        .observe(&[nodescope::features::metrics::FeatureSample {
            namespace: "kube-system".to_owned(),
            name: "vpa-node-scope".to_owned(),
            state: Some(nodescope::features::State::TurningOff),
            uses: 3,
            reports_missing: 1,
        }]);
    let text = metrics.render();
    for line in [
        r#"nodescope_feature_state{namespace="kube-system",name="vpa-node-scope",state="TurningOff"} 1"#,
        r#"nodescope_feature_state{namespace="kube-system",name="vpa-node-scope",state="Off"} 0"#,
        r#"nodescope_feature_uses{namespace="kube-system",name="vpa-node-scope"} 3"#,
        r#"nodescope_feature_reports_missing{namespace="kube-system",name="vpa-node-scope"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    // A Feature gone from the next pass loses its series.
    metrics.features.observe(&[]);
    assert!(!metrics.render().contains("vpa-node-scope"));
}

/// The JSON log lines at warn whose message is `message`.
fn warnings(logs: &[String], message: &str) -> Vec<serde_json::Value> {
    logs.iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["level"] == "WARN" && v["fields"]["message"] == message)
        .collect()
}

/// Collects the server's log until `done` holds of it, for at most 10 s.
fn logs_until(server: &Server, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut logs = Vec::new();
    for _ in 0..200 {
        logs.extend(server.logs());
        if done(&logs) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    logs
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_certificate_is_counted_and_logged() {
    let server = Server::start(&[]);
    // Another CA: what a webhook with a stale caBundle trusts.
    let other = tempfile::tempdir().unwrap();
    make_certs(other.path());
    let wrong_ca = std::fs::read(other.path().join("ca.crt")).unwrap();
    for _ in 0..3 {
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let refused = tls_connector(&wrong_ca, &[b"h2"])
            .connect(
                rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                tcp,
            )
            .await;
        assert!(refused.is_err(), "the client trusted a foreign CA");
    }
    let logs = logs_until(&server, |l| warnings(l, "TLS handshake failed").len() >= 3);
    let lines = warnings(&logs, "TLS handshake failed");
    assert_eq!(lines.len(), 3, "{logs:#?}");
    for line in lines {
        let fields = &line["fields"];
        assert_eq!(fields["reason"], "certificate_rejected", "{line}");
        let peer = fields["peer"].as_str().unwrap_or_default();
        assert!(peer.starts_with("127.0.0.1:"), "{line}");
        assert!(
            fields["error"]
                .as_str()
                .unwrap_or_default()
                .contains("alert"),
            "{line}"
        );
    }
    // Logged once the count is taken, so the scrape sees all three.
    let text = scrape(&server).await;
    assert_eq!(
        metric(
            &text,
            r#"nodescope_tls_handshake_errors_total{reason="certificate_rejected"} "#
        )
        .as_deref(),
        Some("3"),
        "{text}"
    );
}

#[tokio::test]
async fn refusals_are_logged_with_peer_path_code_and_reason_and_a_flood_is_throttled() {
    let server = Server::start(&[]);
    let mut client = H1::connect(server.addr, &server.ca()).await;
    const FLOOD: usize = 300;
    for _ in 0..FLOOD {
        let reply = client.post("/admit", b"{}".to_vec()).await;
        assert_eq!(reply.status, 404);
    }
    // After the burst: one more line, which tells what was held back.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let reply = client
        .send(request(
            "POST",
            "/validate",
            Some("text/plain"),
            b"{}".to_vec(),
        ))
        .await;
    assert_eq!(reply.status, 415);
    let logs = logs_until(&server, |l| {
        warnings(l, "request refused")
            .iter()
            .any(|v| v["fields"]["code"] == 415)
    });
    let lines = warnings(&logs, "request refused");
    assert!(
        lines.len() <= 30,
        "{} lines for {FLOOD} refusals: not throttled",
        lines.len()
    );
    let first = &lines[0]["fields"];
    assert_eq!(
        (&first["path"], &first["code"], &first["reason"]),
        (&"/admit".into(), &404.into(), &"no_route".into()),
        "{first}"
    );
    assert!(first["peer"]
        .as_str()
        .unwrap_or_default()
        .starts_with("127.0.0.1:"));
    let last = &lines[lines.len() - 1]["fields"];
    assert_eq!(
        (&last["path"], &last["reason"]),
        (&"/validate".into(), &"unsupported_media_type".into()),
        "{last}"
    );
    // Every refusal is either a line or counted in a later line.
    let held_back: u64 = lines
        .iter()
        .map(|v| v["fields"]["suppressed"].as_u64().unwrap_or_default())
        .sum();
    assert_eq!(
        lines.len() as u64 + held_back,
        FLOOD as u64 + 1,
        "{lines:#?}"
    );
}

#[tokio::test]
async fn the_metrics_port_404_lists_only_what_it_serves() {
    let server = Server::start(&["--metrics-listen", "127.0.0.1:0"]);
    let plain = server.metrics_addr.expect("metrics listener address");
    let tcp = tokio::net::TcpStream::connect(plain).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let response = sender
        .send_request(request(
            "POST",
            "/validate",
            Some("application/json"),
            b"{}".to_vec(),
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&body),
        "no route for /validate: this port serves GET /healthz, GET /readyz, GET /metrics\n"
    );
    let response = sender
        .send_request(request("POST", "/metrics", None, Vec::new()))
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&body),
        "method POST is not allowed on /metrics: this port serves probes and metrics, with GET\n"
    );
}
