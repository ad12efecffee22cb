//! Which kinds exist, and their REST resource and scope.
//!
//! A dry run that guessed the resource of a kind it did not know (`Pods`
//! becoming `podses`) matched no policy and reported "allowed": a CI gate
//! passing what it never checked. So a manifest's kind must be one the
//! apiserver would serve: a Kubernetes built-in (taken from `k8s-openapi`, so
//! the plurals and scopes are the API's own, not an English guess), a kind
//! nodescope itself reads (the VerticalPodAutoscaler, the bundle's
//! `Feature`), or a kind defined by a CustomResourceDefinition among the
//! inputs.

use super::review::group_version;
use crate::json::str_at;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

/// How the apiserver serves one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// The REST resource, e.g. `priorityclasses`.
    pub resource: String,
    pub namespaced: bool,
    /// The versions served, in the order they were learnt.
    pub versions: Vec<String>,
}

/// `(group, kind)` to how it is served.
type Table = HashMap<(String, String), KindInfo>;

/// The kinds a run knows: the built-ins plus the CRDs among its inputs.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    /// CRD-defined kinds; they may also redefine a built-in one.
    defined: Table,
}

/// Whether a `k8s-openapi` scope is a namespace's; subresources (Scale,
/// Eviction) have no such impl, so they cannot be listed by mistake.
trait Scope {
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// `(group, version, kind, resource, namespaced)` of each listed type.
macro_rules! builtin_kinds {
    ($($path:path),* $(,)?) => {
        &[$((
            <$path as k8s_openapi::Resource>::GROUP,
            <$path as k8s_openapi::Resource>::VERSION,
            <$path as k8s_openapi::Resource>::KIND,
            <$path as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            <<$path as k8s_openapi::Resource>::Scope as Scope>::NAMESPACED,
        )),*]
    };
}

type Builtin = (&'static str, &'static str, &'static str, &'static str, bool);

/// Every top-level resource type of the Kubernetes API that `k8s-openapi`
/// (the version the `kube` client is built for) describes.
const BUILTIN: &[Builtin] = {
    use k8s_openapi::api::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
    builtin_kinds![
        admissionregistration::v1::MutatingWebhookConfiguration,
        admissionregistration::v1::ValidatingAdmissionPolicy,
        admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        admissionregistration::v1::ValidatingWebhookConfiguration,
        admissionregistration::v1alpha1::MutatingAdmissionPolicy,
        admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
        admissionregistration::v1beta1::ValidatingAdmissionPolicy,
        admissionregistration::v1beta1::ValidatingAdmissionPolicyBinding,
        apiserverinternal::v1alpha1::StorageVersion,
        apps::v1::ControllerRevision,
        apps::v1::DaemonSet,
        apps::v1::Deployment,
        apps::v1::ReplicaSet,
        apps::v1::StatefulSet,
        authentication::v1::SelfSubjectReview,
        authentication::v1::TokenReview,
        authorization::v1::LocalSubjectAccessReview,
        authorization::v1::SelfSubjectAccessReview,
        authorization::v1::SelfSubjectRulesReview,
        authorization::v1::SubjectAccessReview,
        autoscaling::v1::HorizontalPodAutoscaler,
        autoscaling::v2::HorizontalPodAutoscaler,
        batch::v1::CronJob,
        batch::v1::Job,
        certificates::v1::CertificateSigningRequest,
        certificates::v1alpha1::ClusterTrustBundle,
        certificates::v1beta1::ClusterTrustBundle,
        coordination::v1::Lease,
        coordination::v1alpha2::LeaseCandidate,
        coordination::v1beta1::LeaseCandidate,
        core::v1::Binding,
        core::v1::ComponentStatus,
        core::v1::ConfigMap,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::LimitRange,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolume,
        core::v1::PersistentVolumeClaim,
        core::v1::Pod,
        core::v1::PodTemplate,
        core::v1::ReplicationController,
        core::v1::ResourceQuota,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        discovery::v1::EndpointSlice,
        events::v1::Event,
        flowcontrol::v1::FlowSchema,
        flowcontrol::v1::PriorityLevelConfiguration,
        networking::v1::IPAddress,
        networking::v1::Ingress,
        networking::v1::IngressClass,
        networking::v1::NetworkPolicy,
        networking::v1::ServiceCIDR,
        networking::v1beta1::IPAddress,
        networking::v1beta1::ServiceCIDR,
        node::v1::RuntimeClass,
        policy::v1::PodDisruptionBudget,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        resource::v1alpha3::DeviceClass,
        resource::v1alpha3::DeviceTaintRule,
        resource::v1alpha3::ResourceClaim,
        resource::v1alpha3::ResourceClaimTemplate,
        resource::v1alpha3::ResourceSlice,
        resource::v1beta1::DeviceClass,
        resource::v1beta1::ResourceClaim,
        resource::v1beta1::ResourceClaimTemplate,
        resource::v1beta1::ResourceSlice,
        resource::v1beta2::DeviceClass,
        resource::v1beta2::ResourceClaim,
        resource::v1beta2::ResourceClaimTemplate,
        resource::v1beta2::ResourceSlice,
        scheduling::v1::PriorityClass,
        storage::v1::CSIDriver,
        storage::v1::CSINode,
        storage::v1::CSIStorageCapacity,
        storage::v1::StorageClass,
        storage::v1::VolumeAttachment,
        storage::v1alpha1::VolumeAttributesClass,
        storage::v1beta1::VolumeAttributesClass,
        storagemigration::v1alpha1::StorageVersionMigration,
        apiextensions::v1::CustomResourceDefinition,
        apiregistration::v1::APIService,
    ]
};

/// The VerticalPodAutoscaler is installed by the VPA project, not by the
/// bundle, but nodescope's webhook is about it, so it is always known.
const NODESCOPE: &[Builtin] = &[
    (
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
    (
        "autoscaling.k8s.io",
        "v1beta2",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
        true,
    ),
];

/// The built-ins, nodescope's own kinds and the CRDs of the bundle.
static KNOWN: LazyLock<Table> = LazyLock::new(|| {
    let mut table = Table::new();
    for &(group, version, kind, resource, namespaced) in BUILTIN.iter().chain(NODESCOPE) {
        insert(&mut table, group, version, kind, resource, namespaced);
    }
    for (file, text) in crate::policy::bundle::FILES {
        let source = crate::policy::bundle::source_name(file);
        for document in crate::manifest::parse_documents(&source, text).unwrap_or_default() {
            // The bundle's CRDs are checked by its tests; a broken one
            // would only be missing here.
            let _ = add_crd(&mut table, &document.value);
        }
    }
    table
});

fn insert(
    table: &mut Table,
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    namespaced: bool,
) {
    let info = table
        .entry((group.to_owned(), kind.to_owned()))
        .or_insert_with(|| KindInfo {
            resource: resource.to_owned(),
            namespaced,
            versions: Vec::new(),
        });
    info.resource = resource.to_owned();
    info.namespaced = namespaced;
    if !info.versions.iter().any(|v| v == version) {
        info.versions.push(version.to_owned());
    }
}

/// Whether `value` is a CustomResourceDefinition.
#[must_use]
pub fn is_crd(value: &Value) -> bool {
    str_at(value, "/kind") == "CustomResourceDefinition"
        && str_at(value, "/apiVersion").starts_with("apiextensions.k8s.io/")
}

/// Learns the kind a CRD defines; nothing for other objects.
fn add_crd(table: &mut Table, crd: &Value) -> Result<(), String> {
    if !is_crd(crd) {
        return Ok(());
    }
    let group = str_at(crd, "/spec/group");
    let kind = str_at(crd, "/spec/names/kind");
    let plural = str_at(crd, "/spec/names/plural");
    for (field, value) in [
        ("spec.group", group),
        ("spec.names.kind", kind),
        ("spec.names.plural", plural),
    ] {
        if value.is_empty() {
            return Err(format!(
                "CustomResourceDefinition has no `{field}`, so the kind it defines is unknown"
            ));
        }
    }
    let namespaced = match str_at(crd, "/spec/scope") {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "CustomResourceDefinition `spec.scope` must be Namespaced or Cluster, not {other:?}"
            ))
        }
    };
    let versions: Vec<&str> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                .map(|v| str_at(v, "/name"))
                .filter(|name| !name.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(
            "CustomResourceDefinition serves no version (`spec.versions[].name`)".to_owned(),
        );
    }
    for version in versions {
        insert(table, group, version, kind, plural, namespaced);
    }
    Ok(())
}

