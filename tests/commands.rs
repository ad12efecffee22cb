//! `serve` and `certs` as a user runs them: `serve --demo` from anywhere,
//! start-up errors said once, and what `certs` refuses to do.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Kills the server when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn serve_demo_run_from_an_empty_directory_is_ready_and_answers_with_the_bundled_policies() {
    let empty = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--demo", "--listen", "127.0.0.1:0"])
        .current_dir(empty.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _running = Running(child);
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let first = lines.next().expect("the demo banner");
    let addr: std::net::SocketAddr = first
        .strip_prefix("nodescope demo listening on https://")
        .unwrap_or_else(|| panic!("banner: {first}"))
        .parse()
        .unwrap();
    assert_eq!(lines.next().as_deref(), Some("try:"));
    // `curl --cacert CA ... --data-binary @REVIEW https://ADDR/ROUTE`
    let mut curls = Vec::new();
    for _ in 0..2 {
        let line = lines.next().expect("a curl line");
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |flag: &str| words[words.iter().position(|w| *w == flag).unwrap() + 1];
        let ca = std::fs::read(after("--cacert")).unwrap();
        let review = std::fs::read(after("--data-binary").trim_start_matches('@')).unwrap();
        curls.push((ca, review, words[words.len() - 1].to_owned()));
    }
    let (ca, _, _) = &curls[0];
    let mut client = H1::connect(addr, ca).await;
    let ready = client
        .send(request("GET", "/readyz", None, Vec::new()))
        .await;
    assert_eq!((ready.status, ready.text()), (200, "ok\n".to_owned()));

    let (_, review, url) = &curls[1];
    assert_eq!(url, &format!("https://{addr}/validate"));
    let reply = client.post("/validate", review.clone()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json()["response"],
        serde_json::json!({
            "uid": "58591f83-70e3-4cfe-a733-66e68bd05e12",
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": 403,
                "message": "ValidatingAdmissionPolicy 'nodescope-balloon-pods' with binding 'nodescope-balloon-pods' denied request: priorityClassName \"node-balloon\" is reserved for pods labelled node.kubernetes.io/balloon: \"true\"",
                "reason": "Forbidden"
            }
        })
    );
    // The example store came along too: the pod gets node-a-1's numbers.
    let (_, review, url) = &curls[0];
    assert_eq!(url, &format!("https://{addr}/mutate"));
    let reply = client.post("/mutate", review.clone()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["response"]["patchType"], "JSONPatch");
}

/// `serve` with working certificates and store, plus `args`.
fn serve(args: &[&str]) -> std::process::Output {
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let store = format!("--store=file:{}", root.join("examples/store").display());
    let cert = certs.path().join("tls.crt");
    let key = certs.path().join("tls.key");
    let mut all = vec![
        "serve",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    if !args.iter().any(|a| a.starts_with("--store")) {
        all.push(&store);
    }
    if !args.iter().any(|a| a.starts_with("--listen")) {
        all.push("--listen=127.0.0.1:0");
    }
    all.extend_from_slice(args);
    run_in(root, &all)
}

#[test]
fn a_missing_policies_directory_is_named_once_with_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let nope = dir.path().join("nope");
    let out = serve(&["--policies", nope.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "nodescope: --policies {}: No such file or directory (os error 2)\n",
            nope.display()
        )
    );
}

#[test]
fn a_missing_store_file_is_named_once_with_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let nope = dir.path().join("nope");
    let out = serve(&[&format!("--store=file:{}", nope.display())]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "nodescope: --store file:{}: No such file or directory (os error 2)\n",
            nope.display()
        )
    );
}

#[test]
fn an_address_in_use_is_named_once_with_its_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = serve(&[&format!("--listen={addr}")]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "nodescope: cannot listen on {addr} (--listen): Address already in use (os error 98)\n"
        )
    );
}

