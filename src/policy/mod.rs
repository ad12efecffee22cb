//! Policy evaluation: ValidatingAdmissionPolicies from `policies/`, compiled
//! once at load and evaluated per review without I/O.
pub mod k8s_lib;
