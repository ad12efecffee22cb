//! `scope: node` is admitted with a warning that upstream reads `node` as a
//! label key (`policies/vpa-scope-portable.yaml`, bound with
//! `validationActions: [Warn]`), and kubectl shows it as `Warning: ...`:
//! from the apiserver enforcing the policy natively, then from nodescope's
//! `/validate` registered as the shipped webhooks. A VPA scoped by
//! `kubernetes.io/hostname` gets no warning from either.

use crate::support::cluster;
use crate::support::enforcement::{Bundle, Enforcers, Mode};
use crate::support::nodescope as ns;
use crate::support::ControlPlane;
use serde_json::json;
use std::path::Path;

const WARNING: &str = "Warning: Validation failed for ValidatingAdmissionPolicy 'nodescope-vpa-scope-portable' \
     with binding 'nodescope-vpa-scope-portable': spec.scope \"node\" means the node's name to nodescope \
     (KEP-4943), but upstream VPA's DaemonSetScope reads it as a node label key \"node\", which nodes \
     rarely carry, so there every pod would share one \"__absent__\" group; spec.scope \
     \"kubernetes.io/hostname\" gives one group per node in both";

fn vpa_file(dir: &Path, name: &str, scope: &str) -> String {
    let path = dir.join(format!("{name}-{}.json", scope.replace('/', "_")));
    let vpa = json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}, "scope": scope},
    });
    std::fs::write(&path, vpa.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.display().to_string()
}

/// The one-line recipe of docs/operations.md, run as written (bash, with
/// the suite's kubectl first on PATH): it rewrites every VPA with
/// `scope: node` to `kubernetes.io/hostname` and leaves the others.
async fn rewrite_recipe(plane: &ControlPlane, dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/operations.md")).unwrap_or_default();
    let recipe = guide
        .split("To rewrite\nevery existing VPA in one line")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|block| block.split("\n```").next())
        .unwrap_or_else(|| panic!("docs/operations.md: no rewrite recipe"))
        .to_owned();
    for (name, scope) in [
        ("rewrite-a", "node"),
        ("rewrite-b", "node"),
        ("rewrite-c", "topology.kubernetes.io/zone"),
    ] {
        let file = vpa_file(dir, name, scope);
        let (code, out, err) = plane.kubectl(&["create", "--validate=false", "-f", &file], root);
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let kubectl = plane
        .kubectl
        .clone()
        .unwrap_or_else(|| panic!("no kubectl"));
    let path = format!(
        "{}:{}",
        kubectl.parent().unwrap_or(Path::new(".")).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &recipe])
        .env("KUBECONFIG", &plane.kubeconfig)
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("bash: {e}"));
    assert!(
        out.status.success(),
        "{recipe}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client = plane.client().await;
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client,
        "default",
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler"),
            "verticalpodautoscalers",
        ),
    );
    let mut scopes = Vec::new();
    for name in ["rewrite-a", "rewrite-b", "rewrite-c"] {
        let vpa = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        scopes.push(
            vpa.data["spec"]["scope"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        let _ = api.delete(name, &Default::default()).await;
    }
    assert_eq!(
        scopes,
        [
            "kubernetes.io/hostname",
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone"
        ],
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    println!(
        "  the rewrite recipe of docs/operations.md: {}",
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .replace('\n', "; ")
    );
}

/// kubectl's stderr warnings, one per line.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("Warning: "))
        .collect()
}

pub async fn run(plane: &ControlPlane) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await;
    let bundle = Bundle::read(root);
    for object in bundle
        .crds
        .iter()
        .chain(&bundle.policies)
        .chain(&bundle.keepers)
    {
        cluster::apply(&client, object).await;
    }
    let server = ns::start(plane, &[]).await;
    let enforcers = Enforcers::new(&bundle, &server);
    for mode in [Mode::Native, Mode::Webhook] {
        enforcers.switch(&client, mode, true).await;
        let node = vpa_file(dir.path(), "portable", "node");
        let hostname = vpa_file(dir.path(), "portable", "kubernetes.io/hostname");
        // `--validate=false` leaves kubectl's own schema check out (what is
        // tested is the apiserver's answer), which some envtest builds fail
        // with "the server is currently unable to handle the request".
        // CREATE, dry run.
        let (code, out, err) = plane.kubectl(
            &[
                "create",
                "--validate=false",
                "--dry-run=server",
                "-f",
                &node,
            ],
            root,
        );
        assert_eq!(code, 0, "{mode:?}: {out}\n{err}");
        assert_eq!(warnings(&err), [WARNING], "{mode:?} CREATE: {err}");
        let (code, out, err) = plane.kubectl(
            &[
                "create",
                "--validate=false",
                "--dry-run=server",
                "-f",
                &hostname,
            ],
            root,
        );
        assert_eq!(code, 0, "{mode:?}: {out}\n{err}");
        assert_eq!(
            warnings(&err),
            Vec::<&str>::new(),
            "{mode:?} hostname: {err}"
        );
        // UPDATE: a hostname-scoped VPA changed to node.
        let (code, out, err) = plane.kubectl(&["apply", "--validate=false", "-f", &hostname], root);
        assert_eq!(code, 0, "{mode:?}: {out}\n{err}");
        assert_eq!(
            warnings(&err),
            Vec::<&str>::new(),
            "{mode:?} apply hostname: {err}"
        );
        let (code, out, err) = plane.kubectl(&["apply", "--validate=false", "-f", &node], root);
        assert_eq!(code, 0, "{mode:?}: {out}\n{err}");
        assert_eq!(warnings(&err), [WARNING], "{mode:?} UPDATE: {err}");
        let (code, out, err) = plane.kubectl(
            &["delete", "vpa", "portable", "-n", "default", "--wait=false"],
            root,
        );
        assert_eq!(code, 0, "{mode:?}: {out}\n{err}");
        enforcers.switch(&client, mode, false).await;
        println!("  {mode:?}: kubectl shows the warning on CREATE and UPDATE of scope node, none for kubernetes.io/hostname");
    }
    rewrite_recipe(plane, dir.path()).await;
    drop(server);
    for object in bundle.keepers.iter().chain(&bundle.policies) {
        cluster::delete(&client, object).await;
    }
}
