//! Finding what the command line names: stdin, files, directories and
//! kustomizations. Every path must contribute at least one object: a CI
//! job whose glob or directory is empty must fail, not pass having checked
//! nothing.

use super::parse::{parse, parse_in_pieces, InputError, SourceDocument, STDIN};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The names that make a directory a kustomization, in kustomize's order.
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Something to read, found under a path.
enum Found {
    File(PathBuf),
    /// A directory to render, and the kustomization file in it.
    Kustomization(PathBuf, PathBuf),
}

/// Reads inputs, standard input at most once across all flags (a second
/// read would find it empty).
#[derive(Debug, Default)]
pub struct Inputs {
    /// The flag that read standard input, and what it read.
    stdin: Option<(String, String)>,
    /// Whether that flag may read it once more ([`Inputs::rewind`]).
    rewound: bool,
    exclude: Option<globset::GlobSet>,
}

impl Inputs {
    /// Inputs that leave out what `patterns` match among the files and
    /// directories found under a directory (`--exclude`). A pattern
    /// matches the path as found, without a leading `./`, or the file or
    /// directory name alone; `*` stays within one path segment and `**`
    /// spans several. A path named on the command line is always read.
    ///
    /// # Errors
    /// A pattern that is not a glob.
    pub fn excluding(patterns: &[String]) -> Result<Self, InputError> {
        if patterns.is_empty() {
            return Ok(Self::default());
        }
        let mut set = globset::GlobSetBuilder::new();
        for pattern in patterns {
            let glob = globset::GlobBuilder::new(pattern.trim_start_matches("./"))
                .literal_separator(true)
                .build()
                .map_err(|e| InputError::Usage(format!("--exclude {pattern}: {}", e.kind())))?;
            set.add(glob);
        }
        let set = set
            .build()
            .map_err(|e| InputError::Usage(format!("--exclude: {e}")))?;
        Ok(Self {
            exclude: Some(set),
            ..Self::default()
        })
    }

    /// Whether `--exclude` leaves `path` out.
    fn excluded(&self, path: &Path) -> bool {
        let Some(set) = &self.exclude else {
            return false;
        };
        let relative = path.strip_prefix(".").unwrap_or(path);
        set.is_match(relative) || path.file_name().is_some_and(|name| set.is_match(name))
    }

    /// Every document under `paths`, given with `flag` (`-f`, `--params`):
    /// `-` is stdin; a directory is read recursively, a kustomization in it
    /// rendered.
    ///
    /// # Errors
    /// An unreadable or empty path, a syntax error, a failed render.
    pub fn read(
        &mut self,
        flag: &str,
        paths: &[impl AsRef<Path>],
    ) -> Result<Vec<SourceDocument>, InputError> {
        let mut documents = Vec::new();
        for path in paths {
            let path = path.as_ref();
            documents.extend(self.read_one(&format!("{flag} {}", path.display()), path)?);
        }
        Ok(documents)
    }

    /// The documents under one path, which messages about the path itself
    /// call `name` (`-f examples`, `suite.yaml: params[0]: ../store`).
    ///
    /// # Errors
    /// As [`Inputs::read`].
    pub fn read_one(&mut self, name: &str, path: &Path) -> Result<Vec<SourceDocument>, InputError> {
        let mut documents = Vec::new();
        self.each_one(name, path, &mut |found: Vec<SourceDocument>| {
            documents.extend(found);
            Ok::<(), InputError>(())
        })?;
        Ok(documents)
    }

    /// What [`Inputs::read`] gives, handed to `each` a file (or a piece of a
    /// large file) at a time, so that the documents are never all in
    /// memory. Standard input is kept, so that after [`Inputs::rewind`] the
    /// same flag can go through it again.
    ///
    /// # Errors
    /// As [`Inputs::read`], and what `each` returns.
    pub fn each<E: From<InputError>>(
        &mut self,
        flag: &str,
        paths: &[impl AsRef<Path>],
        each: &mut impl FnMut(Vec<SourceDocument>) -> Result<(), E>,
    ) -> Result<(), E> {
        for path in paths {
            let path = path.as_ref();
            self.each_one(&format!("{flag} {}", path.display()), path, each)?;
        }
        Ok(())
    }

    /// Lets the flag that read standard input read it once more (what it
    /// read is kept), for a second pass over the same flags.
    pub fn rewind(&mut self) {
        self.rewound = true;
    }

