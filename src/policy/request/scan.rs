//! A validating JSON scanner that builds the lazy review's nodes directly.
//!
//! serde_json checks the whole body through its generic `Deserializer`, one
//! call per token, and the nodes were built through serde's visitor traits:
//! together most of the cost of a `/validate` request. This scanner does the
//! same job in one pass over the bytes. It accepts only text that serde_json
//! accepts and reads it to the same nodes; whatever it does not handle
//! itself (any syntax error, nesting deeper than [`MAX_RAW_DEPTH`], a string
//! with escapes or a number other than a plain non-negative integer where a
//! node is built) it either hands to serde_json for that one token or
//! refuses with `None`, and the caller then parses with serde_json, so
//! results and error messages stay serde_json's.

use super::lazy::{LazyNode, LazyObject, NodeSeed, Parsed, Text};
use serde::de::DeserializeSeed;
use serde_json::Number;
use std::cell::Cell;
use std::sync::OnceLock;

/// Containers nested deeper than this inside a raw part are left to
/// serde_json (whose skipping has no limit); a review nests about 12 deep.
const MAX_RAW_DEPTH: u32 = 128;

/// Parses a whole body, building nodes `depth` levels deep; the bool tells
/// whether an object of the envelope repeated a key: the review, the request
/// or an object in the request (the lowest level built, an object's own
/// fields, is not checked: the typed envelope never reads it).
pub(super) fn document(base: &str, depth: u32) -> Option<(Parsed, bool)> {
    let mut scan = Scan::new(base, 0, base.len(), true);
    let parsed = scan.whole(depth)?;
    Some((parsed, scan.duplicates))
}

/// Parses the raw node at `start..end` of `base`, `depth` levels deep.
pub(super) fn node(base: &str, start: usize, end: usize, depth: u32) -> Option<Parsed> {
    Scan::new(base, start, end, false).whole(depth)
}

struct Scan<'a> {
    base: &'a str,
    /// `base` up to the end of the text scanned; positions index `base`.
    bytes: &'a [u8],
    pos: usize,
    check_duplicates: bool,
    duplicates: bool,
    /// Entries and items of the containers being built, so each container
    /// is allocated once, at its exact size.
    entries: Vec<(Text, LazyNode)>,
    items: Vec<LazyNode>,
}

impl<'a> Scan<'a> {
    fn new(base: &'a str, start: usize, end: usize, check_duplicates: bool) -> Self {
        Scan {
            base,
            bytes: base.as_bytes().get(..end).unwrap_or_default(),
            pos: start,
            check_duplicates,
            duplicates: false,
            entries: Vec::new(),
            items: Vec::new(),
        }
    }

    /// One value and nothing but whitespace around it.
    fn whole(&mut self, depth: u32) -> Option<Parsed> {
        self.whitespace();
        let parsed = self.value(depth)?;
        self.whitespace();
        (self.pos == self.bytes.len()).then_some(parsed)
    }

    /// The byte at the cursor; 0 (never valid there) at the end.
    fn peek(&self) -> u8 {
        self.bytes.get(self.pos).copied().unwrap_or(0)
    }

    /// serde_json's whitespace: space, tab, newline, carriage return.
    fn whitespace(&mut self) {
        while matches!(self.peek(), b' ' | b'\n' | b'\t' | b'\r') {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == byte).then(|| self.pos += 1)
    }

    /// A value at the cursor, built `depth` levels deep.
    fn value(&mut self, depth: u32) -> Option<Parsed> {
        match self.peek() {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => {
                let (start, end, escaped) = self.string()?;
                let text = self.text(start, end, escaped)?;
                Some(Parsed::String(text))
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let plain = self.number()?;
                let digits = self.base.get(start..self.pos)?;
                // Up to 19 digits always fit a u64; serde_json reads a
                // non-negative integer as u64 too.
                if plain && digits.len() <= 19 {
                    let n = digits
                        .bytes()
                        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
                    return Some(Parsed::Number(Number::from(n)));
                }
                let mut deserializer = serde_json::Deserializer::from_str(digits);
                NodeSeed {
                    depth: 0,
                    base: self.base,
                    duplicates: &Cell::new(false),
                }
                .deserialize(&mut deserializer)
                .ok()
            }
            _ => self.literal(),
        }
    }

    /// A child of a container built with `depth`: built too, or raw.
    fn child(&mut self, depth: u32) -> Option<LazyNode> {
        if depth == 0 {
            let start = self.pos;
            self.skip()?;
            Some(LazyNode {
                raw: Some((start, self.pos)),
                parsed: OnceLock::new(),
            })
        } else {
            Some(LazyNode::parsed(self.value(depth - 1)?))
        }
    }

