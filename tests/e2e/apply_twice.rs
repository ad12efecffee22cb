//! Issue #42: `kubectl apply -k` of a shipped overlay is idempotent. Applied
//! a second time it sends no write, so it succeeds while the webhook is not
//! serving (its Fail webhooks are registered by the first apply and point
//! at a Service with no endpoints), and `kubectl diff -k` exits 0, as a
//! GitOps tool that re-applies constantly needs.
//!
//! Both overlays: `self-signed` with a CA made by `nodescope certs`, and
//! `cert-manager` over stand-in CRDs for cert-manager's kinds (no
//! cert-manager runs here). Each is applied from a copy of `manifests/`,
//! so the repository's placeholder is left as it is.

use crate::support::ControlPlane;
use base64::Engine as _;
use futures::FutureExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams};
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for entry in entries.flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            copy_dir(&source, &target);
        } else {
            std::fs::copy(&source, &target).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        }
    }
}

/// cert-manager's two kinds the overlay uses, as CRDs that keep any field.
fn cert_manager_crds() -> String {
    let crd = |kind: &str, plural: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata: {{name: {plural}.cert-manager.io}}\n\
             spec:\n  group: cert-manager.io\n  scope: Namespaced\n\
             \x20 names: {{kind: {kind}, plural: {plural}, singular: {singular}, listKind: {kind}List}}\n\
             \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n\
             \x20   schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n",
            singular = kind.to_lowercase()
        )
    };
    format!(
        "{}---\n{}",
        crd("Certificate", "certificates"),
        crd("Issuer", "issuers")
    )
}

/// The self-signed overlay in `copy` made ready as scripts/self-signed.sh
/// makes it: certs/ from `nodescope certs`, the CA in the caBundle patch.
fn self_signed(copy: &Path) {
    let overlay = copy.join("overlays/self-signed");
    let certs = overlay.join("certs");
    let out = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(["certs", "--host", "nodescope.nodescope-system.svc", "--out"])
        .arg(&certs)
        .output()
        .unwrap_or_else(|e| panic!("nodescope certs: {e}"));
    assert!(
        out.status.success(),
        "nodescope certs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ca = std::fs::read(certs.join("ca.crt")).unwrap_or_else(|e| panic!("ca.crt: {e}"));
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let patch = overlay.join("cabundle-patch.yaml");
    let text = std::fs::read_to_string(&patch).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("caBundle: CA_BUNDLE"), "{text}");
    std::fs::write(
        &patch,
        text.replace("caBundle: CA_BUNDLE", &format!("caBundle: {bundle}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Every object of the overlay, by kind, namespace and name, with its
/// resourceVersion: what changes with any write the apiserver stores.
fn versions(plane: &ControlPlane, path: &str) -> Vec<(String, String)> {
    let (code, out, err) = plane.kubectl(&["get", "-k", path, "-o", "json"], root());
    assert_eq!(code, 0, "kubectl get -k {path}:\n{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}"));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let meta = &o["metadata"];
            (
                format!("{}/{}/{}", o["kind"], meta["namespace"], meta["name"]),
                meta["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

async fn apply_twice_then_diff(plane: &ControlPlane, overlay: &Path, name: &str) {
    // A first install: the webhook configurations come last in the
    // overlay's order, so nothing before them is refused while nothing
    // serves them (a balloon DaemonSet would be, by balloon-pods).
    remove_webhooks(plane).await;
    let path = overlay.display().to_string();
    let (code, out, err) = plane.kubectl(&["apply", "-k", &path], root());
    assert_eq!(
        code, 0,
        "first kubectl apply -k overlays/{name}:\n{out}\n{err}"
    );
    let before = versions(plane, &path);
    // The webhook configurations are registered now; nothing serves them.
    let (code, out, err) = plane.kubectl(&["apply", "-k", &path], root());
    assert_eq!(
        code, 0,
        "second kubectl apply -k overlays/{name}, webhook not serving:\n{out}\n{err}"
    );
    // Nothing stored changed. kubectl still sends a patch that changes
    // nothing for a PodDisruptionBudget (its selector's patch strategy is
    // replace, so client-side apply never computes an empty patch) and for
    // a Secret from a secretGenerator (kustomize wraps its base64 at 70
    // characters, the apiserver returns it unwrapped), and says
    // "configured"; no webhook of nodescope's is called for either kind.
    assert_eq!(
        versions(plane, &path),
        before,
        "the second apply wrote:\n{out}"
    );
    let patched: Vec<&str> = out.lines().filter(|l| !l.ends_with(" unchanged")).collect();
    let (code, diff, err) = plane.kubectl(&["diff", "-k", &path], root());
    assert_eq!(
        (code, diff.as_str(), err.as_str()),
        (0, "", ""),
        "kubectl diff -k overlays/{name} after two applies"
    );
    println!(
        "  overlays/{name}: applied twice (the second with the Fail webhooks registered and not \
         serving), {} objects, none written again (no-op patches: {patched:?}); kubectl diff -k \
         exits 0",
        before.len()
    );
}

/// Deletes nodescope's webhook configurations, waiting until both are gone.
async fn remove_webhooks(plane: &ControlPlane) {
    let client = plane.client().await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = mutating.delete("nodescope", &DeleteParams::default()).await;
    let _ = validating
        .delete("nodescope", &DeleteParams::default())
        .await;
    crate::support::eventually(
        "nodescope's webhook configurations gone",
        std::time::Duration::from_secs(30),
        || async {
            let m = mutating.get_opt("nodescope").await.ok()?;
            let v = validating.get_opt("nodescope").await.ok()?;
            (m.is_none() && v.is_none()).then_some(())
        },
    )
    .await;
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    let result = std::panic::AssertUnwindSafe(async {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let copy = dir.path().join("manifests");
        copy_dir(&root().join("manifests"), &copy);
        self_signed(&copy);
        apply_twice_then_diff(plane, &copy.join("overlays/self-signed"), "self-signed").await;
        // The same with every component that needs no other operator's CRDs
        // (monitoring needs the Prometheus operator's; native-policies is
        // the base's policies again).
        let all = copy.join("overlays/with-components");
        std::fs::create_dir_all(&all).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            all.join("kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [../self-signed]\ncomponents:\n\
             - ../../components/balloon\n- ../../components/recommender\n\
             - ../../components/updater\n- ../../components/upstream-updater-guard\n\
             - ../../components/vpa-crd\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        apply_twice_then_diff(plane, &all, "self-signed with components").await;
        let crds = dir.path().join("cert-manager-crds.yaml");
        std::fs::write(&crds, cert_manager_crds()).unwrap_or_else(|e| panic!("{e}"));
        let (code, out, err) = plane.kubectl(&["apply", "-f", &crds.display().to_string()], root());
        assert_eq!(code, 0, "cert-manager's stand-in CRDs:\n{out}\n{err}");
        for name in ["certificates.cert-manager.io", "issuers.cert-manager.io"] {
            crate::support::cluster::established(&client, name).await;
        }
        apply_twice_then_diff(plane, &copy.join("overlays/cert-manager"), "cert-manager").await;
    })
    .catch_unwind()
    .await;
    // As install does: the registered webhooks point at a Service with no
    // endpoints, and would refuse every later step.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = mutating.delete("nodescope", &DeleteParams::default()).await;
    let _ = validating
        .delete("nodescope", &DeleteParams::default())
        .await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
