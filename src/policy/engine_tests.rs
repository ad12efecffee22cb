//! Engine behaviour, feature by feature, through the public API.

use super::evaluate::{OUT_OF_BUDGET, VARIABLE_EVALUATIONS};
use super::*;
use crate::params::{NoInputs, PolicyInputs};
use crate::selector::LabelSelector;
use serde_json::{json, Value};

const POD_RULE: &str = r#"
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["pods"]"#;

/// A policy named `p` with a binding named `b`; `spec` and `binding` are
/// indented YAML fragments.
fn set(spec: &str, binding: &str) -> PolicySet {
    let yaml = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: p\nspec:\n{spec}\n---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: b\nspec:\n  policyName: p\n{binding}\n"
    );
    match PolicySet::from_documents(vec![("test.yaml".to_owned(), yaml)]) {
        Ok(set) => set,
        Err(error) => panic!("test policy loads: {error}"),
    }
}

fn pod_request(labels: Value, sub_resource: Option<&str>) -> Value {
    let mut request = json!({
        "uid": "1", "operation": "CREATE", "namespace": "team-a", "name": "web",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "userInfo": {"username": "alice", "groups": ["devs"]},
        "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "team-a", "labels": labels},
            "spec": {"replicas": 2, "containers": [{"name": "a"}, {"name": "b"}]}},
        "oldObject": null,
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = json!(sub);
        request["operation"] = json!("UPDATE");
    }
    request
}

fn run(set: &PolicySet, request: &Value, inputs: &dyn PolicyInputs) -> ValidationOutcome {
    let input = AdmissionRequestInput::from_request(request).expect("valid request");
    validate(set, &input, inputs)
}

const DENIED: &str = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ";

#[derive(Default)]
struct Params(Vec<Value>);

impl PolicyInputs for Params {
    fn namespace(&self, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == name)
    }
    fn param(&self, _: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<&Value> {
        self.0.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str() == namespace
        })
    }
    fn params_matching(
        &self,
        _: &str,
        kind: &str,
        _: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<&Value> {
        self.0
            .iter()
            .filter(|o| o["kind"] == kind && selector.matches_object(o))
            .collect()
    }
}

fn config_map(name: &str, limit: &str, team: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"team": team}},
        "data": {"max": limit}})
}

#[test]
fn a_plain_pod_rule_ignores_subresource_requests_and_excludes_win() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n    excludeResourceRules:\n      - apiGroups: ['']\n        apiVersions: ['*']\n        operations: ['*']\n        resources: ['pods']\n        resourceNames: ['skip-me']\n  validations:\n    - expression: 'false'"),
        "  validationActions: [Deny]",
    );
    let mut request = pod_request(json!({}), Some("resize"));
    assert!(run(&set, &request, &NoInputs).allowed);
    request = pod_request(json!({}), None);
    assert!(!run(&set, &request, &NoInputs).allowed);
    request["name"] = json!("skip-me");
    assert!(run(&set, &request, &NoInputs).allowed);
}

#[test]
fn an_unguarded_subresource_read_is_an_error_on_plain_requests() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: \"request.subResource != 'resize'\""),
        "  validationActions: [Deny]",
    );
    let outcome = run(&set, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}expression 'request.subResource != 'resize'' resulted in error: no such key: subResource").as_str())
    );
    assert_eq!(
        (outcome.status_code, outcome.reason.as_deref()),
        (422, Some("Invalid"))
    );
    assert_eq!(outcome.results[0].decision, Decision::Error);
}

#[test]
fn a_false_match_condition_skips_and_an_erroring_one_follows_failure_policy() {
    let spec = |failure: &str| {
        format!(
        "  failurePolicy: {failure}\n  matchConstraints:{POD_RULE}\n  matchConditions:\n    - name: labelled\n      expression: \"object.metadata.labels.tier == 'web'\"\n  validations:\n    - expression: 'false'\n      message: always"
    )
    };
    let fail = set(&spec("Fail"), "  validationActions: [Deny]");
    let skipped = run(&fail, &pod_request(json!({"tier": "db"}), None), &NoInputs);
    assert!(skipped.allowed);
    assert_eq!(skipped.results[0].decision, Decision::Skip);
    let matched = run(&fail, &pod_request(json!({"tier": "web"}), None), &NoInputs);
    assert_eq!(
        matched.message.as_deref(),
        Some(format!("{DENIED}always").as_str())
    );
    let errored = run(&fail, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        errored.message.as_deref(),
        Some(format!("{DENIED}expression 'object.metadata.labels.tier == 'web'' resulted in error: no such key: tier").as_str())
    );
    let ignore = set(&spec("Ignore"), "  validationActions: [Deny]");
    assert!(run(&ignore, &pod_request(json!({}), None), &NoInputs).allowed);
}

