//! Issue #42, "fail closed and say so": nothing is written through a link,
//! a directory loop is walked once, a closed stdout ends quietly with exit
//! 0, and every refusal names its file, flag or object in words. Where
//! files are involved, their bytes (and modes) are compared before and
//! after.

use super::*;
use std::os::unix::fs::{symlink, PermissionsExt};

/// Bytes and permission bits of every entry in `dir` (links as their
/// target path, not followed; directories as no bytes), sorted by name.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, u32)> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("listed")
        .map(|e| {
            let path = e.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            let bytes = if meta.file_type().is_symlink() {
                std::fs::read_link(&path)
                    .expect("link")
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes()
            } else if meta.is_dir() {
                Vec::new()
            } else {
                std::fs::read(&path).expect("read")
            };
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, bytes, meta.permissions().mode())
        })
        .collect();
    entries.sort();
    entries
}

fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    let path = path.to_str().expect("utf-8").to_owned();
    (dir, path)
}

/// Exit code and the whole of stderr.
fn exits_with(output: &Output, code: i32, stderr_text: &str) {
    assert_exit(output, code);
    assert_eq!(stderr(output), stderr_text);
}

#[test]
fn certs_force_refuses_a_tls_key_that_links_outside_out_and_writes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let outside = root.path().join("outside");
    std::fs::write(&outside, "someone else's file\n").expect("written");
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).expect("mode");
    let out = root.path().join("out");
    let out_arg = out.to_str().expect("utf-8");
    assert_exit(
        &nodescope(&["certs", "--host", "a.example", "--out", out_arg]),
        0,
    );
    std::fs::remove_file(out.join("tls.key")).expect("removed");
    symlink(&outside, out.join("tls.key")).expect("link");
    let before = (snapshot(root.path()), snapshot(&out));
    let output = nodescope(&["certs", "--host", "a.example", "--out", out_arg, "--force"]);
    exits_with(
        &output,
        2,
        &format!(
            "nodescope: {out_arg}/tls.key is a symbolic link (to {}); nodescope does not write \
             through links: remove it, or choose another --out\n",
            outside.display()
        ),
    );
    assert_eq!(stdout(&output), "");
    assert_eq!((snapshot(root.path()), snapshot(&out)), before);
    let outside_meta = std::fs::metadata(&outside).expect("meta");
    assert_eq!(outside_meta.permissions().mode() & 0o777, 0o644);
    assert_eq!(
        std::fs::read(&outside).expect("read"),
        b"someone else's file\n"
    );
}

#[test]
fn certs_out_that_is_a_file_is_refused_in_words_and_left_as_it_was() {
    let (_dir, path) = temp_file("not-a-dir", "hello\n");
    let output = nodescope(&["certs", "--host", "a.example", "--out", &path]);
    exits_with(
        &output,
        2,
        &format!("nodescope: --out {path}: is a file, not a directory\n"),
    );
    assert_eq!(std::fs::read(&path).expect("read"), b"hello\n");
}

#[test]
fn checkpoints_file_that_is_a_regular_file_is_refused_in_words_and_left_as_it_was() {
    let (_dir, path) = temp_file("checkpoints", "hello\n");
    let output = nodescope(&[
        "recommend",
        "--store",
        "file:examples/recommend/store",
        "--metrics",
        "file:examples/recommend/metrics",
        "--checkpoints",
        &format!("file:{path}"),
    ]);
    exits_with(
        &output,
        2,
        &format!("nodescope: --checkpoints {path}: is a file, not a directory\n"),
    );
    assert_eq!(stdout(&output), "");
    assert_eq!(std::fs::read(&path).expect("read"), b"hello\n");
}

#[test]
fn a_checkpoints_value_that_is_none_of_them_lists_every_form() {
    let output = nodescope(&[
        "recommend",
        "--store",
        "file:examples/recommend/store",
        "--metrics",
        "file:examples/recommend/metrics",
        "--checkpoints",
        "bogus",
    ]);
    exits_with(
        &output,
        2,
        "nodescope: --checkpoints \"bogus\": expected kube, upstream, file:DIR, upstream:DIR or none\n",
    );
}

/// `dir/sub/balloon.yaml` (2 objects) and `dir/sub/back -> ..`, a loop.
fn looped_dir(file: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).expect("dir");
    std::fs::copy(root().join(file), sub.join("objects.yaml")).expect("copied");
    symlink("..", sub.join("back")).expect("link");
    dir
}

