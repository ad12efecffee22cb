//! The captured table against itself, against `k8s-openapi` (the types the
//! client is built on), and against what [`Kinds`] answers, so that the
//! table dry-run uses is the captured discovery and nothing else.

use super::*;
use crate::apiserver::kinds::Kinds;
use crate::apiserver::review::group_version;

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

/// `(apiVersion, kind, resource, namespaced)` of each listed type.
macro_rules! openapi_kinds {
    ($($path:path),* $(,)?) => {
        &[$((
            <$path as k8s_openapi::Resource>::API_VERSION,
            <$path as k8s_openapi::Resource>::KIND,
            <$path as k8s_openapi::Resource>::URL_PATH_SEGMENT,
            <<$path as k8s_openapi::Resource>::Scope as Scope>::NAMESPACED,
        )),*]
    };
}

type Openapi = (&'static str, &'static str, &'static str, bool);

/// Every top-level resource type `k8s-openapi` describes (the table
/// dry-run used before v1.36 was captured).
const OPENAPI: &[Openapi] = {
    use k8s_openapi::api::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
    openapi_kinds![
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

#[test]
fn the_captured_discovery_parses_and_names_its_release() {
    let rows = parse(CAPTURED).expect("the captured table parses");
    assert_eq!(rows, *SERVED);
    let header: Vec<&str> = CAPTURED
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect();
    assert!(
        header[0].starts_with(&format!("# The kinds Kubernetes {VERSION} serves")),
        "{header:?}"
    );
    assert!(header
        .iter()
        .any(|l| l.contains("scripts/capture-kinds.sh")));
    let mut seen = std::collections::HashSet::new();
    for row in rows.iter() {
        assert!(
            seen.insert((row.api_version, row.kind)),
            "{} {} is listed twice",
            row.api_version,
            row.kind
        );
    }
    assert_eq!(
        parse("# c\nAPIVERSION KIND RESOURCE NAMESPACED SERVED\nv1 Pod pods yes default\n"),
        Err("kinds-v1.36.2.txt line 3: NAMESPACED \"yes\"".to_owned())
    );
    assert_eq!(
        parse("v1 Pod pods true default\n"),
        Err("kinds-v1.36.2.txt line 1: not the header row".to_owned())
    );
}

/// Where `k8s-openapi` and the apiserver both have a kind at a version,
/// they agree on its resource and scope; every type of the crate at a
/// stable version is served by default, but for those v1.36 removed.
#[test]
fn k8s_openapi_agrees_with_the_captured_discovery() {
    let mut agreed = 0;
    let mut missing = Vec::new();
    for &(api_version, kind, resource, namespaced) in OPENAPI {
        match SERVED
            .iter()
            .find(|r| r.api_version == api_version && r.kind == kind)
        {
            Some(row) => {
                assert_eq!(
                    (row.resource, row.namespaced),
                    (resource, namespaced),
                    "{api_version} {kind}"
                );
                let stable = !api_version.contains("alpha") && !api_version.contains("beta");
                assert_eq!(row.by_default, stable, "{api_version} {kind}");
                agreed += 1;
            }
            None => missing.push(format!("{api_version} {kind}")),
        }
    }
    assert!(agreed > 70, "only {agreed} kinds in common");
    assert_eq!(missing, REMOVED_SINCE_OPENAPI);
}

/// The `k8s-openapi` types (v1.33's API) that the v1.36.2 apiserver does
/// not serve at all, even with every version turned on.
const REMOVED_SINCE_OPENAPI: &[&str] = &[
    "admissionregistration.k8s.io/v1beta1 ValidatingAdmissionPolicy",
    "admissionregistration.k8s.io/v1beta1 ValidatingAdmissionPolicyBinding",
    "resource.k8s.io/v1alpha3 DeviceClass",
    "resource.k8s.io/v1alpha3 ResourceClaim",
    "resource.k8s.io/v1alpha3 ResourceClaimTemplate",
    "resource.k8s.io/v1alpha3 ResourceSlice",
    "storage.k8s.io/v1alpha1 VolumeAttributesClass",
    "storagemigration.k8s.io/v1alpha1 StorageVersionMigration",
];

/// The kinds the issue found missing are there, at GA.
#[test]
fn v1_36_serves_dra_and_mutating_admission_policies_at_v1() {
    for (api_version, kind, resource) in [
        ("resource.k8s.io/v1", "DeviceClass", "deviceclasses"),
        (
            "admissionregistration.k8s.io/v1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
        ),
        (
            "admissionregistration.k8s.io/v1",
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
        ),
    ] {
        let row = SERVED
            .iter()
            .find(|r| r.api_version == api_version && r.kind == kind);
        assert_eq!(
            row.map(|r| (r.resource, r.namespaced, r.by_default)),
            Some((resource, false, true)),
            "{api_version} {kind}"
        );
    }
}

/// The built-in table is the captured discovery, both ways: every row a
/// default apiserver serves is known with its resource and scope, every
/// opt-in row is refused as such, and nothing else of a built-in group is
/// known.
#[test]
fn the_built_in_table_is_the_captured_discovery() {
    let kinds = Kinds::default();
    for row in SERVED.iter() {
        let found = kinds.lookup(row.api_version, row.kind);
        if row.by_default {
            assert_eq!(
                found.map(|i| (i.resource.as_str(), i.namespaced)),
                Ok((row.resource, row.namespaced)),
                "{} {}",
                row.api_version,
                row.kind
            );
        } else {
            let why = found.expect_err(row.api_version);
            assert!(
                why.contains(&format!(
                    "a default Kubernetes {VERSION} apiserver does not serve {}",
                    row.api_version
                )),
                "{why}"
            );
        }
    }
    let versions = |group: &str, kind: &str| -> Vec<&str> {
        SERVED
            .iter()
            .filter(|r| r.by_default && r.kind == kind && group_version(r.api_version).0 == group)
            .map(|r| group_version(r.api_version).1)
            .collect()
    };
    for ((group, kind), info) in Kinds::builtin_table() {
        assert_eq!(info.versions, versions(&group, &kind), "{group} {kind}");
    }
}