#[test]
fn variables_are_evaluated_lazily_and_at_most_once() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  variables:\n    - name: count\n      expression: size(object.spec.containers)\n    - name: twice\n      expression: variables.count * 2\n    - name: unused\n      expression: object.spec.replicas + 1\n  validations:\n    - expression: variables.count == 2\n    - expression: variables.twice == 4\n    - expression: variables.count > 5\n      messageExpression: \"'too few: ' + string(variables.twice)\""),
        "  validationActions: [Deny]",
    );
    VARIABLE_EVALUATIONS.with(|c| c.set(0));
    let outcome = run(&set, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}too few: 4").as_str())
    );
    assert_eq!(
        VARIABLE_EVALUATIONS.with(|c| c.get()),
        2,
        "count and twice, once each; unused never"
    );
}

#[test]
fn messages_fall_back_from_message_expression_to_message_to_the_expression() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: object.spec.replicas > 5\n      messageExpression: \"'replicas: ' + object.spec.missing\"\n      message: static\n    - expression: object.spec.replicas > 9\n      reason: Unauthorized"),
        "  validationActions: [Deny]",
    );
    let outcome = run(&set, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}static").as_str())
    );
    let only_second = set_with_second_only();
    let outcome = run(&only_second, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}failed expression: object.spec.replicas > 9").as_str())
    );
    assert_eq!(
        (outcome.status_code, outcome.reason.as_deref()),
        (401, Some("Unauthorized"))
    );
}

fn set_with_second_only() -> PolicySet {
    set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: object.spec.replicas > 9\n      reason: Unauthorized"),
        "  validationActions: [Deny]",
    )
}

const PARAM_SPEC: &str = "  paramKind:\n    apiVersion: v1\n    kind: ConfigMap\n  validations:\n    - expression: size(object.spec.containers) <= int(params.data.max)\n      messageExpression: \"'at most ' + params.data.max + ' containers (' + params.metadata.name + ')'\"";

#[test]
fn a_param_by_name_is_looked_up_in_the_request_namespace() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n{PARAM_SPEC}"),
        "  paramRef:\n    name: limits\n  validationActions: [Deny]",
    );
    let outcome = run(
        &set,
        &pod_request(json!({}), None),
        &Params(vec![config_map("limits", "1", "x")]),
    );
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}at most 1 containers (limits)").as_str())
    );
    assert_eq!(outcome.results[0].param.as_deref(), Some("team-a/limits"));
    assert!(
        run(
            &set,
            &pod_request(json!({}), None),
            &Params(vec![config_map("limits", "3", "x")])
        )
        .allowed
    );
}

#[test]
fn a_param_selector_evaluates_the_policy_once_per_param() {
    let set = set(&format!("  matchConstraints:{POD_RULE}\n{PARAM_SPEC}"), "  paramRef:\n    selector:\n      matchLabels:\n        team: a\n    parameterNotFoundAction: Deny\n  validationActions: [Deny]");
    let params = Params(vec![
        config_map("loose", "9", "a"),
        config_map("strict", "1", "a"),
        config_map("other", "0", "b"),
    ]);
    let outcome = run(&set, &pod_request(json!({}), None), &params);
    assert_eq!(outcome.results.len(), 2);
    assert_eq!(outcome.results[0].decision, Decision::Allow);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}at most 1 containers (strict)").as_str())
    );
}

