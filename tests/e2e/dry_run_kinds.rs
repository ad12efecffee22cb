//! `dry-run`'s kinds against a real apiserver. With `--kubeconfig`, a kind
//! only a CRD of the cluster defines is checked (its plural and scope from
//! discovery) and a version the CRD does not serve is refused; without it,
//! the same manifest is unknown, and dry-run does not connect even with
//! `KUBECONFIG` set. Then the built-in table is held to this apiserver:
//! when it is the release the table was captured from, every kind and
//! version its discovery lists for the built-in groups is a row the table
//! serves by default, and the other way round.

use crate::support::cluster::{apply, delete, established};
use crate::support::ControlPlane;
use nodescope::apiserver::builtin;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::process::Command;

const CRD: &str = "gadgets.dryrun.e2e.nodescope.dev";

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": "dryrun.e2e.nodescope.dev", "scope": "Cluster",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v2", "served": false, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

/// `nodescope dry-run ARGS -f -` with `stdin`: (exit code, stdout, stderr).
fn dry_run(args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodescope"))
        .args(["dry-run", "-f", "-"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("nodescope dry-run: {e}"));
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    let output = child.wait_with_output().expect("dry-run finishes");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    apply(&client, &crd()).await;
    established(&client, CRD).await;
    let kubeconfig = plane.kubeconfig.to_str().expect("utf-8 path");
    let gadget = "apiVersion: dryrun.e2e.nodescope.dev/v1\nkind: Gadget\nmetadata:\n  name: g\n";

    let (code, out, err) = dry_run(&["--kubeconfig", kubeconfig, "-o", "json"], gadget);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    // The CRD's plural, and its cluster scope: no namespace defaulted.
    assert_eq!(report["objects"][0]["object"], "Gadget/g", "{out}");
    assert_eq!(report["objects"][0]["resource"], "gadgets", "{out}");

    let v2 = gadget.replace("/v1", "/v2");
    let (code, out, err) = dry_run(&["--kubeconfig", kubeconfig], &v2);
    assert_eq!((code, out.as_str()), (2, ""), "stderr:\n{err}");
    assert_eq!(
        err,
        "nodescope: <stdin>: document 1 (line 1): unknown kind \"Gadget\" (apiVersion dryrun.e2e.nodescope.dev/v2): Gadget is served as dryrun.e2e.nodescope.dev/v1\n"
    );

    // Offline (KUBECONFIG is set for the whole suite, and not read).
    let (code, _, err) = dry_run(&[], gadget);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        "nodescope: <stdin>: document 1 (line 1): unknown kind \"Gadget\" (apiVersion dryrun.e2e.nodescope.dev/v1): it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it\n"
    );
    delete(&client, &crd()).await;

    if plane.version != builtin::VERSION {
        println!(
            "  the built-in table is of {}, the apiserver {}: not compared",
            builtin::VERSION,
            plane.version
        );
        return;
    }
    let served = served_built_ins(&client).await;
    let table: BTreeSet<String> = builtin::SERVED
        .iter()
        .filter(|row| row.by_default)
        .map(|row| {
            format!(
                "{} {} {} {}",
                row.api_version, row.kind, row.resource, row.namespaced
            )
        })
        .collect();
    let only_served: Vec<&String> = served.difference(&table).collect();
    let only_table: Vec<&String> = table.difference(&served).collect();
    assert!(
        only_served.is_empty() && only_table.is_empty(),
        "the apiserver serves, the table lacks: {only_served:#?}\nthe table has, the apiserver does not serve: {only_table:#?}"
    );
    println!(
        "  the built-in table is {} kinds at their versions, as this apiserver serves them",
        table.len()
    );
}

/// `apiVersion kind resource namespaced` of every top-level resource the
/// apiserver's discovery lists, but for the groups of CRDs (earlier steps
/// install some).
async fn served_built_ins(client: &kube::Client) -> BTreeSet<String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let crd_groups: BTreeSet<String> = crds
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("listing CRDs: {e}"))
        .items
        .into_iter()
        .map(|crd| crd.spec.group)
        .collect();
    let mut lists = Vec::new();
    let core = client.list_core_api_versions().await.expect("/api");
    for version in core.versions {
        let list = client.list_core_api_resources(&version).await;
        lists.push((version, list.expect("/api/VERSION")));
    }
    let groups = client.list_api_groups().await.expect("/apis");
    for group in groups.groups {
        if crd_groups.contains(&group.name) {
            continue;
        }
        for version in group.versions {
            let list = client
                .list_api_group_resources(&version.group_version)
                .await;
            lists.push((version.group_version, list.expect("/apis/GROUP/VERSION")));
        }
    }
    let mut served = BTreeSet::new();
    for (group_version, list) in lists {
        for resource in list.resources {
            if !resource.name.contains('/') {
                served.insert(format!(
                    "{group_version} {} {} {}",
                    resource.kind, resource.name, resource.namespaced
                ));
            }
        }
    }
    served
}