#[test]
fn dry_run_reads_a_file_in_a_directory_loop_once() {
    let dir = looped_dir("examples/manifests/balloon.yaml");
    let path = dir.path().to_str().expect("utf-8");
    let output = nodescope(&["dry-run", "-f", path]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.ends_with("2 objects: 2 allowed, 0 denied, 0 warnings, 0 errors\n"),
        "{text}"
    );
    assert_eq!(
        text.matches("objects.yaml#").count(),
        text.lines().count() - 2
    );
    assert_eq!(stderr(&output), "");
}

#[test]
fn a_file_reached_by_two_links_in_one_walk_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        root().join("examples/manifests/balloon.yaml"),
        dir.path().join("a.yaml"),
    )
    .expect("copied");
    symlink("a.yaml", dir.path().join("b.yaml")).expect("link");
    let output = nodescope(&["dry-run", "-f", dir.path().to_str().expect("utf-8")]);
    assert_exit(&output, 0);
    assert!(stdout(&output).ends_with("2 objects: 2 allowed, 0 denied, 0 warnings, 0 errors\n"));
    assert!(!stdout(&output).contains("b.yaml"));
}

#[test]
fn update_plan_reads_a_store_in_a_directory_loop_once() {
    let dir = looped_dir("examples/update/cluster.yaml");
    let store = format!("file:{}", dir.path().display());
    let looped = nodescope(&["update", "--plan", "--store", &store]);
    let plain = nodescope(&[
        "update",
        "--plan",
        "--store",
        "file:examples/update/cluster.yaml",
    ]);
    assert_exit(&looped, 0);
    assert_eq!(stderr(&looped), "");
    assert_eq!(stdout(&looped), stdout(&plain));
}

/// Runs `args` with stdout a pipe whose reading end is already closed, so
/// that the first write fails with EPIPE, whenever it comes.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // Close-on-exec, so that no other test's child inherits the reading
    // end and keeps the pipe open. SAFETY: `fds` is two ints to fill.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        0,
        "pipe"
    );
    // SAFETY: both descriptors are new and owned here.
    let (reader, writer) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    let child = command(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child.wait_with_output().expect("the binary finishes")
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_exit_0() {
    let commands: &[&[&str]] = &[
        &["test", "examples/tests"],
        &["dry-run", "-f", "examples/manifests"],
        &[
            "update",
            "--plan",
            "--store",
            "file:examples/update/cluster.yaml",
        ],
        &[
            "balloon",
            "status",
            "--store",
            "file:examples/balloon/cluster.yaml",
        ],
        &[
            "features",
            "--params",
            "examples/features/features.yaml",
            "-f",
            "examples/features/vpas.yaml",
        ],
        &["recommend", "--demo"],
        &["version"],
        &["completion", "bash"],
    ];
    for args in commands {
        let output = with_closed_stdout(args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

/// Nine levels of ten aliases: a few lines that expand to a billion nodes.
fn alias_bomb() -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("  a{i}: &a{i} [{refs}]\n"));
    }
    text
}

#[test]
fn a_yaml_alias_bomb_is_refused_in_words_with_its_limit() {
    let (_dir, path) = temp_file("bomb.yaml", &alias_bomb());
    let words = "document 1: YAML has too many alias expansions (more than 1,000,000)";
    exits_with(
        &nodescope(&["dry-run", "-f", &path]),
        2,
        &format!("nodescope: {path}: {words}\n"),
    );
    exits_with(
        &nodescope(&["update", "--plan", "--store", &format!("file:{path}")]),
        2,
        &format!("nodescope: update: {path}: {words}\n"),
    );
}

#[test]
fn binary_input_is_not_valid_utf_8_in_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("binary.yaml");
    // No byte order mark: YAML reads UTF-16 that starts with one.
    std::fs::write(&path, [b'a', b':', b' ', 0x80, 0xff, b'\n', 0xc3]).expect("written");
    let path = path.to_str().expect("utf-8");
    let store = format!("file:{path}");
    let cases: &[(&[&str], &str)] = &[
        (&["dry-run", "-f", path], ""),
        (&["test", path], ""),
        (&["update", "--plan", "--store", &store], "update: "),
        (
            &["balloon", "status", "--store", &store],
            "balloon status: ",
        ),
        (
            &[
                "recommend",
                "--store",
                &store,
                "--metrics",
                "file:examples/recommend/metrics",
            ],
            "",
        ),
    ];
    for (args, prefix) in cases {
        exits_with(
            &nodescope(args),
            2,
            &format!("nodescope: {prefix}{path}: not valid UTF-8\n"),
        );
    }
}