#[test]
fn a_store_flag_that_is_neither_kube_nor_a_file_is_refused_naming_the_flag_once() {
    let out = serve(&["--store=bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: invalid value 'bogus' for '--store <STORE>': expected `kube` or `file:PATH`\n\n\
         For more information, try '--help'.\n"
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused_in_words() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_certs(a.path());
    make_certs(b.path());
    let (cert, key) = (a.path().join("tls.crt"), b.path().join("tls.key"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = run_in(
        root,
        &[
            "serve",
            "--listen=127.0.0.1:0",
            "--store=file:examples/store",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "nodescope: {} does not match the certificate in {}: its public key is not the one the certificate names\n",
            key.display(),
            cert.display()
        )
    );
}

fn certs(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["certs", "--out", "out"];
    all.extend_from_slice(args);
    run_in(dir, &all)
}

#[test]
fn certs_refuses_to_replace_an_existing_ca_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        certs(dir.path(), &["--host", "localhost"]).status.code(),
        Some(0)
    );
    let ca = std::fs::read(dir.path().join("out/ca.crt")).unwrap();
    let key = std::fs::read(dir.path().join("out/tls.key")).unwrap();

    let again = certs(dir.path(), &["--host", "localhost"]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        stderr(&again),
        "nodescope: out/ca.crt already exists; pass --force to replace ca.crt, tls.crt and tls.key\n"
    );
    assert_eq!(std::fs::read(dir.path().join("out/ca.crt")).unwrap(), ca);
    assert_eq!(std::fs::read(dir.path().join("out/tls.key")).unwrap(), key);

    let forced = certs(dir.path(), &["--host", "localhost", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert_ne!(std::fs::read(dir.path().join("out/ca.crt")).unwrap(), ca);
    assert_ne!(std::fs::read(dir.path().join("out/tls.key")).unwrap(), key);
}

#[test]
fn certs_refuses_to_replace_an_existing_key_even_without_a_ca() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::fs::write(dir.path().join("out/tls.key"), "precious\n").unwrap();
    let out = certs(dir.path(), &["--host", "localhost"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "nodescope: out/tls.key already exists; pass --force to replace ca.crt, tls.crt and tls.key\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/tls.key")).unwrap(),
        "precious\n"
    );
    assert!(!dir.path().join("out/ca.crt").exists());
}

#[test]
fn certs_rejects_a_host_that_is_neither_a_dns_name_nor_an_ip_address() {
    let dir = tempfile::tempdir().unwrap();
    for (host, why) in [
        (
            "nodescope svc",
            "' ' is not allowed; a DNS name has only letters, digits, '-', '_' and '.'",
        ),
        (
            "https://nodescope",
            "':' is not allowed; a DNS name has only letters, digits, '-', '_' and '.'",
        ),
        (
            "nodescope..svc",
            "it has an empty label (two dots in a row, or a leading dot)",
        ),
        (
            "10.0.0.256",
            "it is not a valid IP address, and a DNS name cannot end in an all-numeric label",
        ),
        ("", "it is empty"),
    ] {
        let out = certs(
            dir.path(),
            &["--host", "localhost", &format!("--host={host}")],
        );
        assert_eq!(out.status.code(), Some(2), "{host}");
        assert_eq!(
            stderr(&out),
            format!("nodescope: --host {host:?} is neither a DNS name nor an IP address: {why}\n")
        );
    }
    assert!(!dir.path().join("out").exists(), "nothing is written");
    let fine = certs(
        dir.path(),
        &[
            "--host=nodescope.nodescope-system.svc",
            "--host=::1",
            "--host=*.example.com",
        ],
    );
    assert_eq!(fine.status.code(), Some(0), "{}", stderr(&fine));
}

#[test]
fn certs_rejects_zero_days() {
    let dir = tempfile::tempdir().unwrap();
    let out = certs(dir.path(), &["--host", "localhost", "--days", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: invalid value '0' for '--days <DAYS>': a certificate must be valid for at least 1 day\n\n\
         For more information, try '--help'.\n"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn log_format_and_key_type_are_explained_in_help() {
    let dir = tempfile::tempdir().unwrap();
    let serve =
        String::from_utf8_lossy(&run_in(dir.path(), &["serve", "--help"]).stdout).into_owned();
    for text in [
        "How log lines on stderr are written",
        "text: One line per event for people (colour on a terminal)",
        "json: One JSON object per event for log collectors",
    ] {
        assert!(
            serve.contains(text),
            "serve --help lacks {text:?}:\n{serve}"
        );
    }
    let certs =
        String::from_utf8_lossy(&run_in(dir.path(), &["certs", "--help"]).stdout).into_owned();
    for text in [
        "Key algorithm of the CA and the serving certificate",
        "ecdsa: ECDSA P-256: a TLS handshake costs the server about half of RSA's",
        "rsa:   RSA-2048, for clients or policies that require RSA",
    ] {
        assert!(
            certs.contains(text),
            "certs --help lacks {text:?}:\n{certs}"
        );
    }
}
