//! nodescope beside the control plane: the real binary with `--store kube`
//! (reading the control plane through `KUBECONFIG`), and the shipped webhook
//! configurations pointed at it by loopback `url:`, as the apiserver would
//! call a webhook outside the cluster.

use super::ControlPlane;
use crate::common::{self, Server, H1};
use base64::Engine as _;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Starts `nodescope serve --store kube` and waits until it is ready (its
/// watches have synced).
pub async fn start(plane: &ControlPlane, extra: &[&str]) -> Server {
    start_with_certs(
        plane,
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
        extra,
    )
    .await
}

pub async fn start_with_certs(
    _plane: &ControlPlane,
    certs: tempfile::TempDir,
    extra: &[&str],
) -> Server {
    if !certs.path().join("tls.crt").exists() {
        common::make_certs(certs.path());
    }
    let mut args = vec!["--store=kube"];
    args.extend_from_slice(extra);
    let server = Server::start_with_certs(certs, &args);
    let ca = server.ca();
    super::eventually("nodescope /readyz", Duration::from_secs(60), || {
        let ca = ca.clone();
        let addr = server.addr;
        async move {
            let mut client = H1::connect(addr, &ca).await;
            let reply = client
                .send(common::request("GET", "/readyz", None, Vec::new()))
                .await;
            (reply.status == 200).then_some(())
        }
    })
    .await;
    server
}

/// The shipped webhook configuration in `file` (under
/// `manifests/base/webhooks/`), renamed to `name` and with every webhook's
/// `clientConfig` pointing at `server` by URL.
pub fn webhook_configuration(file: &str, name: &str, server: &Server) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests/base/webhooks")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut config: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    config["metadata"]["name"] = Value::String(name.to_owned());
    let ca = base64::engine::general_purpose::STANDARD.encode(server.ca());
    for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
        let route = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap_or("/validate")
            .to_owned();
        webhook["clientConfig"] = serde_json::json!({
            "url": format!("https://127.0.0.1:{}{route}", server.addr.port()),
            "caBundle": ca,
        });
    }
    config
}

/// The text a component serves on `http://127.0.0.1:{port}/metrics`
/// (empty while it does not answer).
pub async fn scrape(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["-s", &url])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default()
}
