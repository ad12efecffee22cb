//! The policies the shipped webhook configurations send requests to, so
//! that `serve` never answers /validate without them.
//!
//! Every webhook of `manifests/base/webhooks/validating.yaml` calls
//! /validate, where the loaded bundle is the whole decision: a request no
//! policy matches is allowed. A `--policies` directory that lost a policy
//! (an empty or wrong ConfigMap, files deleted while it runs) would turn the
//! webhooks that route to it into allow-all while `/readyz` said ready. So
//! the set a webhook family needs is stated here, once, and `serve` refuses
//! to start without it and refuses a reload that drops any of it. Other
//! policies (a site's own additions) may come and go.
//!
//! The tests below derive the same table from the two sources it stands
//! for (the webhook configuration's rules and the shipped policies'
//! `matchConstraints`), so neither can change without this file.

use super::PolicySet;

/// One webhook of the shipped ValidatingWebhookConfiguration and the
/// shipped policies whose resources its rules send to /validate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The webhook's name in `manifests/base/webhooks/validating.yaml`.
    pub webhook: &'static str,
    /// The policies (`metadata.name`) that decide what it sends, sorted.
    pub policies: &'static [&'static str],
}

/// Each webhook family and the policies that decide its requests. A policy
/// is listed under a webhook when one of its resource rules names a
/// (group, resource) the webhook's rules send: the balloon-pods webhook
/// also carries the node-resizer identity's resizes of balloon pods, and the
/// node-resizer webhook its resizes of other pods, which the
/// balloon-resize policy's selector then leaves alone.
pub const FAMILIES: &[Family] = &[
    Family {
        webhook: "balloon-pods.nodescope.dev",
        policies: &[
            "nodescope-balloon-pods",
            "nodescope-balloon-resize",
            "nodescope-feature-balloon-pods",
            "nodescope-node-resizer",
        ],
    },
    Family {
        webhook: "balloon-priorityclass.nodescope.dev",
        policies: &["nodescope-balloon-priorityclass"],
    },
    Family {
        webhook: "node-resizer.nodescope.dev",
        policies: &["nodescope-balloon-resize", "nodescope-node-resizer"],
    },
    Family {
        webhook: "feature-gates.nodescope.dev",
        policies: &[
            "nodescope-feature-vpa-node-scope",
            "nodescope-vpa-scope",
            "nodescope-vpa-scope-portable",
        ],
    },
    Family {
        webhook: "vpa-scope.nodescope.dev",
        policies: &[
            "nodescope-feature-vpa-node-scope",
            "nodescope-vpa-scope",
            "nodescope-vpa-scope-portable",
        ],
    },
];

/// Why a policy set cannot serve the shipped webhooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unrouted {
    /// Not one ValidatingAdmissionPolicy: /validate would allow everything.
    #[error("holds no ValidatingAdmissionPolicy, so /validate would allow every request the webhooks send")]
    Empty,
    /// Some policies the webhooks route to are absent.
    #[error(
        "lacks {} {}, which webhook{} {} send{} requests to; /validate would allow them",
        if policies.len() == 1 { "ValidatingAdmissionPolicy" } else { "ValidatingAdmissionPolicies" },
        policies.join(", "),
        if webhooks.len() == 1 { "" } else { "s" },
        webhooks.join(", "),
        if webhooks.len() == 1 { "s" } else { "" },
    )]
    Missing {
        /// The absent policies, sorted.
        policies: Vec<&'static str>,
        /// The webhooks that need them, in [`FAMILIES`] order.
        webhooks: Vec<&'static str>,
    },
}