    /// Standard input's text, read the first time `name` asks for it.
    fn stdin(&mut self, name: &str) -> Result<&str, InputError> {
        let usage = |message: &str| InputError::Usage(format!("{name}: {message}"));
        match &self.stdin {
            Some((reader, _)) if self.rewound && reader == name => self.rewound = false,
            Some(_) => return Err(usage("standard input can be read only once")),
            None => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .map_err(|e| usage(&format!("cannot read standard input: {}", reason(&e))))?;
                self.stdin = Some((name.to_owned(), text));
            }
        }
        Ok(self.stdin.as_ref().map_or("", |(_, text)| text.as_str()))
    }

    fn each_one<E: From<InputError>>(
        &mut self,
        name: &str,
        path: &Path,
        each: &mut impl FnMut(Vec<SourceDocument>) -> Result<(), E>,
    ) -> Result<(), E> {
        let usage = |message: &str| InputError::Usage(format!("{name}: {message}"));
        let mut count = 0;
        if path == Path::new("-") {
            let text = self.stdin(name)?;
            parse_in_pieces(STDIN, text, |found: Vec<SourceDocument>| {
                count += found.len();
                each(found)
            })?;
            if count == 0 {
                return Err(usage("standard input holds no objects").into());
            }
            return Ok(());
        }
        let meta = std::fs::metadata(path).map_err(|e| usage(&reason(&e)))?;
        let mut found = Vec::new();
        if meta.is_dir() {
            let mut visited = crate::manifest::Visited::default();
            walk(path, &|p| self.excluded(p), &mut found, &mut visited)?;
            if found.is_empty() {
                return Err(
                    usage("holds no .yaml, .yml or .json file and no kustomization").into(),
                );
            }
        } else {
            match path.file_name().and_then(|n| n.to_str()) {
                Some(n) if KUSTOMIZATION_FILES.contains(&n) => {
                    let dir = match path.parent() {
                        Some(dir) if !dir.as_os_str().is_empty() => dir,
                        _ => Path::new("."),
                    };
                    found.push(Found::Kustomization(dir.to_owned(), path.to_owned()));
                }
                _ => found.push(Found::File(path.to_owned())),
            }
        }
        let mut counted = |documents: Vec<SourceDocument>| {
            count += documents.len();
            each(documents)
        };
        for item in found {
            match item {
                Found::File(file) => {
                    let name = file.display().to_string();
                    let text = std::fs::read_to_string(&file).map_err(|e| InputError::File {
                        path: name.clone(),
                        message: reason(&e),
                    })?;
                    parse_in_pieces(&name, &text, &mut counted)?;
                }
                Found::Kustomization(dir, file) => counted(render(&dir, &file)?)?,
            }
        }
        if count == 0 {
            return Err(usage("holds no objects").into());
        }
        Ok(())
    }

    /// What each `-k` directory renders to.
    ///
    /// # Errors
    /// A path that is not a kustomization, a failed or empty render.
    pub fn kustomize(
        &mut self,
        dirs: &[impl AsRef<Path>],
    ) -> Result<Vec<SourceDocument>, InputError> {
        let mut documents = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let usage =
                |message: &str| InputError::Usage(format!("-k {}: {message}", dir.display()));
            let meta = std::fs::metadata(dir).map_err(|e| usage(&reason(&e)))?;
            let file = meta
                .is_dir()
                .then(|| kustomization_file(dir))
                .flatten()
                .ok_or_else(|| {
                    usage("not a directory with a kustomization.yaml, kustomization.yml or Kustomization")
                })?;
            let rendered = render(dir, &file)?;
            if rendered.is_empty() {
                return Err(usage("the kustomization renders no objects"));
            }
            documents.extend(rendered);
        }
        Ok(documents)
    }
}

/// The kustomization file of `dir`, if it is a kustomization.
fn kustomization_file(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|file| file.is_file())
}

/// `.yaml`, `.yml` and `.json` files under `dir`, sorted, dot entries
/// skipped (Kubernetes Secret and ConfigMap volumes keep old generations in
/// them); a directory with a kustomization is rendered whole, as
/// `kubectl apply -k` would, not read file by file (its kustomization file
/// is not a Kubernetes object, and its resources may be patched). What
/// was reached before, by a link back up the tree or a second link to one
/// file, is read once ([`crate::manifest::Visited`]).
fn walk(
    dir: &Path,
    excluded: &dyn Fn(&Path) -> bool,
    found: &mut Vec<Found>,
    visited: &mut crate::manifest::Visited,
) -> Result<(), InputError> {
    if std::fs::metadata(dir).is_ok_and(|meta| !visited.first(&meta)) {
        return Ok(());
    }
    if let Some(file) = kustomization_file(dir) {
        found.push(Found::Kustomization(dir.to_owned(), file));
        return Ok(());
    }
    let unreadable = |e: std::io::Error| InputError::File {
        path: dir.display().to_string(),
        message: reason(&e),
    };
    let entries = crate::manifest::sorted_entries(dir).map_err(unreadable)?;
    for entry in entries {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || excluded(&entry) {
            continue;
        }
        if entry.is_dir() {
            walk(&entry, excluded, found, visited)?;
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            if std::fs::metadata(&entry).is_ok_and(|meta| !visited.first(&meta)) {
                continue;
            }
            found.push(Found::File(entry));
        }
    }
    Ok(())
}

