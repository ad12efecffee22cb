//! Kustomizations, rendered with `kubectl kustomize` as `kubectl apply -k`
//! would render them, on the repository's own `manifests/`.

use super::*;

/// kubectl must be on PATH for rendering; say so plainly when it is not,
/// rather than fail on an unexpected message.
fn require_kubectl() {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "these tests render kustomizations: kubectl must be on PATH"
    );
}

#[test]
fn a_kustomization_is_rendered_with_k_and_when_its_directory_is_given_to_f() {
    require_kubectl();
    let rendered = nodescope(&["dry-run", "-k", "manifests"]);
    assert_exit(&rendered, 0);
    golden("manifests.table.txt", &stdout(&rendered));
    let text = stdout(&rendered);
    assert!(
        text.contains("\nPriorityClass/node-balloon  "),
        "the base's PriorityClass is among the rendered objects:\n{text}"
    );
    for args in [
        ["dry-run", "-f", "manifests"],
        ["dry-run", "-f", "manifests/kustomization.yaml"],
    ] {
        let output = nodescope(&args);
        assert_exit(&output, 0);
        assert_eq!(stdout(&output), text, "{args:?}");
    }
}

#[test]
fn a_directory_of_kustomizations_given_to_f_renders_each_and_reads_the_rest() {
    require_kubectl();
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("written");
    };
    let configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n";
    for overlay in ["a", "b"] {
        write(&format!("{overlay}/settings.yaml"), configmap);
        write(
            &format!("{overlay}/kustomization.yaml"),
            &format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: {overlay}-\nresources: [settings.yaml]\n"),
        );
    }
    write("plain.yaml", configmap);
    let path = dir.path().to_str().expect("utf-8");
    let output = nodescope(&["dry-run", "-f", path, "-o", "json"]);
    assert_exit(&output, 0);
    let report = json_report(&output);
    let objects: Vec<(String, String)> = report["objects"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|o| {
                    (
                        o["object"].as_str().unwrap_or("").to_owned(),
                        o["source"]["file"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        objects,
        [
            (
                "ConfigMap/default/a-settings".to_owned(),
                format!("{path}/a/kustomization.yaml")
            ),
            (
                "ConfigMap/default/b-settings".to_owned(),
                format!("{path}/b/kustomization.yaml")
            ),
            (
                "ConfigMap/default/settings".to_owned(),
                format!("{path}/plain.yaml")
            ),
        ]
    );
}

#[test]
fn a_kustomization_that_renders_an_unknown_kind_is_exit_2_naming_the_document() {
    require_kubectl();
    let output = nodescope(&["dry-run", "-k", "manifests/overlays/cert-manager"]);
    fails_with(
        &output,
        r#"manifests/overlays/cert-manager/kustomization.yaml: document 24: unknown kind "Certificate" (apiVersion cert-manager.io/v1): it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"#,
    );
}

#[test]
fn a_kustomization_kubectl_cannot_render_is_exit_2_with_kubectls_reason() {
    require_kubectl();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [missing.yaml]\n",
    )
    .expect("written");
    let path = dir.path().to_str().expect("utf-8");
    let output = nodescope(&["dry-run", "-k", path]);
    // kubectl's own words (v1.32), which repeat themselves; ours do not.
    let missing = format!("{path}/missing.yaml");
    fails_with(
        &output,
        &format!(
            "{path}: `kubectl kustomize` failed: accumulating resources: accumulation err='accumulating resources from 'missing.yaml': evalsymlink failure on '{missing}' : lstat {missing}: no such file or directory': must build at directory: not a valid directory: evalsymlink failure on '{missing}' : lstat {missing}: no such file or directory"
        ),
    );
}

#[test]
fn without_kubectl_on_path_a_kustomization_is_exit_2_naming_the_directory() {
    let empty = tempfile::tempdir().expect("tempdir");
    for args in [
        ["dry-run", "-k", "manifests"],
        ["dry-run", "-f", "manifests"],
    ] {
        let output = command(&args)
            .env("PATH", empty.path())
            .output()
            .expect("the binary runs");
        fails_with(
            &output,
            "manifests: rendering this kustomization needs `kubectl kustomize`, and kubectl is not on PATH",
        );
    }
}

#[test]
fn k_on_a_directory_without_a_kustomization_is_exit_2() {
    let output = nodescope(&["dry-run", "-k", "examples/manifests"]);
    fails_with(
        &output,
        "-k examples/manifests: not a directory with a kustomization.yaml, kustomization.yml or Kustomization",
    );
}
