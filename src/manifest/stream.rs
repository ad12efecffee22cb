//! The structural scan behind [`super::stream_json_items`]: items of a JSON
//! `List` or array found block by block, one in memory at a time. Finds
//! item boundaries only; parsing an item is the caller's.

use serde::de::IgnoredAny;
use std::io::Read;

/// Bytes read from the file per block.
pub(super) const BLOCK: usize = 1 << 20;

/// What a list said of itself before its `items`: typed lists (`PodList`)
/// from the API leave `kind` and `apiVersion` out of their items.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ListHead {
    pub kind: Option<String>,
    pub api_version: Option<String>,
}

pub(super) struct Items<R, F> {
    reader: R,
    each: F,
    /// Whether typed lists (`PodList`, any `*List`) stream, not only `List`.
    typed: bool,
    head: ListHead,
    buf: Vec<u8>,
    /// The smallest read.
    block: usize,
    /// Everything before `pos` has been handled.
    pos: usize,
    eof: bool,
}

/// Why the scan stopped short of a full answer.
enum Stop {
    /// The text is not what this scan streams, or not valid JSON.
    Decline,
    Io(std::io::Error),
}

type Step<T> = Result<T, Stop>;

impl<R: Read, F: FnMut(&ListHead, &str) -> bool> Items<R, F> {
    pub(super) fn new(reader: R, each: F, block: usize, typed: bool) -> Self {
        Items {
            reader,
            each,
            typed,
            head: ListHead::default(),
            buf: Vec::new(),
            block: block.max(1),
            pos: 0,
            eof: false,
        }
    }

    pub(super) fn run(mut self) -> Result<bool, std::io::Error> {
        match self.document() {
            Ok(streamed) => Ok(streamed),
            Err(Stop::Decline) => Ok(false),
            Err(Stop::Io(e)) => Err(e),
        }
    }

    fn document(&mut self) -> Step<bool> {
        let streamed = match self.peek()? {
            Some(b'[') => {
                self.pos += 1;
                self.items()?;
                true
            }
            Some(b'{') => {
                self.pos += 1;
                self.list()?
            }
            _ => return Err(Stop::Decline),
        };
        match self.peek()? {
            None => Ok(streamed),
            Some(_) => Err(Stop::Decline),
        }
    }

    /// The members of an object after its `{`: `true` when `kind` is
    /// `List` and `items` an array, whose items are streamed.
    fn list(&mut self) -> Step<bool> {
        let (mut kind, mut has_items) = (None::<bool>, false);
        if self.peek()? == Some(b'}') {
            self.pos += 1;
            return Ok(false);
        }
        loop {
            let key = self.value()?;
            let key = span(&self.buf, key).to_vec();
            if key.first() != Some(&b'"') || serde_json::from_slice::<IgnoredAny>(&key).is_err() {
                return Err(Stop::Decline);
            }
            self.expect(b':')?;
            if key == b"\"items\"" {
                if has_items || self.peek()? != Some(b'[') {
                    return Err(Stop::Decline);
                }
                self.pos += 1;
                self.items()?;
                has_items = true;
            } else {
                let value = self.value()?;
                let text =
                    std::str::from_utf8(span(&self.buf, value)).map_err(|_| Stop::Decline)?;
                serde_json::from_str::<IgnoredAny>(text).map_err(|_| Stop::Decline)?;
                if key == b"\"kind\"" {
                    // A repeated `kind` is left to serde_json, which rejects it.
                    if kind.is_some() {
                        return Err(Stop::Decline);
                    }
                    kind = Some(
                        text == "\"List\""
                            || (self.typed && text.ends_with("List\"") && text.len() > 6),
                    );
                    self.head.kind = serde_json::from_str(text).ok();
                } else if key == b"\"apiVersion\"" {
                    self.head.api_version = serde_json::from_str(text).ok();
                }
            }
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(kind == Some(true) && has_items);
                }
                _ => return Err(Stop::Decline),
            }
        }
    }

    /// The items of an array after its `[`, each handed to `each`.
    fn items(&mut self) -> Step<()> {
        if self.peek()? == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let item = self.value()?;
            let text = std::str::from_utf8(span(&self.buf, item)).map_err(|_| Stop::Decline)?;
            if text != "null" && !(self.each)(&self.head, text) {
                return Err(Stop::Decline);
            }
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(Stop::Decline),
            }
        }
    }

    /// Skips whitespace; the next byte, `None` at the end of the file.
    fn peek(&mut self) -> Step<Option<u8>> {
        loop {
            while let Some(&b) = self.buf.get(self.pos) {
                if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn expect(&mut self, byte: u8) -> Step<()> {
        if self.peek()? != Some(byte) {
            return Err(Stop::Decline);
        }
        self.pos += 1;
        Ok(())
    }

    /// The span of the value at the cursor, found by its structure
    /// alone (reading more of the file until it is complete); the
    /// cursor moves past it.
    fn value(&mut self) -> Step<(usize, usize)> {
        self.peek()?;
        loop {
            // `fill` moves the unhandled bytes to the front of `buf`.
            let start = self.pos;
            if let Some(end) = value_end(&self.buf, start, self.eof)? {
                self.pos = end;
                return Ok((start, end));
            }
            self.fill()?;
        }
    }

    /// Reads one more block, first dropping what was handled; `false`
    /// at the end of the file.
    fn fill(&mut self) -> Step<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        // Doubling, so a value larger than a block is scanned from its
        // start a logarithmic number of times.
        let want = self.block.max(self.buf.len());
        let read = loop {
            match (&mut self.reader)
                .take(want as u64)
                .read_to_end(&mut self.buf)
            {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        };
        if read == 0 {
            self.eof = true;
        }
        Ok(read > 0)
    }
}

/// The bytes of a span that `value` returned.
fn span(buf: &[u8], (start, end): (usize, usize)) -> &[u8] {
    buf.get(start..end).unwrap_or_default()
}

/// Where the JSON value starting at `start` ends, by its strings and
/// brackets; `Ok(None)` when `buf` ends first and more may follow.
/// Declines what cannot start or end a value; what is inside is checked
/// by whoever parses it.
fn value_end(buf: &[u8], start: usize, eof: bool) -> Step<Option<usize>> {
    let short = || if eof { Err(Stop::Decline) } else { Ok(None) };
    let mut depth = 0usize;
    let mut i = start;
    loop {
        let Some(&b) = buf.get(i) else {
            return short();
        };
        match b {
            b'"' => {
                i += 1;
                loop {
                    let Some(rest) = buf.get(i..) else {
                        return short();
                    };
                    match memchr::memchr2(b'"', b'\\', rest) {
                        None => return short(),
                        Some(at) if rest[at] == b'"' => {
                            i += at + 1;
                            break;
                        }
                        // A backslash escapes the byte after it.
                        Some(at) => i += at + 2,
                    }
                }
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                if depth == 0 {
                    return Err(Stop::Decline);
                }
                depth -= 1;
                i += 1;
            }
            _ if depth == 0 => {
                // A number or literal at the top: it ends at the first
                // byte that cannot be part of it.
                let rest = buf.get(i..).unwrap_or_default();
                match rest
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')))
                {
                    Some(0) => return Err(Stop::Decline),
                    Some(n) => return Ok(Some(i + n)),
                    None if eof && !rest.is_empty() => return Ok(Some(buf.len())),
                    None => return short(),
                }
            }
            _ => i += 1,
        }
        if depth == 0 {
            return Ok(Some(i));
        }
    }
}