/// Renders a kustomization with `kubectl kustomize`.
///
/// Why kubectl: crates.io has no kustomize in Rust (the Rust tools that
/// read kustomizations, such as syncable-cli, shell out too), and
/// re-implementing kustomize's patch, generator and component semantics
/// would render differently from the `kubectl apply -k` the manifests are
/// written for. kubectl's built-in kustomize is the renderer of record.
///
/// The documents are named by the kustomization file and numbered in the
/// order kustomize prints them; their lines are those of the rendered
/// output, which no file has, so none is given.
fn render(dir: &Path, file: &Path) -> Result<Vec<SourceDocument>, InputError> {
    let failed = |message: String| InputError::File {
        path: dir.display().to_string(),
        message,
    };
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            match e.kind() {
            std::io::ErrorKind::NotFound => failed(
                "rendering this kustomization needs `kubectl kustomize`, and kubectl is not on PATH"
                    .to_owned(),
            ),
            _ => failed(format!("cannot run `kubectl kustomize`: {}", reason(&e))),
        }
        })?;
    if !output.status.success() {
        return Err(failed(format!(
            "`kubectl kustomize` failed: {}",
            kubectl_error(&output.stderr)
        )));
    }
    let text = String::from_utf8(output.stdout)
        .map_err(|_| failed("`kubectl kustomize` printed text that is not UTF-8".to_owned()))?;
    let mut documents = parse(&file.display().to_string(), &text)?;
    for document in &mut documents {
        document.location.line = None;
    }
    Ok(documents)
}

/// kubectl's reason, on one line: the `err="..."` of a klog line
/// (`E1125 ... "command failed" err="..."`), else its text without the
/// `error: ` prefix.
fn kubectl_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if let Some(start) = text.find(" err=\"") {
        let mut reason = String::new();
        let mut chars = text[start + 6..].chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return reason,
                '\\' => reason.extend(chars.next()),
                c => reason.push(c),
            }
        }
    }
    let text = text.strip_prefix("error: ").unwrap_or(text);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A manifest reader's error (the policy directory's, a suite
/// directory's) as an input error, its cause said once.
#[must_use]
pub fn manifest_error(error: crate::manifest::ManifestError) -> InputError {
    match error {
        crate::manifest::ManifestError::Io { path, source } => InputError::File {
            path,
            message: reason(&source),
        },
        crate::manifest::ManifestError::Syntax { path, message } => {
            InputError::File { path, message }
        }
    }
}

/// An I/O error's reason in plain words, once: `no such file or
/// directory`, without the `(os error 2)` that only repeats it.
#[must_use]
pub fn reason(error: &std::io::Error) -> String {
    // What `read_to_string` says of a binary file.
    if error.kind() == std::io::ErrorKind::InvalidData
        && error.to_string() == "stream did not contain valid UTF-8"
    {
        return "not valid UTF-8".to_owned();
    }
    let text = error.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_is_said_once_in_plain_words() {
        let missing = std::fs::metadata("/no/such/path").unwrap_err();
        assert_eq!(reason(&missing), "no such file or directory");
    }

    #[test]
    fn kubectls_reason_is_taken_from_its_log_line_or_its_error_line() {
        let klog = br#"E1125 11:54:39.890003   26281 run.go:72] "command failed" err="loading KV pairs: file sources: [tls.crt=certs/tls.crt]: evalsymlink failure on 'x' : lstat \"x\": no such file or directory"
"#;
        assert_eq!(
            kubectl_error(klog),
            r#"loading KV pairs: file sources: [tls.crt=certs/tls.crt]: evalsymlink failure on 'x' : lstat "x": no such file or directory"#
        );
        assert_eq!(
            kubectl_error(
                b"error: unable to find one of 'kustomization.yaml'\n in directory 'x'\n"
            ),
            "unable to find one of 'kustomization.yaml' in directory 'x'"
        );
    }
}
