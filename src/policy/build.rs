//! Turning one parsed policy or binding into its checked, compiled form.

use super::compile::{CompileIssue, Compiler, Scope};
use super::load::{
    invalid, CompiledPolicy, CompiledValidation, ExpressionError, PolicyLoadError, BINDING, POLICY,
};
use super::model::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidationAction};

/// The variables declared so far, with what each needs and certainly reads.
type Declared<'a> = (&'a [(String, Vec<usize>)], &'a [Vec<usize>]);

/// Compiles every expression of `policy`, each against the variables declared
/// before it, naming the field path of any that fails.
pub(crate) fn compile_policy(
    compiler: &mut Compiler,
    source_name: &str,
    policy: ValidatingAdmissionPolicy,
) -> Result<CompiledPolicy, PolicyLoadError> {
    let name = policy.metadata.name;
    let spec = policy.spec;
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        return Err(invalid(
            source_name,
            POLICY,
            &name,
            "spec.validations or spec.auditAnnotations must have at least one entry".to_owned(),
        ));
    }
    let has_params = spec.param_kind.is_some();
    let compile = |compiler: &mut Compiler,
                   field: String,
                   source: &str,
                   (variables, certain): Declared<'_>| {
        compiler
            .compile(
                source,
                &Scope {
                    variables,
                    certain,
                    has_params,
                },
            )
            .map_err(|CompileIssue { message, position }| {
                PolicyLoadError::Expression(Box::new(ExpressionError {
                    source_name: source_name.to_owned(),
                    policy: name.clone(),
                    field,
                    expression: source.to_owned(),
                    message,
                    position,
                }))
            })
    };
    let mut declared: Vec<(String, Vec<usize>)> = Vec::new();
    let mut certain: Vec<Vec<usize>> = Vec::new();
    let mut variables = Vec::new();
    for (i, variable) in spec.variables.iter().enumerate() {
        let compiled = compile(
            compiler,
            format!("spec.variables[{i}].expression"),
            &variable.expression,
            (&declared, &certain),
        )?;
        declared.push((variable.name.clone(), compiled.needs.clone()));
        certain.push(compiled.certain.clone());
        variables.push((variable.name.clone(), compiled));
    }
    let declared = (declared.as_slice(), certain.as_slice());
    let mut match_conditions = Vec::new();
    for (i, condition) in spec.match_conditions.iter().enumerate() {
        let compiled = compile(
            compiler,
            format!("spec.matchConditions[{i}].expression"),
            &condition.expression,
            declared,
        )?;
        match_conditions.push((condition.name.clone(), compiled));
    }
    let mut validations = Vec::new();
    for (i, validation) in spec.validations.iter().enumerate() {
        let expression = compile(
            compiler,
            format!("spec.validations[{i}].expression"),
            &validation.expression,
            declared,
        )?;
        let message_expression = validation
            .message_expression
            .as_deref()
            .map(|source| {
                compile(
                    compiler,
                    format!("spec.validations[{i}].messageExpression"),
                    source,
                    declared,
                )
            })
            .transpose()?;
        validations.push(CompiledValidation {
            expression,
            message_expression,
            message: validation.message.clone(),
            reason: validation.reason,
        });
    }
    let mut audit_annotations = Vec::new();
    for (i, annotation) in spec.audit_annotations.iter().enumerate() {
        let compiled = compile(
            compiler,
            format!("spec.auditAnnotations[{i}].valueExpression"),
            &annotation.value_expression,
            declared,
        )?;
        audit_annotations.push((annotation.key.clone(), compiled));
    }
    Ok(CompiledPolicy {
        failure_policy: spec.failure_policy.unwrap_or_default(),
        name,
        variable_bindings: spec
            .variables
            .iter()
            .map(|v| format!("variables.{}", v.name))
            .collect(),
        spec,
        variables,
        match_conditions,
        validations,
        audit_annotations,
        bindings: Vec::new(),
    })
}

/// The checks the apiserver's validation would make on a binding.
pub(crate) fn check_binding(
    source_name: &str,
    binding: &ValidatingAdmissionPolicyBinding,
) -> Result<(), PolicyLoadError> {
    let fail = |message: &str| {
        Err(invalid(
            source_name,
            BINDING,
            &binding.metadata.name,
            message.to_owned(),
        ))
    };
    let actions = &binding.spec.validation_actions;
    if binding.spec.policy_name.is_empty() {
        return fail("spec.policyName is required");
    }
    if actions.is_empty() {
        return fail("spec.validationActions must have at least one of Deny, Warn, Audit");
    }
    if actions
        .iter()
        .enumerate()
        .any(|(i, a)| actions[..i].contains(a))
    {
        return fail("spec.validationActions must not repeat an action");
    }
    if actions.contains(&ValidationAction::Deny) && actions.contains(&ValidationAction::Warn) {
        return fail("spec.validationActions: Deny and Warn may not be used together");
    }
    if let Some(param_ref) = &binding.spec.param_ref {
        let by_name = param_ref.name.as_deref().is_some_and(|n| !n.is_empty());
        if by_name == param_ref.selector.is_some() {
            return fail("spec.paramRef must set exactly one of name and selector");
        }
    }
    Ok(())
}
