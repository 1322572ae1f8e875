//! A small, bounded reader (not a validator) of top-level JSON object fields, for processors
//! that look at a field or two of a JSON value without a crate (the Debian
//! toolchain builds no crates; with rustup, `serde_json` is one line in
//! Cargo.toml). It allocates nothing, reads each byte at most once and
//! refuses nesting deeper than [`MAX_DEPTH`].
//!
//! ```
//! let v = br#"{"user":"ann","amount":12.5,"tags":["a"]}"#;
//! assert_eq!(wasmstream::json::field(v, "amount"), Ok(Some(&b"12.5"[..])));
//! assert_eq!(wasmstream::json::number(v, "amount"), Ok(Some(12.5)));
//! assert_eq!(wasmstream::json::string(v, "user"), Ok(Some("ann")));
//! assert_eq!(wasmstream::json::field(v, "missing"), Ok(None));
//! ```

/// The deepest nesting of objects and arrays the reader walks through.
pub const MAX_DEPTH: usize = 64;

/// Why a value could not be read: it is not a JSON object, or is malformed
/// at the byte offset given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonError {
    pub offset: usize,
    pub what: &'static str,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for JsonError {}

/// The raw bytes of the value of the top-level member `key` of the JSON
/// object `v` (the first one, when the key repeats), `None` when the object
/// has no such member. Keys are compared as written (a key spelled with
/// escapes does not match). The members before it are checked; the rest of
/// the object is not.
pub fn field<'a>(v: &'a [u8], key: &str) -> Result<Option<&'a [u8]>, JsonError> {
    let mut p = Parser { b: v, i: 0 };
    p.ws();
    p.expect(b'{', "not a JSON object")?;
    p.ws();
    if p.peek() == Some(b'}') {
        return Ok(None);
    }
    loop {
        p.ws();
        let (ks, ke) = p.string()?;
        p.ws();
        p.expect(b':', "expected ':'")?;
        p.ws();
        let start = p.i;
        p.value()?;
        if &v[ks..ke] == key.as_bytes() {
            return Ok(Some(&v[start..p.i]));
        }
        p.ws();
        match p.next() {
            Some(b',') => continue,
            Some(b'}') => return Ok(None),
            _ => return Err(p.err("expected ',' or '}'")),
        }
    }
}

/// The member `key` as a number; an error when it is there but is not one.
pub fn number(v: &[u8], key: &str) -> Result<Option<f64>, JsonError> {
    match field(v, key)? {
        None => Ok(None),
        Some(raw) => match std::str::from_utf8(raw)
            .ok()
            .filter(|s| s.starts_with(|c: char| c == '-' || c.is_ascii_digit()))
            .and_then(|s| s.parse().ok())
        {
            Some(n) => Ok(Some(n)),
            None => Err(JsonError {
                offset: raw.as_ptr() as usize - v.as_ptr() as usize,
                what: "not a number",
            }),
        },
    }
}

/// The member `key` as a string without escapes (a string with escapes, or
/// a value of another kind, is an error).
pub fn string<'a>(v: &'a [u8], key: &str) -> Result<Option<&'a str>, JsonError> {
    match field(v, key)? {
        None => Ok(None),
        Some(raw) => {
            let off = raw.as_ptr() as usize - v.as_ptr() as usize;
            if raw.len() < 2 || raw[0] != b'"' || raw[1..raw.len() - 1].contains(&b'\\') {
                return Err(JsonError {
                    offset: off,
                    what: "not a string without escapes",
                });
            }
            std::str::from_utf8(&raw[1..raw.len() - 1])
                .map(Some)
                .map_err(|_| JsonError {
                    offset: off,
                    what: "invalid UTF-8",
                })
        }
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> JsonError {
        JsonError {
            offset: self.i,
            what,
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.i += 1;
        c
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn expect(&mut self, c: u8, what: &'static str) -> Result<(), JsonError> {
        if self.peek() != Some(c) {
            return Err(self.err(what));
        }
        self.i += 1;
        Ok(())
    }
    /// A string; returns the span of its contents, quotes excluded.
    fn string(&mut self) -> Result<(usize, usize), JsonError> {
        self.expect(b'"', "expected a string")?;
        let start = self.i;
        loop {
            match self.next() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => return Ok((start, self.i - 1)),
                Some(b'\\') => self.i += 1,
                Some(c) if c < 0x20 => return Err(self.err("control character in a string")),
                Some(_) => {}
            }
        }
    }
    /// Skips one value: nested objects and arrays are walked with a count
    /// of open brackets (at most MAX_DEPTH), not recursion.
    fn value(&mut self) -> Result<(), JsonError> {
        let mut depth = 0usize;
        loop {
            self.ws();
            match self.peek() {
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(self.err("nested too deep"));
                    }
                    self.i += 1;
                    continue;
                }
                Some(b'}' | b']') if depth > 0 => {
                    depth -= 1;
                    self.i += 1;
                }
                Some(c) if c == b'-' || c.is_ascii_alphanumeric() || c == b'.' || c == b'+' => {
                    while matches!(self.peek(), Some(c) if c == b'-' || c.is_ascii_alphanumeric() || c == b'.' || c == b'+')
                    {
                        self.i += 1;
                    }
                }
                _ => return Err(self.err("expected a value")),
            }
            if depth == 0 {
                return Ok(());
            }
            self.ws();
            match self.peek() {
                Some(b',' | b':') => self.i += 1,
                Some(b'}' | b']') => {}
                _ => return Err(self.err("expected ',' or a closing bracket")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let v = br#" { "a" : {"x":[1,{"y":"}"}]}, "s":"q\"x", "amount": -1.5e2 ,"t":true} "#;
        assert_eq!(field(v, "amount"), Ok(Some(&b"-1.5e2"[..])));
        assert_eq!(number(v, "amount"), Ok(Some(-150.0)));
        assert_eq!(field(v, "a"), Ok(Some(&br#"{"x":[1,{"y":"}"}]}"#[..])));
        assert_eq!(field(v, "t"), Ok(Some(&b"true"[..])));
        assert_eq!(field(v, "x"), Ok(None));
        assert!(number(v, "t").is_err());
        assert!(string(v, "s").is_err());
        assert_eq!(field(b"{}", "a"), Ok(None));
    }

    #[test]
    fn refuses() {
        for bad in [
            &b""[..],
            b"[1]",
            b"\"a\"",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\":[1 2]}",
        ] {
            assert!(field(bad, "b").is_err(), "{:?}", std::str::from_utf8(bad));
        }
        let deep = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(field(deep.as_bytes(), "b").is_err());
        let ok = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(field(ok.as_bytes(), "b"), Ok(None));
    }
}
