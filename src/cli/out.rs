//! Standard output, for every command that prints: a reader that stops
//! early (`nodescope dry-run -f dir | head -1`) closes the pipe, and the
//! next write fails with `EPIPE`. That is no error of the command's, and
//! kubectl ends quietly with exit 0 there; so writes through [`stdout`]
//! remember it, the command's error unwinds as any other, and the binary's
//! edge ([`closed`]) turns whatever it became into a quiet exit 0.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Standard output, locked; a write that finds the pipe closed is
/// remembered for [`closed`].
pub struct Stdout(std::io::StdoutLock<'static>);

/// The process's standard output.
#[must_use]
pub fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

/// Whether a write to standard output found it closed by its reader.
#[must_use]
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

fn noted<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    if let Err(error) = &result {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::Relaxed);
        }
    }
    result
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        noted(self.0.write(buf))
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        noted(self.0.write_all(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        noted(self.0.flush())
    }
}
