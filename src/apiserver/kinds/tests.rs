//! Lookups in the built-in table, in a cluster's, and of kinds CRDs define.

use super::*;
use serde_json::json;

#[test]
fn built_in_kinds_have_the_apis_own_resource_and_scope() {
    let kinds = Kinds::default();
    let pc = kinds.lookup("scheduling.k8s.io/v1", "PriorityClass");
    assert_eq!(
        pc.map(|i| (i.resource.as_str(), i.namespaced)),
        Ok(("priorityclasses", false))
    );
    let ep = kinds.lookup("v1", "Endpoints");
    assert_eq!(ep.map(|i| i.resource.as_str()), Ok("endpoints"));
    let vpa = kinds.lookup("autoscaling.k8s.io/v1", "VerticalPodAutoscaler");
    assert_eq!(vpa.map(|i| i.namespaced), Ok(true));
    let feature = kinds.lookup("featureflags.nodescope.dev/v1alpha1", "Feature");
    assert_eq!(feature.map(|i| i.resource.as_str()), Ok("features"));
}

#[test]
fn a_misspelled_kind_is_unknown_and_the_close_one_suggested() {
    let kinds = Kinds::default();
    assert_eq!(
        kinds.lookup("v1", "Pods"),
        Err(r#"unknown kind "Pods" (apiVersion v1): did you mean "Pod"?"#.to_owned())
    );
    assert_eq!(
        kinds.lookup("v1", "pod"),
        Err(r#"unknown kind "pod" (apiVersion v1): did you mean "Pod"?"#.to_owned())
    );
    assert_eq!(
        kinds.lookup("v1", "Deployment"),
        Err(
            r#"unknown kind "Deployment" (apiVersion v1): Deployment is served as apps/v1"#
                .to_owned()
        )
    );
    assert_eq!(
        kinds.lookup("apps/v1beta2", "DaemonSet"),
        Err(
            r#"unknown kind "DaemonSet" (apiVersion apps/v1beta2): DaemonSet is served as apps/v1"#
                .to_owned()
        )
    );
    assert_eq!(
        kinds.lookup("cert-manager.io/v1", "Issuer"),
        Err(r#"unknown kind "Issuer" (apiVersion cert-manager.io/v1): it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"#.to_owned())
    );
}

#[test]
fn a_cluster_s_discovery_replaces_the_built_in_kinds() {
    let row = |api_version: &str, kind: &str, resource: &str, namespaced| Discovered {
        api_version: api_version.into(),
        kind: kind.into(),
        resource: resource.into(),
        namespaced,
    };
    let kinds = Kinds::served_by(
        &[
            row("v1", "Pod", "pods", true),
            row("cert-manager.io/v1", "Issuer", "issuers", true),
        ],
        vec![(
            "metrics.k8s.io/v1beta1".into(),
            "Error from server (ServiceUnavailable): the server is currently unable to handle the request".into(),
        )],
    );
    assert_eq!(
        kinds
            .lookup("cert-manager.io/v1", "Issuer")
            .map(|i| i.resource.as_str()),
        Ok("issuers")
    );
    assert_eq!(
        kinds.lookup("apps/v1", "Deployment"),
        Err(r#"unknown kind "Deployment" (apiVersion apps/v1): the cluster does not serve it and no CustomResourceDefinition among the inputs defines it"#.to_owned())
    );
    assert_eq!(
        kinds.lookup("metrics.k8s.io/v1beta1", "PodMetrics"),
        Err(r#"unknown kind "PodMetrics" (apiVersion metrics.k8s.io/v1beta1): the cluster's discovery of metrics.k8s.io/v1beta1 failed: Error from server (ServiceUnavailable): the server is currently unable to handle the request"#.to_owned())
    );
    // nodescope's own kinds stay known where the cluster has none.
    assert!(kinds
        .lookup("autoscaling.k8s.io/v1", "VerticalPodAutoscaler")
        .is_ok());
}

#[test]
fn a_crd_among_the_inputs_defines_its_kind_at_its_served_versions() {
    let mut kinds = Kinds::default();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "issuers.cert-manager.io"},
        "spec": {"group": "cert-manager.io", "scope": "Cluster",
            "names": {"kind": "Issuer", "plural": "issuers"},
            "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}]}});
    assert_eq!(kinds.learn(&crd), Ok(()));
    let issuer = kinds.lookup("cert-manager.io/v1", "Issuer");
    assert_eq!(
        issuer.map(|i| (i.resource.as_str(), i.namespaced)),
        Ok(("issuers", false))
    );
    assert!(kinds.lookup("cert-manager.io/v0", "Issuer").is_err());
    let broken = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"group": "g", "scope": "Namespaced", "names": {"kind": "K"}, "versions": [{"name": "v1"}]}});
    assert_eq!(
        kinds.learn(&broken),
        Err("CustomResourceDefinition has no `spec.names.plural`, so the kind it defines is unknown".to_owned())
    );
}