    fn object(&mut self, depth: u32) -> Option<Parsed> {
        self.pos += 1;
        self.whitespace();
        let mark = self.entries.len();
        if self.eat(b'}').is_none() {
            loop {
                if self.peek() != b'"' {
                    return None;
                }
                let (start, end, escaped) = self.string()?;
                let key = self.text(start, end, escaped)?;
                self.whitespace();
                self.eat(b':')?;
                self.whitespace();
                let value = self.child(depth)?;
                self.entries.push((key, value));
                self.whitespace();
                match self.peek() {
                    b',' => {
                        self.pos += 1;
                        self.whitespace();
                    }
                    b'}' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let object = LazyObject::new(self.entries.drain(mark..).collect());
        if self.check_duplicates && depth > 0 && object.has_duplicate_keys(self.base) {
            self.duplicates = true;
        }
        Some(Parsed::Object(object))
    }

    fn array(&mut self, depth: u32) -> Option<Parsed> {
        self.pos += 1;
        self.whitespace();
        let mark = self.items.len();
        if self.eat(b']').is_none() {
            loop {
                let item = self.child(depth)?;
                self.items.push(item);
                self.whitespace();
                match self.peek() {
                    b',' => {
                        self.pos += 1;
                        self.whitespace();
                    }
                    b']' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        Some(Parsed::Array(self.items.drain(mark..).collect()))
    }

    /// The text of a string scanned at `start..end` (quotes excluded): a
    /// span, or decoded by serde_json when it has escapes (which rejects a
    /// lone surrogate, as when serde_json builds the node).
    fn text(&self, start: usize, end: usize, escaped: bool) -> Option<Text> {
        if !escaped {
            return Some(Text::Span(start, end));
        }
        let quoted = self.base.get(start - 1..end + 1)?;
        serde_json::from_str::<String>(quoted)
            .ok()
            .map(|s| Text::Owned(s.into_boxed_str()))
    }

    /// Skips a string at the cursor as serde_json's `ignore_str` does; returns
    /// the span of its contents and whether it has escapes.
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        self.pos += 1;
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.skip_plain();
            match self.peek() {
                b'"' => {
                    self.pos += 1;
                    return Some((start, self.pos - 1, escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek() {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 1,
                        b'u' => {
                            let hex = self.bytes.get(self.pos + 1..self.pos + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.pos += 5;
                        }
                        _ => return None,
                    }
                }
                // A control character, or the end of the text.
                _ => return None,
            }
        }
    }

    /// Moves the cursor to the next `"`, `\` or control character (or the
    /// end), eight bytes at a time where it can.
    fn skip_plain(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let bytes = self.bytes;
        let mut pos = self.pos;
        while let Some(chunk) = bytes.get(pos..pos + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let x = u64::from_le_bytes(word);
            let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
            // The lowest flagged byte is exact (borrows only flag higher ones).
            let special = zero(x ^ (ONES * u64::from(b'"')))
                | zero(x ^ (ONES * u64::from(b'\\')))
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGH);
            if special != 0 {
                self.pos = pos + (special.trailing_zeros() / 8) as usize;
                return;
            }
            pos += 8;
        }
        while let Some(&b) = bytes.get(pos) {
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            pos += 1;
        }
        self.pos = pos;
    }

    /// Skips a number with serde_json's grammar; true when it is a plain
    /// non-negative integer (digits only).
    fn number(&mut self) -> Option<bool> {
        let negative = self.eat(b'-').is_some();
        match self.peek() {
            b'0' => {
                self.pos += 1;
                if self.peek().is_ascii_digit() {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut plain = !negative;
        if self.eat(b'.').is_some() {
            plain = false;
            if !self.peek().is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if matches!(self.peek(), b'e' | b'E') {
            plain = false;
            self.pos += 1;
            if matches!(self.peek(), b'+' | b'-') {
                self.pos += 1;
            }
            if !self.peek().is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        Some(plain)
    }

    fn digits(&mut self) {
        while self.peek().is_ascii_digit() {
            self.pos += 1;
        }
    }

    /// `null`, `true` or `false`.
    fn literal(&mut self) -> Option<Parsed> {
        let rest = self.bytes.get(self.pos..)?;
        let (len, parsed) = if rest.starts_with(b"null") {
            (4, Parsed::Null)
        } else if rest.starts_with(b"true") {
            (4, Parsed::Bool(true))
        } else if rest.starts_with(b"false") {
            (5, Parsed::Bool(false))
        } else {
            return None;
        };
        self.pos += len;
        Some(parsed)
    }

    /// Skips one value of any depth without building it.
    fn skip(&mut self) -> Option<()> {
        // One bit per open container, set for an object.
        let mut stack: u128 = 0;
        let mut depth = 0u32;
        loop {
            // A value at the cursor.
            match self.peek() {
                open @ (b'{' | b'[') => {
                    self.pos += 1;
                    self.whitespace();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.eat(close).is_none() {
                        if depth == MAX_RAW_DEPTH {
                            return None;
                        }
                        stack = (stack << 1) | u128::from(open == b'{');
                        depth += 1;
                        if open == b'{' {
                            self.key()?;
                        }
                        continue;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b'-' | b'0'..=b'9' => {
                    self.number()?;
                }
                _ => {
                    self.literal()?;
                }
            }
            // After a value: close containers until one continues.
            loop {
                if depth == 0 {
                    return Some(());
                }
                self.whitespace();
                let in_object = stack & 1 == 1;
                match self.peek() {
                    b',' => {
                        self.pos += 1;
                        self.whitespace();
                        if in_object {
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if in_object => {}
                    b']' if !in_object => {}
                    _ => return None,
                }
                self.pos += 1;
                stack >>= 1;
                depth -= 1;
            }
        }
    }

    /// A key and its colon, leaving the cursor at the value.
    fn key(&mut self) -> Option<()> {
        if self.peek() != b'"' {
            return None;
        }
        self.string()?;
        self.whitespace();
        self.eat(b':')?;
        self.whitespace();
        Some(())
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
