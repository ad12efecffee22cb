//! README.md's `serve --demo` walkthrough, run as a reader would: the demo
//! server on loopback, then each shown `curl` line through bash. The README
//! shows one run's temporary directory and the default address; the test
//! reads both from the README's first block and puts this run's in their
//! place before running a command, and back before comparing its output.

use super::markdown::Block;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Stops the demo server however the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The address and directory a banner names: `listening on https://ADDR`
/// and `--cacert DIR/ca.crt`.
fn banner_names(banner: &[String]) -> (String, String) {
    let addr = banner
        .iter()
        .find_map(|l| l.strip_prefix("nodescope demo listening on https://"))
        .unwrap_or_else(|| panic!("no `listening on` line in {banner:?}"));
    let dir = banner
        .iter()
        .find_map(|l| {
            let rest = &l[l.find("--cacert ")? + "--cacert ".len()..];
            rest.split_whitespace().next()?.strip_suffix("/ca.crt")
        })
        .unwrap_or_else(|| panic!("no `--cacert DIR/ca.crt` in {banner:?}"));
    (addr.to_owned(), dir.to_owned())
}

fn require(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "the README demo test runs the README's own `{tool}` lines, and `{tool}` is not on PATH (.ci/run installs it)"
    );
}

pub fn run(bin: &str, blocks: &[Block]) {
    require("curl");
    require("jq");
    let steps: Vec<(String, Vec<String>)> = blocks.iter().flat_map(Block::steps).collect();
    let (start, shown_banner) = steps.first().expect("the demo has blocks");
    assert_eq!(
        start, "nodescope serve --demo",
        "README.md's first demo block starts the server"
    );
    let (shown_addr, shown_dir) = banner_names(shown_banner);

    let mut child = Command::new(bin)
        .args(["serve", "--demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary runs");
    let stdout = child.stdout.take().expect("piped");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let banner: Vec<String> = (0..shown_banner.len())
        .map(|_| {
            lines
                .next()
                .expect("the demo prints its banner")
                .expect("utf-8 banner")
        })
        .collect();
    let (addr, dir) = banner_names(&banner);
    let shown = |text: &str| text.replace(&dir, &shown_dir).replace(&addr, &shown_addr);
    let banner: Vec<String> = banner.iter().map(|l| shown(l)).collect();
    assert_eq!(
        &banner, shown_banner,
        "the banner of `nodescope serve --demo`"
    );

    for (command, expected) in &steps[1..] {
        let real = command
            .replace(&shown_dir, &dir)
            .replace(&shown_addr, &addr);
        let output = Command::new("bash")
            .args(["-o", "pipefail", "-c", &real])
            .stdin(Stdio::null())
            .output()
            .expect("bash runs");
        let printed = shown(&String::from_utf8_lossy(&output.stdout));
        assert!(
            output.status.success(),
            "README.md: `{command}` failed ({}): {}{}",
            output.status,
            printed,
            String::from_utf8_lossy(&output.stderr)
        );
        let printed: Vec<&str> = printed.lines().collect();
        assert_eq!(printed, *expected, "README.md: the output of `{command}`");
    }
    drop(server);
}