#[test]
fn parameter_not_found_action_allow_skips_and_deny_denies() {
    let allow = set(&format!("  matchConstraints:{POD_RULE}\n{PARAM_SPEC}"), "  paramRef:\n    name: limits\n    parameterNotFoundAction: Allow\n  validationActions: [Deny]");
    let outcome = run(&allow, &pod_request(json!({}), None), &NoInputs);
    assert!(outcome.allowed);
    assert_eq!(outcome.results[0].decision, Decision::Skip);
    let deny = set(&format!("  matchConstraints:{POD_RULE}\n{PARAM_SPEC}"), "  paramRef:\n    name: limits\n    parameterNotFoundAction: Deny\n  validationActions: [Warn]");
    let outcome = run(&deny, &pod_request(json!({}), None), &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction").as_str())
    );
}

#[test]
fn warn_and_audit_actions_allow_with_a_warning_and_an_annotation() {
    let spec = format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: 'true'\n    - expression: 'false'\n      message: nope\n  auditAnnotations:\n    - key: containers\n      valueExpression: string(size(object.spec.containers))\n    - key: skipped\n      valueExpression: 'null'");
    let set = set(&spec, "  validationActions: [Warn, Audit]");
    let outcome = run(&set, &pod_request(json!({}), None), &NoInputs);
    assert!(outcome.allowed);
    assert_eq!(
        outcome.warnings,
        vec![
            "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': nope".to_owned()
        ]
    );
    assert_eq!(
        outcome
            .audit_annotations
            .get(VALIDATION_FAILURE_ANNOTATION)
            .map(String::as_str),
        Some(
            r#"[{"message":"nope","policy":"p","binding":"b","expressionIndex":1,"validationActions":["Warn","Audit"]}]"#
        )
    );
    assert_eq!(
        outcome
            .audit_annotations
            .get("p/containers")
            .map(String::as_str),
        Some("2")
    );
    assert!(!outcome.audit_annotations.contains_key("p/skipped"));
    assert_eq!(outcome.results[0].decision, Decision::Warn);
}

#[test]
fn failure_policy_ignore_admits_on_evaluation_errors() {
    let spec = |failure: &str| {
        format!("  failurePolicy: {failure}\n  matchConstraints:{POD_RULE}\n  validations:\n    - expression: object.spec.missing == 1")
    };
    assert!(
        run(
            &set(&spec("Ignore"), "  validationActions: [Deny]"),
            &pod_request(json!({}), None),
            &NoInputs
        )
        .allowed
    );
    let outcome = run(
        &set(&spec("Fail"), "  validationActions: [Deny]"),
        &pod_request(json!({}), None),
        &NoInputs,
    );
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}expression 'object.spec.missing == 1' resulted in error: no such key: missing").as_str())
    );
}

#[test]
fn the_binding_match_resources_narrow_the_policy() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: 'false'"),
        "  matchResources:\n    namespaceSelector:\n      matchLabels:\n        env: prod\n  validationActions: [Deny]",
    );
    let prod = Params(vec![
        json!({"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}),
    ]);
    assert!(!run(&set, &pod_request(json!({}), None), &prod).allowed);
    assert!(run(&set, &pod_request(json!({}), None), &NoInputs).allowed);
}

#[test]
fn namespace_object_is_bound_from_the_inputs() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: \"namespaceObject != null && namespaceObject.metadata.labels.env == 'prod'\""),
        "  validationActions: [Deny]",
    );
    let prod = Params(vec![
        json!({"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}, "managedFields": []}}),
    ]);
    assert!(run(&set, &pod_request(json!({}), None), &prod).allowed);
    assert!(!run(&set, &pod_request(json!({}), None), &NoInputs).allowed);
}

#[test]
fn a_runaway_expression_runs_out_of_budget_and_follows_failure_policy() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: object.spec.items.all(x, object.spec.items.all(y, x + y >= 0))"),
        "  validationActions: [Deny]",
    )
    .with_limits(EvaluationLimits { cost_units: 10_000, ..EvaluationLimits::default() });
    let mut request = pod_request(json!({}), None);
    request["object"]["spec"]["items"] = json!((0..500).collect::<Vec<i64>>());
    let outcome = run(&set, &request, &NoInputs);
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}{OUT_OF_BUDGET}").as_str())
    );
}

