//! What a fresh clone needs from the repository itself: a license that
//! matches Cargo.toml, and no file that reaches outside the checkout for
//! test data (a user's clone has nothing beside it).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_license_file_is_the_apache_license_cargo_toml_names() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        manifest
            .lines()
            .any(|l| l.trim() == r#"license = "Apache-2.0""#),
        "Cargo.toml names Apache-2.0"
    );
    let license = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    let head: Vec<&str> = license
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    assert_eq!(
        head,
        [
            "Apache License",
            "Version 2.0, January 2004",
            "http://www.apache.org/licenses/"
        ]
    );
    assert!(
        license.contains("END OF TERMS AND CONDITIONS"),
        "the whole text"
    );
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if ["target", ".git", "corpus", "artifacts"].contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_in_the_repository_reads_test_data_from_beside_the_checkout() {
    // Spelled in two parts so this file does not match itself.
    let needle = format!("../{}", "shared");
    let mut all = Vec::new();
    files(root(), &mut all);
    assert!(all.len() > 100, "walked only {} files", all.len());
    let offenders: Vec<String> = all
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|text| text.contains(&needle)))
        .map(|p| p.strip_prefix(root()).unwrap_or(p).display().to_string())
        .collect();
    assert_eq!(offenders, Vec::<String>::new());
}

#[test]
fn the_captured_reviews_are_in_the_repository_with_their_readme() {
    let dir = root().join("tests/fixtures/admission-reviews");
    let mut reviews: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    reviews.sort();
    assert_eq!(reviews.len(), 24);
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("kube-apiserver **v1.36.2**"), "{readme}");
    for review in &reviews {
        let scenario = review
            .trim_end_matches(".json")
            .trim_end_matches(".mutate")
            .trim_end_matches(".validate");
        assert!(
            readme.contains(&format!("| {scenario} |")),
            "README describes {scenario}"
        );
    }
}

#[test]
fn every_test_control_plane_has_a_loopback_service_range() {
    // A `service:` webhook makes the apiserver dial the Service's IP: with a
    // range in 127.0.0.0/8, a shipped configuration applied as it is in a
    // test can only reach this machine.
    let mut all = Vec::new();
    files(&root().join("tests"), &mut all);
    let flag = "--service-cluster-ip-range=";
    let mut ranges = Vec::new();
    for path in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (at, _) in text.match_indices(flag) {
            let value: String = text[at + flag.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '/')
                .collect();
            if !value.is_empty() {
                let file = path.strip_prefix(root()).unwrap_or(path).display();
                ranges.push(format!("{file}: {value}"));
            }
        }
    }
    assert!(!ranges.is_empty(), "no control plane in tests/ sets {flag}");
    let off: Vec<&String> = ranges
        .iter()
        .filter(|r| !r.rsplit(": ").next().is_some_and(|v| v.starts_with("127.")))
        .collect();
    assert!(off.is_empty(), "{off:?}");
}