/// Checks that `set` holds every policy of [`FAMILIES`].
///
/// # Errors
/// [`Unrouted::Empty`] for a set without policies, else
/// [`Unrouted::Missing`] naming what is absent and who needs it.
pub fn check(set: &PolicySet) -> Result<(), Unrouted> {
    let loaded = set.policy_names();
    if loaded.is_empty() {
        return Err(Unrouted::Empty);
    }
    let mut policies: Vec<&'static str> = Vec::new();
    let mut webhooks = Vec::new();
    for family in FAMILIES {
        let absent: Vec<&'static str> = family
            .policies
            .iter()
            .copied()
            .filter(|p| !loaded.contains(p))
            .collect();
        if !absent.is_empty() {
            webhooks.push(family.webhook);
            policies.extend(absent);
        }
    }
    policies.sort_unstable();
    policies.dedup();
    if policies.is_empty() {
        Ok(())
    } else {
        Err(Unrouted::Missing { policies, webhooks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::bundle;
    use serde_json::Value;
    use std::collections::BTreeSet;

    type Routes = BTreeSet<(String, String)>;

    fn shipped_webhooks() -> Vec<(String, Routes)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/webhooks/validating.yaml"
        );
        let text = std::fs::read_to_string(path).expect("the shipped webhooks are readable");
        let documents = crate::manifest::parse_documents(path, &text).expect("valid YAML");
        let configuration = &documents[0].value;
        let mut out = Vec::new();
        for webhook in configuration["webhooks"].as_array().expect("webhooks") {
            let name = webhook["name"].as_str().expect("name").to_owned();
            assert_eq!(
                webhook.pointer("/clientConfig/service/path"),
                Some(&Value::from("/validate")),
                "{name}"
            );
            let mut routes = Routes::new();
            for rule in webhook["rules"].as_array().expect("rules") {
                for group in rule["apiGroups"].as_array().expect("apiGroups") {
                    for resource in rule["resources"].as_array().expect("resources") {
                        routes.insert((
                            group.as_str().expect("group").to_owned(),
                            resource.as_str().expect("resource").to_owned(),
                        ));
                    }
                }
            }
            out.push((name, routes));
        }
        out
    }

    fn policy_routes(set: &PolicySet) -> Vec<(String, Routes)> {
        set.policies
            .iter()
            .map(|policy| {
                let mut routes = Routes::new();
                for rule in policy
                    .spec
                    .match_constraints
                    .iter()
                    .flat_map(|c| &c.resource_rules)
                {
                    for group in &rule.api_groups {
                        for resource in &rule.resources {
                            routes.insert((group.clone(), resource.clone()));
                        }
                    }
                }
                (policy.name.clone(), routes)
            })
            .collect()
    }

    #[test]
    fn the_families_are_the_shipped_webhooks_and_the_policies_their_rules_reach() {
        let bundle = bundle::policy_set().expect("the bundle compiles");
        let policies = policy_routes(&bundle);
        let derived: Vec<(String, Vec<String>)> = shipped_webhooks()
            .into_iter()
            .map(|(webhook, routes)| {
                let reached = policies
                    .iter()
                    .filter(|(_, theirs)| !theirs.is_disjoint(&routes))
                    .map(|(name, _)| name.clone())
                    .collect();
                (webhook, reached)
            })
            .collect();
        let stated: Vec<(String, Vec<String>)> = FAMILIES
            .iter()
            .map(|f| {
                (
                    f.webhook.to_owned(),
                    f.policies.iter().map(|p| (*p).to_owned()).collect(),
                )
            })
            .collect();
        assert_eq!(stated, derived, "update FAMILIES in src/policy/routed.rs");
    }

    #[test]
    fn the_shipped_bundle_holds_every_routed_policy_and_each_is_routed() {
        let bundle = bundle::policy_set().expect("the bundle compiles");
        assert_eq!(check(&bundle), Ok(()));
        let routed: BTreeSet<&str> = FAMILIES.iter().flat_map(|f| f.policies).copied().collect();
        let shipped: BTreeSet<&str> = bundle.policy_names().into_iter().collect();
        assert_eq!(routed, shipped);
    }

    #[test]
    fn the_configmap_the_deployment_mounts_holds_every_routed_policy() {
        let base = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/base");
        let path = format!("{base}/kustomization.yaml");
        let text = std::fs::read_to_string(&path).expect("the base kustomization is readable");
        let documents = crate::manifest::parse_documents(&path, &text).expect("valid YAML");
        let generator = documents[0].value["configMapGenerator"]
            .as_array()
            .expect("configMapGenerator")
            .iter()
            .find(|g| g["name"] == "nodescope-policies")
            .expect("the nodescope-policies ConfigMap");
        let files = generator["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| {
                let file = format!("{base}/{}", f.as_str().expect("a path"));
                let text = std::fs::read_to_string(&file).expect("listed files exist");
                (file, text)
            })
            .collect();
        let set = PolicySet::from_documents(files).expect("the mounted bundle compiles");
        assert_eq!(check(&set), Ok(()));
    }

    #[test]
    fn an_empty_set_or_one_without_a_routed_policy_is_named() {
        let empty = PolicySet::from_documents(Vec::new()).expect("an empty set loads");
        assert_eq!(
            check(&empty).map_err(|e| e.to_string()),
            Err(
                "holds no ValidatingAdmissionPolicy, so /validate would allow every request \
                 the webhooks send"
                    .to_owned()
            )
        );
        let without = |dropped: &[&str]| {
            let documents = bundle::FILES
                .iter()
                .filter(|(file, _)| !dropped.contains(file))
                .map(|(file, text)| (bundle::source_name(file), (*text).to_owned()))
                .collect();
            let set = PolicySet::from_documents(documents).expect("loads");
            check(&set).map_err(|e| e.to_string())
        };
        assert_eq!(
            without(&["balloon-priorityclass.yaml"]),
            Err(
                "lacks ValidatingAdmissionPolicy nodescope-balloon-priorityclass, which webhook \
                 balloon-priorityclass.nodescope.dev sends requests to; /validate would allow \
                 them"
                    .to_owned()
            )
        );
        assert_eq!(
            without(&["balloon-pods.yaml", "node-resizer.yaml"]),
            Err("lacks ValidatingAdmissionPolicies nodescope-balloon-pods, \
                 nodescope-node-resizer, which webhooks balloon-pods.nodescope.dev, \
                 node-resizer.nodescope.dev send requests to; /validate would allow them"
                .to_owned())
        );
    }
}
