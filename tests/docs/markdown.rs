//! Finding the examples: the repository's Markdown files and their fenced
//! blocks, read the way trycmd reads them.

use std::path::{Path, PathBuf};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file of the repository, build outputs and hidden
/// directories aside, sorted so that failures come in a stable order.
pub fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(root(), &mut out);
    out.sort();
    out
}

/// A ```` ```console ```` block: where it starts, whether it is marked
/// `ignore` (trycmd skips it), and its lines between the fences.
pub struct Block {
    pub line: usize,
    pub ignored: bool,
    pub lines: Vec<String>,
}

impl Block {
    /// The commands of the block: each `$ ` line, with the lines a
    /// trailing `\` continues.
    pub fn commands(&self) -> Vec<String> {
        self.steps()
            .into_iter()
            .map(|(command, _)| command)
            .collect()
    }

    /// The commands with the output shown under each.
    pub fn steps(&self) -> Vec<(String, Vec<String>)> {
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        let mut continued = false;
        for line in &self.lines {
            if let Some(command) = line.strip_prefix("$ ") {
                steps.push((command.to_owned(), Vec::new()));
                continued = command.ends_with('\\');
            } else if let Some((command, output)) = steps.last_mut() {
                if continued {
                    command.push('\n');
                    command.push_str(line);
                    continued = line.ends_with('\\');
                } else {
                    output.push(line.clone());
                }
            }
        }
        steps
    }
}

/// The console blocks of `file`. A fence with no language is refused:
/// trycmd would run it as commands, and a reader sees no hint of what it
/// holds, so it must say `text`, `sh`, `console` or the like.
pub fn console_blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut blocks = Vec::new();
    let mut open: Option<(String, Option<Block>)> = None;
    for (index, line) in text.lines().enumerate() {
        let ticks = line.chars().take_while(|c| *c == '`').count();
        match &mut open {
            Some((fence, block)) => {
                if line.starts_with(fence.as_str()) && line[fence.len()..].trim().is_empty() {
                    if let Some(block) = block.take() {
                        blocks.push(block);
                    }
                    open = None;
                } else if let Some(block) = block {
                    block.lines.push(line.to_owned());
                }
            }
            None if line.trim_start().starts_with("```console") && ticks == 0 => {
                panic!(
                    "{}:{}: an indented console block is not run by trycmd; start its fences at column 0",
                    file.display(),
                    index + 1
                );
            }
            None if ticks >= 3 => {
                let info = line[ticks..].trim();
                assert!(
                    !info.is_empty(),
                    "{}:{}: a fenced block needs a language (`text`, `sh`, `console`, ...)",
                    file.display(),
                    index + 1
                );
                let mut words = info.split(',');
                let block = match words.next() {
                    Some("console" | "trycmd") => Some(Block {
                        line: index + 1,
                        ignored: words.any(|w| w == "ignore"),
                        lines: Vec::new(),
                    }),
                    _ => None,
                };
                open = Some((line[..ticks].to_owned(), block));
            }
            None => {}
        }
    }
    assert!(
        open.is_none(),
        "{}: a fence is never closed",
        file.display()
    );
    blocks
}
