use super::{check_expression, FunctionSet};
use crate::policy::k8s_lib::kubernetes_env;
use crate::policy::k8s_lib::test_support::{eval, EvalError};
use cel::ExecutionError;

const FIVE_NULLS: &str = "null, null, null, null, null";

/// Calls `name` with arguments no overload takes: a declared name fails with
/// no-such-overload, an undeclared one with undeclared-reference.
fn is_declared(call: &str) -> bool {
    match eval(call) {
        Err(EvalError::Execute(ExecutionError::NoSuchOverload(_))) => true,
        Err(EvalError::Execute(ExecutionError::UndeclaredReference(_))) => false,
        other => panic!("`{call}` should fail to resolve, got {other:?}"),
    }
}

#[test]
fn every_listed_global_is_declared_by_the_environment() {
    let set = FunctionSet::kubernetes();
    for name in set.globals().filter(|n| !n.contains('@')) {
        assert!(is_declared(&format!("{name}({FIVE_NULLS})")), "{name}");
    }
}

#[test]
fn every_listed_method_is_declared_by_the_environment() {
    let set = FunctionSet::kubernetes();
    for name in set.members().filter(|n| !n.contains('@')) {
        assert!(is_declared(&format!("null.{name}({FIVE_NULLS})")), "{name}");
    }
}

#[test]
fn the_probe_tells_undeclared_names_apart() {
    assert!(!is_declared(&format!("lowerAscci({FIVE_NULLS})")));
    assert!(!is_declared(&format!("null.lowerAscci({FIVE_NULLS})")));
}

fn check(source: &str) -> Result<(), Vec<String>> {
    let env = kubernetes_env().map_err(|e| vec![e.to_string()])?;
    let program = env.compile(source).map_err(|e| vec![e.to_string()])?;
    check_expression(&FunctionSet::kubernetes(), &program)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

#[test]
fn expressions_using_only_declared_functions_pass() {
    for source in [
        "quantity('100Mi').isLessThan(quantity('1Gi'))",
        "object.spec.containers.all(c, c.image.find('[a-z]+') != '')",
        "math.greatest(1, 2) == 2 && [3, 1].sortBy(x, x) == [1, 3]",
        "has(object.metadata.labels) && size(object.metadata.labels) > 0",
        "optional.of(1).orValue(2) == 1 && {'a': [ip('::1')]}.a[0].family() == 6",
        "cidr('10.0.0.0/8').containsIP(url('https://10.0.0.1/').getHostname())",
        "-(1) < 2 && !false && 'a' in ['a'] && [1, 2][0] == 1 ? true : false",
        "'%s'.format([base64.encode(b'x')]) == 'eA=='",
    ] {
        assert_eq!(check(source), Ok(()), "{source}");
    }
}

#[test]
fn a_misspelled_method_is_reported_with_its_position() {
    assert_eq!(
        check("'a'.lowerAscii() == 'a' &&\n  'b'.upperAscci() == 'B'"),
        Err(vec!["undeclared method 'upperAscci' at 2:17".to_owned()])
    );
}

#[test]
fn a_misspelled_namespaced_function_is_reported() {
    let errors = check("math.cel(1.5) == 2.0").unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("'cel'"), "{errors:?}");
}

#[test]
fn calling_a_method_as_a_global_gets_a_hint() {
    let errors = check("isSorted([1, 2])").unwrap_err();
    assert_eq!(
        errors,
        vec!["undeclared function 'isSorted' at 1:9 (it is a method: call it as x.name())"]
    );
}

#[test]
fn every_unknown_call_is_reported_in_source_order() {
    let errors = check("foo(1) || bar(2).baz()").unwrap_err();
    let names: Vec<_> = errors.iter().map(|e| e.split('\'').nth(1)).collect();
    assert_eq!(names, vec![Some("foo"), Some("bar"), Some("baz")]);
}

#[test]
fn macros_with_the_wrong_arity_are_reported_rather_than_failing_later() {
    assert!(check("[1].all(x)").is_err());
}
