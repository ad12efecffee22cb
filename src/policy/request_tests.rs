//! Tests of the admission request view and the lazy review.

use super::*;
use serde_json::json;

#[test]
fn a_request_without_operation_is_rejected() {
    let raw = json!({"resource": {"resource": "pods"}});
    assert_eq!(
        AdmissionRequestInput::from_request(&raw).map(|_| ()),
        Err(RequestInputError::MissingField("operation"))
    );
}

#[test]
fn a_namespace_objects_namespace_is_its_name() {
    let raw = json!({"operation": "CREATE", "resource": {"group": "", "version": "v1", "resource": "namespaces"}, "name": "team-a"});
    let input = AdmissionRequestInput::from_request(&raw).expect("valid");
    assert_eq!(input.namespace(), "team-a");
}

/// Every node of a lazy review reads as the `Value` parse of the body.
fn same(lazy: Json<'_>, value: &Value) {
    match (lazy.shape(), value) {
        (Shape::Null, Value::Null) => {}
        (Shape::Invalid, _) => panic!("invalid node"),
        (Shape::Bool(a), Value::Bool(b)) => assert_eq!(a, *b),
        (Shape::Number(a), Value::Number(b)) => assert_eq!(a, b),
        (Shape::String(a), Value::String(b)) => assert_eq!(a, b),
        (Shape::Array(items), Value::Array(values)) => {
            assert_eq!(items.len(), values.len());
            for (i, v) in values.iter().enumerate() {
                same(items.get(i).expect("in range"), v);
            }
        }
        (Shape::Object(fields), Value::Object(map)) => {
            let keys: Vec<&str> = fields.iter().map(|(k, _)| k).collect();
            let expected: Vec<&str> = map.keys().map(String::as_str).collect();
            assert_eq!(keys, expected, "key order");
            for (k, v) in map {
                same(fields.get(k).expect("present"), v);
            }
        }
        (_, value) => panic!("shape differs from {value}"),
    }
    if let Json::Lazy(node, base) = lazy {
        assert_eq!(&node.to_value(base), value);
    }
}

#[test]
fn a_lazy_review_reads_as_the_value_parse() {
    let body = br#"{"request": {"operation": "CREATE", "b": 1, "a": [1, -2, 3.5, 18446744073709551615, "x\u00e9\n", null, true, {"z": {"y": [{"deep": {"er": {"est": "\"q\""}}}]}}],
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "dup": 1, "dup": {"k": 2}, "k\u0065y": "v", "object": {"metadata": {"managedFields": [{"manager": "m"}], "labels": {"b": "2", "a": "1"}}}}}"#;
    let lazy = LazyReview::parse(body).expect("valid");
    let value: Value = serde_json::from_slice(body).expect("valid");
    same(Json::Lazy(&lazy.root, lazy.text), &value);
    let input = AdmissionRequestInput::from_body(&lazy).expect("valid");
    assert_eq!(input.operation(), "CREATE");
    assert_eq!(input.resource(), "pods");
    assert_eq!(input.object(), value["request"].get("object"));
    assert!(input.old_object().is_none());
    assert_eq!(input.raw(), &value["request"]);
}

#[test]
fn a_lazy_review_rejects_what_the_value_parse_rejects() {
    for body in [
        &br#"{"request": {"object": {"metadata": {"managedFields": [1,]}}}}"#[..],
        br#"{"request": {"object": {"spec": {"x": "\q"}}}}"#,
        br#"{"request": {}} x"#,
        b"{\"request\": {\"object\": {\"a\": {\"b\": \"\xff\"}}}}",
    ] {
        assert!(serde_json::from_slice::<Value>(body).is_err());
        assert!(
            LazyReview::parse(body).is_err(),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn serde_json_maps_iterate_in_key_order() {
    // The lazy view sorts object keys; it must agree with serde_json::Map
    // (which it does unless serde_json's preserve_order is enabled).
    let value: Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).expect("valid");
    let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["a", "b"]);
}
