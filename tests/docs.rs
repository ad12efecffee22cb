//! The documentation's examples are tests. Every ```` ```console ```` block in
//! the repository's Markdown is run by trycmd from the repository root,
//! through the binary this build made, and its shown output and exit status
//! (`? 1` after the command) must be what the binary prints. When the output
//! changes on purpose, `TRYCMD=overwrite cargo test --test docs` rewrites
//! the docs; review the diff.
//!
//! What varies from run to run is written with trycmd's wildcards: `[..]`
//! for part of a line, `...` on a line of its own for any lines. The
//! `serve --demo` walkthrough of README.md needs a running server and
//! `curl`, which trycmd cannot give it, so those blocks are marked
//! ```` ```console,ignore ```` and run by `the_readme_demo_answers_as_shown`
//! below; no other file may use `ignore`, so nothing is skipped silently.

#[path = "docs/demo.rs"]
mod demo;
#[path = "docs/markdown.rs"]
mod markdown;

use markdown::{markdown_files, root, Block};

const BIN: &str = env!("CARGO_BIN_EXE_nodescope");

#[test]
fn every_console_example_prints_what_the_docs_show() {
    let files = markdown_files();
    let mut examples = 0;
    let mut demo = 0;
    for file in &files {
        for block in markdown::console_blocks(file) {
            if block.ignored {
                assert_eq!(
                    file.strip_prefix(root()).expect("under the root"),
                    std::path::Path::new("README.md"),
                    "{}:{}: only README.md's serve demo may be `console,ignore`",
                    file.display(),
                    block.line
                );
                demo += block.commands().len();
            } else {
                examples += block.commands().len();
            }
        }
    }
    // Printed so that a run says how much of the docs it checked.
    eprintln!(
        "docs: {examples} console examples in {} Markdown files run by trycmd, and {demo} of README.md's demo by the_readme_demo_answers_as_shown",
        files.len()
    );
    assert!(examples > 0, "no console example found: the scan is broken");
    let cases = trycmd::TestCases::new();
    cases
        .register_bin("nodescope", std::path::Path::new(BIN))
        .env("NO_COLOR", "1");
    for file in &files {
        cases.case(file);
    }
    cases.run();
}

#[test]
fn an_output_edited_by_hand_fails_the_docs_test() {
    // The guard itself is tested: a copy of an example whose shown output
    // is changed must fail, or the test above would pass anything.
    let dir = tempfile::tempdir().expect("temp dir");
    let edited = dir.path().join("edited.md");
    std::fs::write(
        &edited,
        "```console\n$ nodescope test policies/tests --run no-such-case\n? 2\nnodescope: edited by hand\n```\n",
    )
    .expect("written");
    let outcome = std::panic::catch_unwind(|| {
        let cases = trycmd::TestCases::new();
        cases
            .register_bin("nodescope", std::path::Path::new(BIN))
            .case(&edited);
        cases.run();
    });
    if std::env::var_os("TRYCMD").is_some_and(|mode| mode == "overwrite") {
        // Rewriting the docs: the copy must now show the real output.
        let rewritten = std::fs::read_to_string(&edited).expect("read back");
        assert!(
            rewritten.contains("matches none of the") && !rewritten.contains("edited by hand"),
            "TRYCMD=overwrite did not rewrite the edited output: {rewritten}"
        );
    } else {
        assert!(
            outcome.is_err(),
            "an example whose output was edited by hand passed"
        );
    }
}

#[test]
fn the_readme_demo_answers_as_shown() {
    let readme = root().join("README.md");
    let blocks: Vec<Block> = markdown::console_blocks(&readme)
        .into_iter()
        .filter(|b| b.ignored)
        .collect();
    assert!(
        !blocks.is_empty(),
        "README.md has no `console,ignore` demo blocks; remove this test with them"
    );
    demo::run(BIN, &blocks);
}