#[test]
fn store_file_without_a_path_says_the_flag_needs_one() {
    for (args, prefix) in [
        (&["update", "--plan", "--store", "file:"][..], "update: "),
        (
            &["balloon", "status", "--store", "file:"][..],
            "balloon status: ",
        ),
        (
            &["recommend", "--store", "file:", "--metrics", "file:x"][..],
            "",
        ),
    ] {
        exits_with(
            &nodescope(args),
            2,
            &format!("nodescope: {prefix}--store file: needs a path, as in file:./dir\n"),
        );
    }
}

#[test]
fn a_store_document_that_is_a_bare_number_is_refused_at_its_place() {
    let (_dir, path) = temp_file("number.yaml", "5\n");
    exits_with(
        &nodescope(&["update", "--plan", "--store", &format!("file:{path}")]),
        2,
        &format!(
            "nodescope: update: {path}: document 1 (line 1): not an object (a mapping with \
             apiVersion, kind and metadata)\n"
        ),
    );
}

#[test]
fn what_a_store_holds_is_counted_in_english_plurals() {
    exits_with(
        &nodescope(&["update", "--plan", "--store", "file:examples/store"]),
        2,
        "nodescope: update: --store file:examples/store: holds only 1 ConfigMap, 2 Features, \
         1 LimitRange, 2 Namespaces, 1 VerticalPodAutoscaler; the plan is made for Pods (with \
         their DaemonSets, VerticalPodAutoscalers, Nodes and LimitRanges)\n",
    );
}

#[test]
fn the_same_params_path_twice_is_said_to_be_given_twice() {
    let params = "examples/store/features.yaml";
    exits_with(
        &nodescope(&[
            "dry-run",
            "-f",
            "examples/manifests/balloon.yaml",
            "--params",
            params,
            "--params",
            params,
        ]),
        2,
        "nodescope: examples/store/features.yaml: the same file is given twice; give it once\n",
    );
}

#[test]
fn a_bad_value_from_an_environment_variable_blames_the_variable() {
    let output = command(&["serve", "--store", "file:examples/store"])
        .env("NODESCOPE_RELOAD_INTERVAL", "0")
        .output()
        .expect("the binary runs");
    exits_with(
        &output,
        2,
        "error: invalid value '0' for NODESCOPE_RELOAD_INTERVAL (the environment variable of \
         --reload-interval): expected a whole number of seconds >= 1, not \"0\"\n\nFor more \
         information, try '--help'.\n",
    );
    // Given on the command line, the flag is named as clap names it.
    let output = command(&[
        "serve",
        "--store",
        "file:examples/store",
        "--reload-interval",
        "0",
    ])
    .env("NODESCOPE_RELOAD_INTERVAL", "0")
    .output()
    .expect("the binary runs");
    exits_with(
        &output,
        2,
        "error: invalid value '0' for '--reload-interval <RELOAD_INTERVAL>': expected a whole \
         number of seconds >= 1, not \"0\"\n\nFor more information, try '--help'.\n",
    );
}

#[test]
fn json_documents_one_after_another_are_read_as_kubectl_reads_them() {
    let objects: Vec<String> = (0..3)
        .map(|i| {
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{i}","namespace":"default"}}}}"#
            )
        })
        .collect();
    let (_dir, path) = temp_file("stream.json", &(objects.join("\n") + "\n"));
    let output = nodescope(&["dry-run", "-f", &path]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).ends_with("3 objects: 3 allowed, 0 denied, 0 warnings, 0 errors\n"),
        "{}",
        stdout(&output)
    );
    exits_with(
        &nodescope(&["update", "--plan", "--store", &format!("file:{path}")]),
        2,
        &format!(
            "nodescope: update: --store file:{path}: holds only 3 ConfigMaps; the plan is made \
             for Pods (with their DaemonSets, VerticalPodAutoscalers, Nodes and LimitRanges)\n"
        ),
    );
}
