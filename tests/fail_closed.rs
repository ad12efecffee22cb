//! Issue #42: `serve` never answers with nothing to check. A `--policies`
//! directory without the policies the webhook configurations route to, or
//! a `--store file:` without objects, stops it at start (exit 2, naming the
//! path); a reload into either is refused over TLS: the last good bundle or
//! store keeps deciding, `/readyz` says why it is not ready, the refusal is
//! counted from 0 and logged at warn.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NO_POLICY: &str = "holds no ValidatingAdmissionPolicy, so /validate would allow every \
                         request the webhooks send";
const NO_OBJECT: &str = "holds no object, so every review would be answered as if the cluster \
                         had no VPA, Feature or Namespace";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `serve` run to its end with `args`, on fresh certificates.
fn serve_output(args: &[String]) -> std::process::Output {
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path());
    Command::new(BIN)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .arg("--tls-cert")
        .arg(certs.path().join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.path().join("tls.key"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn assert_refused(args: &[String], message: &str) {
    let output = serve_output(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, format!("nodescope: {message}\n"));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
}

/// A copy of the shipped `policies/` (its YAML files, not its tests).
fn copy_policies(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(root().join("policies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn serve_refuses_to_start_on_policies_that_leave_a_webhook_nothing_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    let flag = format!("--policies={}", policies.display());
    let store = format!("--store=file:{}", root().join("examples/store").display());
    // Empty.
    assert_refused(
        &[flag.clone(), store.clone()],
        &format!("--policies {}: {NO_POLICY}", policies.display()),
    );
    // Only files that are no policy: a wrong ConfigMap mounted there.
    std::fs::copy(
        root().join("examples/store/features.yaml"),
        policies.join("features.yaml"),
    )
    .unwrap();
    assert_refused(
        &[flag.clone(), store.clone()],
        &format!("--policies {}: {NO_POLICY}", policies.display()),
    );
    // The bundle less the PriorityClass policy.
    copy_policies(&policies);
    std::fs::remove_file(policies.join("balloon-priorityclass.yaml")).unwrap();
    assert_refused(
        &[flag, store],
        &format!(
            "--policies {}: lacks ValidatingAdmissionPolicy nodescope-balloon-priorityclass, \
             which webhook balloon-priorityclass.nodescope.dev sends requests to; /validate \
             would allow them",
            policies.display()
        ),
    );
}

#[test]
fn serve_refuses_to_start_on_a_file_store_without_objects() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.yaml");
    std::fs::write(&file, "# emptied\n---\n").unwrap();
    let policies = format!("--policies={}", root().join("policies").display());
    assert_refused(
        &[format!("--store=file:{}", file.display()), policies.clone()],
        &format!("--store file:{}: {NO_OBJECT}", file.display()),
    );
    let empty_dir = dir.path().join("store");
    std::fs::create_dir(&empty_dir).unwrap();
    assert_refused(
        &[format!("--store=file:{}", empty_dir.display()), policies],
        &format!("--store file:{}: {NO_OBJECT}", empty_dir.display()),
    );
}

async fn get(server: &Server, path: &str) -> (u16, String) {
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.send(request("GET", path, None, Vec::new())).await;
    (reply.status, reply.text())
}

/// Polls `/readyz` until its status is `status`; returns its body.
async fn wait_for_readyz(server: &Server, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (now, body) = get(server, "/readyz").await;
        if now == status {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {now}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn metric(server: &Server, line_start: &str) -> String {
    let (_, text) = get(server, "/metrics").await;
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .unwrap_or_else(|| panic!("{line_start} not in:\n{text}"))
        .trim()
        .to_owned()
}

/// The warn lines logged so far with `message`, as JSON.
fn warnings(server: &Server, message: &str) -> Vec<Value> {
    server
        .logs()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["level"] == "WARN" && v["fields"]["message"] == message)
        .collect()
}

/// A pod that borrows the node-balloon priority without the balloon label.
fn borrowing_pod() -> Vec<u8> {
    let mut v: Value =
        serde_json::from_slice(&fixture("pod-node-exporter-node-a-1-create.validate.json"))
            .unwrap();
    v["request"]["object"]["spec"]["priorityClassName"] = json!("node-balloon");
    serde_json::to_vec(&v).unwrap()
}

async fn assert_borrowing_denied(server: &Server) {
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client.post("/validate", borrowing_pod()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.json()["response"]["status"]["message"],
        "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' \
         denied request: priorityClassName \"node-balloon\" is reserved for pods labelled \
         node.kubernetes.io/balloon: \"true\""
    );
}

const REFUSED_POLICIES: &str = "nodescope_reloads_refused_total{source=\"policies\"} ";
const REFUSED_STORE: &str = "nodescope_reloads_refused_total{source=\"store\"} ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_reload_that_drops_routed_policies_is_refused_and_said_on_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    copy_policies(&policies);
    let server = Server::start(&[
        &format!("--policies={}", policies.display()),
        "--reload-interval=1",
    ]);
    assert_eq!(get(&server, "/readyz").await, (200, "ok\n".to_owned()));
    assert_eq!(metric(&server, REFUSED_POLICIES).await, "0");
    assert_borrowing_denied(&server).await;

    // Every policy file deleted: the directory is still there, and empty.
    // (Swapped in whole, so that no reload sees half of the deletion.)
    let emptied = dir.path().join("emptied");
    std::fs::create_dir(&emptied).unwrap();
    std::fs::rename(&policies, dir.path().join("old")).unwrap();
    std::fs::rename(&emptied, &policies).unwrap();
    let body = wait_for_readyz(&server, 503).await;
    assert_eq!(
        body,
        format!(
            "not ready: the reload of --policies {} was refused: it {NO_POLICY}; the last good \
             bundle still serves\n",
            policies.display()
        )
    );
    assert_eq!(metric(&server, REFUSED_POLICIES).await, "1");
    assert_borrowing_denied(&server).await;
    let logged = warnings(
        &server,
        "policy reload refused; keeping the previous bundle",
    );
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(
        logged[0]["fields"]["path"],
        policies.display().to_string().as_str()
    );
    assert_eq!(logged[0]["fields"]["error"], NO_POLICY);

    // The bundle back but for node-resizer: refused, named, still unready.
    let staging = dir.path().join("staging");
    copy_policies(&staging);
    std::fs::remove_file(staging.join("node-resizer.yaml")).unwrap();
    std::fs::remove_dir(&policies).unwrap();
    std::fs::rename(&staging, &policies).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&server, REFUSED_POLICIES).await != "2" {
        assert!(
            Instant::now() < deadline,
            "the second reload was not refused"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        get(&server, "/readyz").await,
        (
            503,
            format!(
                "not ready: the reload of --policies {} was refused: it lacks \
                 ValidatingAdmissionPolicy nodescope-node-resizer, which webhooks \
                 balloon-pods.nodescope.dev, node-resizer.nodescope.dev send requests to; \
                 /validate would allow them; the last good bundle still serves\n",
                policies.display()
            )
        )
    );
    assert_borrowing_denied(&server).await;

    // Whole again: taken, and ready.
    std::fs::copy(
        root().join("policies/node-resizer.yaml"),
        policies.join("node-resizer.yaml"),
    )
    .unwrap();
    assert_eq!(wait_for_readyz(&server, 200).await, "ok\n");
    assert_eq!(metric(&server, REFUSED_POLICIES).await, "2");
    assert_borrowing_denied(&server).await;
}

/// The cpu request /mutate sets on the captured pod's first container.
async fn patched_cpu(server: &Server) -> Option<String> {
    use base64::Engine;
    let mut client = H1::connect(server.addr, &server.ca()).await;
    let reply = client
        .post(
            "/mutate",
            fixture("pod-node-exporter-node-a-1-create.mutate.json"),
        )
        .await;
    let patch = reply.json()["response"]["patch"].as_str()?.to_owned();
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .unwrap();
    let ops: Value = serde_json::from_slice(&patch).unwrap();
    ops.as_array()?.iter().find_map(|op| {
        (op["path"] == "/spec/containers/0/resources/requests/cpu")
            .then(|| op["value"].as_str().unwrap_or_default().to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_store_emptied_while_serving_is_refused_and_said_on_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store.yaml");
    let whole: String = [
        "features.yaml",
        "monitoring-namespace.yaml",
        "node-exporter-vpa.yaml",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(root().join("examples/store").join(f)).unwrap())
    .collect::<Vec<_>>()
    .join("\n---\n");
    std::fs::write(&store, &whole).unwrap();
    let server = Server::start(&[
        &format!("--store=file:{}", store.display()),
        "--reload-interval=1",
    ]);
    assert_eq!(get(&server, "/readyz").await, (200, "ok\n".to_owned()));
    assert_eq!(metric(&server, REFUSED_STORE).await, "0");
    assert_eq!(patched_cpu(&server).await.as_deref(), Some("150m"));

    std::fs::write(&store, "").unwrap();
    let body = wait_for_readyz(&server, 503).await;
    assert_eq!(
        body,
        format!(
            "not ready: the reload of --store file:{} was refused: it {NO_OBJECT}; the last \
             good snapshot still serves\n",
            store.display()
        )
    );
    assert_eq!(metric(&server, REFUSED_STORE).await, "1");
    assert_eq!(patched_cpu(&server).await.as_deref(), Some("150m"));
    let logged = warnings(
        &server,
        "store reload refused: it holds no object; keeping the previous snapshot",
    );
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(
        logged[0]["fields"]["path"],
        store.display().to_string().as_str()
    );

    // Refilled: taken, and ready.
    std::fs::write(&store, &whole).unwrap();
    assert_eq!(wait_for_readyz(&server, 200).await, "ok\n");
    assert_eq!(patched_cpu(&server).await.as_deref(), Some("150m"));
}
