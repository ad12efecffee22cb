//! Tests of manifest reading: the streamed items agree with the whole-file
//! read, and errors name the file, the document and the line.

use super::*;

/// What the streaming scan hands out when it reads `step` bytes at a
/// time (so values straddle every block boundary), or `None` when it
/// declines.
fn streamed(text: &str, step: usize) -> Option<Vec<String>> {
    let mut items = Vec::new();
    let each = |_: &ListHead, item: &str| {
        items.push(item.to_owned());
        serde_json::from_str::<serde::de::IgnoredAny>(item).is_ok()
    };
    let complete = stream::Items::new(text.as_bytes(), each, step, false)
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    complete.then_some(items)
}

/// The items the whole-file read finds, as text.
fn whole(text: &str) -> Option<Vec<String>> {
    let items = json_items("t", text).ok()?;
    Some(items.into_iter().map(|i| i.get().to_owned()).collect())
}

#[test]
fn streamed_items_are_the_whole_file_reads_items_at_every_block_boundary() {
    let vpa = r#"{"kind":"VerticalPodAutoscaler","metadata":{"name":"a \"[{\\"},"status":{"recommendationGroups":[{"scopeValue":"n]}1"}]},"n":[-1.5e3,true,null,{}]}"#;
    let lists = [
        format!("[{vpa},\n {vpa} ]"),
        format!(" {{\"apiVersion\":\"v1\",\"items\":[{vpa},null,{vpa}],\"kind\":\"List\",\"metadata\":{{\"resourceVersion\":\"\"}}}}\n"),
        format!("{{\"kind\": \"List\", \"items\": [ {vpa} ]}}"),
        "{\"kind\":\"List\",\"items\":[]}".to_owned(),
        "[]".to_owned(),
        "[5, \"x\", true]".to_owned(),
    ];
    for text in &lists {
        for step in [1, 2, 3, 7, 64, 1 << 20] {
            let got = streamed(text, step);
            assert!(got.is_some(), "declined {text} at step {step}");
            assert_eq!(got, whole(text), "{text} at step {step}");
        }
    }
}

/// Any JSON value, with strings that stress the scan: quotes,
/// backslashes, brackets, escapes and non-ASCII.
fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\{}\\[\\],:\\n\u{e9}\u{1F600} ]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(("[a-z\"{]{1,6}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    /// Whatever the items and however the text is cut into blocks, the
    /// streamed items are the whole-file read's, pretty or compact, as
    /// an array or a `List`.
    #[test]
    fn streaming_agrees_with_the_whole_file_read(
        items in proptest::collection::vec(any_json(), 0..6),
        pretty in proptest::bool::ANY,
        list in proptest::bool::ANY,
        step in 1usize..40,
    ) {
        let document = if list {
            serde_json::json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"x": "]"}})
        } else {
            Value::Array(items)
        };
        let text = if pretty {
            serde_json::to_string_pretty(&document)
        } else {
            serde_json::to_string(&document)
        }
        .unwrap_or_default();
        let got = streamed(&text, step);
        proptest::prop_assert!(got.is_some(), "declined {}", text);
        proptest::prop_assert_eq!(got, whole(&text));
    }
}

#[test]
fn anything_but_a_valid_list_or_array_is_left_to_the_whole_file_read() {
    let declined = [
        // Not a List: one object, or `items` under another kind.
        r#"{"kind":"Namespace","metadata":{"name":"a"}}"#,
        r#"{"kind":"Thing","items":[{"a":1}]}"#,
        r#"{"items":[{"a":1}]}"#,
        r#"{"kind":"List","kind":"List","items":[]}"#,
        r#"{"kind":"List","items":{"a":1}}"#,
        r#"{"\u006bind":"List","items":[]}"#,
        // Not valid JSON, between items or inside one.
        r#"[{"a":1} {"b":2}]"#,
        r#"[{"a":1},]"#,
        r#"[{"a":1}] x"#,
        r#"[{"a" 1}]"#,
        r#"[{"a":"unterminated}]"#,
        r#"[{"a":1}"#,
        r#"{"kind":"List","items":[],"metadata":{bad}}"#,
        r#"{5:1,"kind":"List","items":[]}"#,
        r#"["\\","#,
        "",
        "  ",
    ];
    for text in declined {
        for step in [1, 5, 1 << 20] {
            assert_eq!(streamed(text, step), None, "{text} at step {step}");
        }
    }
}

#[test]
fn multi_document_yaml_and_lists_are_flattened_in_order() {
    let text = "kind: A\nmetadata: {name: a}\n---\nkind: List\nitems:\n- {kind: B, metadata: {name: b, namespace: ns}}\n---\n";
    let docs = parse_documents("f.yaml", text).unwrap();
    let refs: Vec<_> = docs.iter().map(Document::object_ref).collect();
    assert_eq!(refs, ["A/a", "B/ns/b"]);
    assert_eq!(docs[1].index, 1);
}

#[test]
fn a_yaml_syntax_error_names_the_file_the_document_and_the_line_on_one_line() {
    let err = parse_documents("bad.yaml", "kind: A\nmetadata: {name: [\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad.yaml: document 1: not valid YAML: unclosed bracket '[' at line 2, column 18"
    );
    let text = "# c\n---\n---\nkind: A\n---\nkind: B\n--- \nkind: [\n";
    let err = parse_documents("bad.yaml", text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad.yaml: document 3: not valid YAML: unclosed bracket '[' at line 8, column 7"
    );
}