#[test]
fn a_load_error_names_the_file_the_policy_the_field_and_the_position() {
    let yaml = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: broken\nspec:\n  validations:\n    - expression: 'true'\n    - expression: object.metadata.name.frobnicate()\n";
    let error =
        PolicySet::from_documents(vec![("policies/broken.yaml".to_owned(), yaml.to_owned())])
            .expect_err("unknown function");
    assert_eq!(
        error.to_string(),
        "policies/broken.yaml: ValidatingAdmissionPolicy 'broken': spec.validations[1].expression at line 1, column 22: undeclared reference to 'frobnicate' (expression: object.metadata.name.frobnicate())"
    );
    let typo = yaml.replace(
        "    - expression: object.metadata.name.frobnicate()\n",
        "    - expresion: 'true'\n",
    );
    let error =
        PolicySet::from_documents(vec![("typo.yaml".to_owned(), typo)]).expect_err("unknown field");
    assert_eq!(
        error.to_string(),
        "typo.yaml: ValidatingAdmissionPolicy 'broken': spec.validations[1]: unknown field `expresion`, expected one of `expression`, `message`, `reason`, `messageExpression`"
    );
    let parse = yaml.replace("frobnicate()", "frobnicate(");
    let error =
        PolicySet::from_documents(vec![("parse.yaml".to_owned(), parse)]).expect_err("parse error");
    assert!(error.to_string().starts_with("parse.yaml: ValidatingAdmissionPolicy 'broken': spec.validations[1].expression at line 1"), "{error}");
}

#[test]
fn a_binding_to_a_missing_policy_and_duplicates_are_load_errors() {
    let binding = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: b\nspec:\n  policyName: nowhere\n  validationActions: [Deny]\n";
    let error = PolicySet::from_documents(vec![("b.yaml".to_owned(), binding.to_owned())])
        .expect_err("unknown policy");
    assert_eq!(error.to_string(), "b.yaml: ValidatingAdmissionPolicyBinding 'b' references policy 'nowhere', which is not loaded");
    let error = PolicySet::from_documents(vec![
        ("1.yaml".to_owned(), binding.to_owned()),
        ("2.yaml".to_owned(), binding.to_owned()),
    ])
    .expect_err("duplicate");
    assert_eq!(
        error.to_string(),
        "ValidatingAdmissionPolicyBinding 'b' is defined twice: in 1.yaml and in 2.yaml"
    );
}

#[test]
fn loading_a_directory_recurses_and_skips_tests_and_other_kinds() {
    let dir = std::env::temp_dir().join(format!("nodescope-load-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("temp dir");
        std::fs::write(path, text).expect("write");
    };
    write("nested/p.yml", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: p\nspec:\n  validations:\n    - expression: 'true'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n");
    write("tests/broken.yaml", "not: [valid");
    write("README.md", "# not a policy");
    let set = PolicySet::load_dir(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(set.expect("loads").policy_names(), vec!["p"]);
}

#[test]
fn a_lazy_body_decides_as_its_value_and_fails_closed_on_undecodable_parts() {
    let set = set(
        &format!("  matchConstraints:{POD_RULE}\n  validations:\n    - expression: \"!has(request.subResource) && !has(request.object) && size(request.userInfo.groups) == 1\"\n    - expression: \"object.metadata.labels.tier == 'web'\"\n      messageExpression: \"'tier: ' + object.metadata.labels.tier\""),
        "  validationActions: [Deny]",
    );
    let mut request = pod_request(json!({"tier": "db"}), None);
    request["subResource"] = json!("");
    let review = json!({ "request": request });
    let body = serde_json::to_vec(&review).expect("serializable");
    let lazy = LazyReview::parse(&body).expect("valid JSON");
    let outcome = validate(
        &set,
        &AdmissionRequestInput::from_body(&lazy).expect("valid"),
        &NoInputs,
    );
    assert_eq!(outcome, run(&set, &review["request"], &NoInputs));
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("{DENIED}tier: db").as_str())
    );
    // serde_json skips `1e400` but will not decode it: reading it errs.
    let body = String::from_utf8(body)
        .expect("UTF-8")
        .replace(r#""tier":"db""#, r#""tier":"db","big":1e400"#);
    assert!(serde_json::from_str::<Value>(&body).is_err());
    let lazy = LazyReview::parse(body.as_bytes()).expect("skipped syntax is valid");
    let outcome = validate(
        &set,
        &AdmissionRequestInput::from_body(&lazy).expect("valid"),
        &NoInputs,
    );
    assert_eq!(outcome.results[0].decision, Decision::Error);
    assert!(!outcome.allowed);
}
