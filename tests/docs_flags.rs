//! docs/operations.md maps every flag of upstream's updater and recommender
//! to nodescope's. These tests keep that table true of the binary: a flag
//! the table gives nodescope is in `--help` under upstream's name, and a
//! flag it says nodescope lacks is refused.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nodescope");

/// Flags the table maps that another change adds to every cluster command
/// (the cluster flags, issue #31): allowed to be missing until it lands,
/// and checked as soon as it has.
const PENDING: &[&str] = &["--kubeconfig"];

fn operations() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
        .expect("docs/operations.md")
}

/// (upstream flag, nodescope's flag or None for "—") of each row of the
/// table under `heading`.
fn rows(heading: &str) -> Vec<(String, Option<String>)> {
    let text = operations();
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/operations.md has no {heading:?}"));
    let table = text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2);
    let flag = |cell: &str| -> Option<String> {
        let cell = cell.trim();
        let inner = cell.strip_prefix('`')?;
        let name = &inner[..inner.find('`')?];
        name.starts_with('-').then(|| name.to_owned())
    };
    table
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 4, "{heading}: {line}");
            let upstream = flag(cells[0]).unwrap_or_else(|| panic!("{heading}: {line}"));
            let ours = match cells[2].trim() {
                "—" => None,
                cell => Some(flag(cell).unwrap_or_else(|| panic!("{heading}: {line}"))),
            };
            (upstream, ours)
        })
        .collect()
}

/// The flags `nodescope <subcommand> --help` shows (hidden aliases are not).
fn shown(subcommand: &str) -> BTreeSet<String> {
    let output = Command::new(BIN)
        .args([subcommand, "--help"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line
                .strip_prefix("-")
                .filter(|rest| rest.chars().nth(1) == Some(','))
                .map_or(line, |rest| rest[2..].trim_start());
            let name: String = line
                .chars()
                .take_while(|c| *c == '-' || c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            name.starts_with("--").then_some(name)
        })
        .collect()
}

/// Whether the binary refuses `flag` as unknown: checked by running it,
/// so that a hidden alias of that name would count as present.
fn refused(subcommand: &str, flag: &str) -> bool {
    let output = Command::new(BIN)
        .args([subcommand, &format!("{flag}=1")])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .expect("runs");
    output.status.code() == Some(2)
        && String::from_utf8_lossy(&output.stderr)
            .starts_with(&format!("error: unexpected argument '{flag}' found"))
}

fn check(heading: &str, subcommand: &str) {
    let rows = rows(heading);
    assert!(rows.len() > 10, "{heading}: {rows:?}");
    let names: BTreeSet<&String> = rows.iter().map(|(upstream, _)| upstream).collect();
    assert_eq!(names.len(), rows.len(), "{heading}: a flag twice");
    let shown = shown(subcommand);
    for (upstream, ours) in &rows {
        match ours {
            Some(ours) => {
                // Where nodescope does the job, it takes upstream's name.
                assert_eq!(ours, upstream, "{heading}");
                assert!(
                    shown.contains(ours) || PENDING.contains(&ours.as_str()),
                    "{heading}: {ours} is not in `nodescope {subcommand} --help`"
                );
            }
            None => {
                assert!(
                    !shown.contains(upstream),
                    "{heading}: {upstream} is said to be absent but `nodescope {subcommand} --help` shows it"
                );
                assert!(
                    refused(subcommand, upstream),
                    "{heading}: {upstream} is said to be absent but `nodescope {subcommand}` takes it"
                );
            }
        }
    }
}

#[test]
fn the_updater_table_names_the_flags_nodescope_update_takes() {
    check("### Upstream's updater flags", "update");
}

#[test]
fn the_recommender_table_names_the_flags_nodescope_recommend_takes() {
    check("### Upstream's recommender flags", "recommend");
}

/// The admission controller's table: nodescope's webhook installs
/// differently, so its flags may have other names; each one named must be
/// in `--help`, and each absent one refused.
#[test]
fn the_admission_controller_table_names_the_flags_nodescope_serve_takes() {
    let heading = "### Upstream's admission controller flags";
    let rows = rows(heading);
    assert!(rows.len() > 10, "{rows:?}");
    let shown = shown("serve");
    for (upstream, ours) in &rows {
        match ours {
            Some(ours) => assert!(
                shown.contains(ours),
                "{heading}: {ours} is not in `nodescope serve --help`"
            ),
            None => assert!(
                refused("serve", upstream),
                "{heading}: {upstream} is said to be absent but `nodescope serve` takes it"
            ),
        }
    }
}

#[test]
fn the_help_parser_sees_long_flags_including_those_after_a_short_one() {
    let update = shown("update");
    for flag in ["--output", "--address", "--plan", "--vpa-object-namespace"] {
        assert!(update.contains(flag), "{flag}: {update:?}");
    }
    assert!(!update.contains("--metrics-listen"));
}
