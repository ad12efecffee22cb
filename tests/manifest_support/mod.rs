//! Shared by the manifest tests: loading YAML, a tiny kustomize resolver
//! and lookups of the objects it yields.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};

pub const NAMESPACE: &str = "nodescope-system";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn manifests() -> PathBuf {
    repo().join("manifests")
}

pub fn load(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

pub fn load_one(path: &Path) -> Value {
    let mut docs = load(path);
    assert_eq!(docs.len(), 1, "{}: expected one document", path.display());
    docs.remove(0)
}

/// Every `*.yaml` under `dir`, skipping generated `certs/` directories.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "certs") {
                out.extend(yaml_files(&path));
            }
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    out
}

pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub fn kind_name(o: &Value) -> (String, String) {
    (
        str_at(o, "/kind").to_owned(),
        str_at(o, "/metadata/name").to_owned(),
    )
}

/// What `kustomize build dir` would emit, as far as this repository uses
/// kustomize: resources (files, or directories with a kustomization.yaml),
/// components, config map and secret generators (name, namespace and keys;
/// no hash suffix) and `$patch: delete` patches. Other patches are left to
/// the kubectl-based test.
pub fn build(dir: &Path) -> Vec<Value> {
    let kustomization = load_one(&dir.join("kustomization.yaml"));
    let mut objects = Vec::new();
    for entry in strings(&kustomization["resources"]) {
        let path = dir.join(&entry);
        if path.is_dir() {
            objects.extend(build(&path));
        } else {
            objects.extend(load(&path));
        }
    }
    for (field, kind) in [
        ("configMapGenerator", "ConfigMap"),
        ("secretGenerator", "Secret"),
    ] {
        for generator in kustomization[field].as_array().into_iter().flatten() {
            let mut data = serde_json::Map::new();
            for file in strings(&generator["files"]) {
                let (key, source) = file.split_once('=').unwrap_or_else(|| {
                    let base = Path::new(&file).file_name().unwrap().to_str().unwrap();
                    (base, file.as_str())
                });
                data.insert(key.to_owned(), Value::String(source.to_owned()));
            }
            objects.push(serde_json::json!({
                "apiVersion": "v1",
                "kind": kind,
                "metadata": {"name": generator["name"], "namespace": generator["namespace"]},
                "data": data,
            }));
        }
    }
    for component in strings(&kustomization["components"]) {
        objects.extend(build(&dir.join(component)));
    }
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        let Some(text) = patch["patch"].as_str() else {
            continue;
        };
        let patch: Value = serde_saphyr::from_str(text).unwrap();
        if patch["$patch"] == "delete" {
            let before = objects.len();
            objects.retain(|o| kind_name(o) != kind_name(&patch));
            assert_eq!(
                objects.len(),
                before - 1,
                "{}: delete patch {:?} must remove exactly one object",
                dir.display(),
                kind_name(&patch)
            );
        }
    }
    objects
}

pub fn base() -> Vec<Value> {
    build(&manifests())
}

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind_name(o) == (kind.to_owned(), name.to_owned()))
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// `find`, for a name used in more than one namespace.
pub fn find_in<'a>(objects: &'a [Value], kind: &str, name: &str, namespace: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| {
            kind_name(o) == (kind.to_owned(), name.to_owned())
                && str_at(o, "/metadata/namespace") == namespace
        })
        .unwrap_or_else(|| panic!("no {kind} {namespace}/{name}"))
}

pub fn webhooks(config: &Value) -> &Vec<Value> {
    config["webhooks"].as_array().expect("webhooks")
}

pub fn deployment(objects: &[Value]) -> &Value {
    find(objects, "Deployment", "nodescope")
}

/// Structural-schema basics the apiserver insists on: a type at every node
/// (or int-or-string / preserve-unknown-fields), objects where properties are.
pub fn assert_structural(path: &str, schema: &Value) {
    let open = schema["x-kubernetes-int-or-string"] == true
        || schema["x-kubernetes-preserve-unknown-fields"] == true;
    assert!(schema.get("type").is_some() || open, "{path}: no type");
    if let Some(props) = schema["properties"].as_object() {
        assert_eq!(schema["type"], "object", "{path}");
        for (k, v) in props {
            assert_structural(&format!("{path}.{k}"), v);
        }
    }
    if let Some(items) = schema.get("items") {
        assert_eq!(schema["type"], "array", "{path}");
        assert_structural(&format!("{path}[]"), items);
    }
    if let Some(extra) = schema.get("additionalProperties") {
        assert_structural(&format!("{path}{{}}"), extra);
    }
    for (k, v) in schema.as_object().unwrap() {
        assert!(!k.starts_with('&') && v != &Value::Null, "{path}.{k}");
    }
}

/// `(apiGroups, resources, verbs)` of each rule of a role, in order.
pub fn rules(role: &Value) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

/// `(apiGroups, resources, resourceNames, verbs)` of a rule.
pub type NamedRule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// Each rule of a role with its resourceNames, for roles that narrow by
/// name.
pub fn named_rules(role: &Value) -> Vec<NamedRule> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                strings(&r["apiGroups"]),
                strings(&r["resources"]),
                strings(&r["resourceNames"]),
                strings(&r["verbs"]),
            )
        })
        .collect()
}

/// `(name, fieldRef.fieldPath)` of each env var of `container`.
pub fn env_from_fields(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                str_at(e, "/name").to_owned(),
                str_at(e, "/valueFrom/fieldRef/fieldPath").to_owned(),
            )
        })
        .collect()
}
