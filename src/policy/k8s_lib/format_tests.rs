//! `string.format(list)` comes from cel's strings extension, which already
//! follows cel-go's `ext.Strings()` formatting; these tests pin the
//! Kubernetes documentation examples to it.

use super::test_support::{assert_error, assert_true};

#[test]
fn format_substitutes_strings_and_numbers_in_order() {
    assert_true("'%s is %d'.format(['x', 3]) == 'x is 3'");
    assert_true("'this is a string: %s'.format(['str']) == 'this is a string: str'");
    assert_true("'this is an integer: %d'.format([2]) == 'this is an integer: 2'");
}

#[test]
fn format_supports_the_documented_verbs() {
    assert_true("'%.3f'.format([3.14159]) == '3.142'");
    assert_true("'%x'.format([255]) == 'ff'");
    assert_true("'%X'.format(['Hi']) == '4869'");
    assert_true("'%o'.format([8]) == '10'");
    assert_true("'%b'.format([5]) == '101'");
    assert_true("'%e'.format([1234.5]) == '1.234500e+03'");
    assert_true("'%s'.format([[1, 2]]) == '[1, 2]'");
    assert_true("'100%%'.format([]) == '100%'");
}

#[test]
fn format_with_too_few_arguments_is_an_error() {
    assert_error("'%s %s'.format(['a'])", "out of range");
}
