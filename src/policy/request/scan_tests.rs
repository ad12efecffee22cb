//! Tests of the scanner: it reads every body to the nodes serde_json would,
//! and refuses what serde_json refuses.

use super::super::lazy::{parse_with_serde, EAGER_DEPTH, LAZY_DEPTH};
use super::*;

/// serde_json's reading of a raw node, as `LazyNode::get` falls back to.
fn serde_node(base: &str, start: usize, end: usize) -> Option<Parsed> {
    let text = base.get(start..end)?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    NodeSeed {
        depth: LAZY_DEPTH,
        base,
        duplicates: &Cell::new(false),
    }
    .deserialize(&mut deserializer)
    .ok()
}

/// Every raw node below `parsed` reads the same through both parsers
/// (where the scanner reads it at all), recursively.
fn raw_nodes_agree(parsed: &Parsed, base: &str) {
    let children: Vec<&LazyNode> = match parsed {
        Parsed::Array(items) => items.iter().collect(),
        Parsed::Object(object) => object.entries.iter().map(|(_, node)| node).collect(),
        _ => return,
    };
    for child in children {
        let nested = match (child.raw, child.parsed.get()) {
            (Some((start, end)), _) => {
                let reference = serde_node(base, start, end);
                // The scanner may leave a node to serde_json (`None`).
                if let Some(scanned) = node(base, start, end, LAZY_DEPTH) {
                    assert_eq!(Some(&scanned), reference.as_ref(), "{start}..{end}");
                    raw_nodes_agree(&scanned, base);
                }
                continue;
            }
            (None, Some(parsed)) => parsed,
            (None, None) => continue,
        };
        raw_nodes_agree(nested, base);
    }
}

/// The scanner takes only bodies serde_json takes, and reads them alike.
fn agrees(body: &str) -> bool {
    let reference = parse_with_serde(body);
    match document(body, EAGER_DEPTH) {
        Some(scanned) => {
            let reference = reference
                .unwrap_or_else(|e| panic!("scanner took a body serde_json rejects ({e}): {body}"));
            assert_eq!(scanned, reference, "{body}");
            raw_nodes_agree(&scanned.0, body);
            true
        }
        None => false,
    }
}

#[test]
fn the_scanner_reads_every_captured_review_as_serde_json_does() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bodies = 0;
    for dir in ["examples/reviews", "tests/fixtures/admission-reviews"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            if serde_json::from_str::<serde_json::Value>(&text).is_err() {
                continue;
            }
            assert!(agrees(&text), "{}", entry.path().display());
            bodies += 1;
        }
    }
    // 24 captured reviews plus the 2 examples: a missing folder fails.
    assert_eq!(bodies, 26);
}

#[test]
fn the_scanner_takes_nothing_serde_json_rejects() {
    let mut deep = "[".repeat(200);
    deep.push_str(&"]".repeat(200));
    let deep = format!(r#"{{"request": {{"object": {{"spec": {{"x": {deep}}}}}}}}}"#);
    for inner in [
        r#"1"#,
        r#"-0"#,
        r#"-1"#,
        r#"1.5"#,
        r#"1e400"#,
        r#"-1e400"#,
        r#"1E+2"#,
        r#"1e-2"#,
        r#"18446744073709551615"#,
        r#"18446744073709551616"#,
        r#"9999999999999999999"#,
        r#"0123"#,
        r#"01"#,
        r#"-"#,
        r#"1."#,
        r#".5"#,
        r#"1e"#,
        r#"+1"#,
        r#"0x1"#,
        r#""a\u00e9""#,
        r#""\ud800""#,
        r#""\ud83d\ude00""#,
        r#""\q""#,
        r#""\u12""#,
        "\"a\u{1}b\"",
        "\"tab\there\"",
        r#""é€𝄞""#,
        r#"null"#,
        r#"nul"#,
        r#"true"#,
        r#"truex"#,
        r#"false"#,
        r#"[]"#,
        r#"[1,]"#,
        r#"[,1]"#,
        r#"{}"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{1:1}"#,
        r#"{"a":1 "b":2}"#,
        r#"{"a\"b":{"c":[1,{"d":"\ud800"}]}}"#,
        r#"{"dup":1,"dup":2}"#,
        r#"[1 , 2 ]"#,
        " \t\n\r[ 1 ] ",
        "[\u{b}]",
    ] {
        for body in [
            format!(r#"{{"request": {{"object": {{"spec": {{"x": {inner}}}}}}}}}"#),
            format!(r#"{{"request": {{"object": {{"spec": {inner}}}}}}}"#),
            format!(r#"{{"request": {{"x": {inner}}}}}"#),
            format!(
                r#"{{"request": {{"object": {{"metadata": {{"labels": {{"k": {inner}}}}}}}}}}}"#
            ),
            format!(r#"{{"request": {inner}}}"#),
            inner.to_owned(),
        ] {
            agrees(&body);
        }
    }
    for body in [
        deep.as_str(),
        r#"{"request": {}} x"#,
        r#"{"request": {}}}"#,
        "",
        " ",
        "\u{feff}{}",
        r#"{"a\u0000":1}"#,
        r#"{"a":1}"#,
    ] {
        agrees(body);
    }
}