impl Kinds {
    /// Learns the kind `crd` defines when it is a CustomResourceDefinition.
    ///
    /// # Errors
    /// A CRD without a group, kind, plural, scope or served version: why.
    pub fn learn(&mut self, crd: &Value) -> Result<(), String> {
        add_crd(&mut self.defined, crd)
    }

    fn info(&self, group: &str, kind: &str) -> Option<&KindInfo> {
        let key = (group.to_owned(), kind.to_owned());
        self.defined.get(&key).or_else(|| KNOWN.get(&key))
    }

    /// How `apiVersion`/`kind` is served.
    ///
    /// # Errors
    /// Why it is unknown, with a suggestion when one is close:
    /// `unknown kind "Pods" (apiVersion v1): did you mean "Pod"?`.
    pub fn lookup(&self, api_version: &str, kind: &str) -> Result<&KindInfo, String> {
        let (group, version) = group_version(api_version);
        match self.info(group, kind) {
            Some(info) if info.versions.iter().any(|v| v == version) => return Ok(info),
            Some(info) => {
                return Err(format!(
                    "unknown kind {kind:?} (apiVersion {api_version}): {kind} is served as {}",
                    or_list(info.versions.iter().map(|v| join(group, v)))
                ))
            }
            None => {}
        }
        let unknown = format!("unknown kind {kind:?} (apiVersion {api_version})");
        let all = || self.defined.iter().chain(KNOWN.iter());
        let mut elsewhere: Vec<String> = all()
            .filter(|((_, k), _)| k == kind)
            .flat_map(|((g, _), info)| info.versions.iter().map(|v| join(g, v)))
            .collect();
        if !elsewhere.is_empty() {
            elsewhere.sort();
            elsewhere.dedup();
            return Err(format!(
                "{unknown}: {kind} is served as {}",
                or_list(elsewhere.into_iter())
            ));
        }
        let wanted = kind.to_lowercase();
        let suggestion = all()
            .map(|((g, k), _)| (distance(&wanted, &k.to_lowercase()), g != group, k))
            .filter(|(d, _, _)| *d <= 2)
            .min();
        match suggestion {
            Some((_, _, close)) => Err(format!("{unknown}: did you mean {close:?}?")),
            None => Err(format!(
                "{unknown}: it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"
            )),
        }
    }
}

fn join(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(current)
            };
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
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
            Err(r#"unknown kind "DaemonSet" (apiVersion apps/v1beta2): DaemonSet is served as apps/v1"#.to_owned())
        );
        assert_eq!(
            kinds.lookup("cert-manager.io/v1", "Issuer"),
            Err(r#"unknown kind "Issuer" (apiVersion cert-manager.io/v1): it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"#.to_owned())
        );
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
}
