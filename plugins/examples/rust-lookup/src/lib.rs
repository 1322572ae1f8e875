//! rust-lookup is a wasmstream processor that enriches each record with what
//! an HTTP service knows about its key, without blocking — the Go example
//! `lookup` in Rust, with the same output and the same rules. It starts a GET
//! of `$LOOKUP_URL<key>` (the key path-escaped as Go's `url.PathEscape`
//! does, with the record's idempotency key as the `Idempotency-Key` header)
//! and returns; the host performs the request while the instance takes other
//! records, and calls back with the response.
//!
//! The output's value is a JSON object:
//!
//! ```text
//! {"key":"...","record":<the input value>,"lookup":<the response body>,"attempt":1}
//! ```
//!
//! where the input value and the body are embedded as JSON when they are
//! JSON, as strings otherwise, and "lookup" is null when the service answers
//! 404; the output has the header `lookup.status`. A 5xx or 429 answer or a
//! transport error fails the record retryably; another 4xx, a refusal by the
//! host's allow list, a null key or an unset LOOKUP_URL fails it terminally.
//!
//! The record header "lookup.mode" makes it misbehave on purpose: "leak"
//! re-arms a timer forever, "panic" panics in the continuation, "pending"
//! returns pending without starting anything, "chain" waits 5 ms on a timer
//! after the lookup before emitting.
//!
//! Build: cargo build --release --target wasm32-wasi

use std::time::Duration;
use wasmstream::{await_op, http, timer, Emitter, Error, Header, HttpRequest, Output, Record};

pub fn lookup(r: &Record, _out: &mut Emitter) -> Result<(), Error> {
    let base = std::env::var("LOOKUP_URL").unwrap_or_default();
    if base.is_empty() {
        return Err(Error::terminal("LOOKUP_URL is not set (pipelines[].env)"));
    }
    let key = match r.key {
        Some(k) => k,
        None => return Err(Error::terminal("the record has no key to look up")),
    };
    let mode = r
        .header("lookup.mode")
        .flatten()
        .unwrap_or_default()
        .to_vec();
    match &mode[..] {
        b"leak" => return leak(),
        b"pending" => return Err(Error::pending()),
        _ => {}
    }
    let url = base + &path_escape(key);
    // The same on every attempt: a service that deduplicates sees one request per record.
    let idem = r.idempotency_key();
    let hs = [Header::new("Idempotency-Key", Some(idem.as_bytes()))];
    await_op(
        http(&HttpRequest {
            url: &url,
            headers: &hs,
            ..HttpRequest::default()
        }),
        move |r, out, res| {
            if mode == b"panic" {
                panic!("asked to panic in the continuation");
            }
            let resp = match res {
                Ok(resp) => resp,
                Err(e) if e.refused => return Err(Error::from(e).into_terminal()),
                Err(e) => return Err(e.into()),
            };
            let found = match resp.status {
                200 => resp.body(),
                404 => None,
                429 | 500..=i32::MAX => {
                    return Err(Error::retry(format!(
                        "lookup service answered {}",
                        resp.status
                    )))
                }
                s => {
                    let body = String::from_utf8_lossy(resp.body().unwrap_or_default());
                    return Err(Error::terminal(format!(
                        "lookup service answered {}: {}",
                        s,
                        body.chars().take(200).collect::<String>()
                    )));
                }
            };
            let value = result(r, found);
            let status = resp.status.to_string();
            if mode == b"chain" {
                return await_op(timer(Duration::from_millis(5)), move |r, out, _| {
                    emit(r, out, &value, &status)
                });
            }
            emit(r, out, &value, &status)
        },
    )
}

wasmstream::processor!(lookup);

fn emit(r: &Record, out: &mut Emitter, value: &[u8], status: &str) -> Result<(), Error> {
    let hs = [Header::new("lookup.status", Some(status.as_bytes()))];
    out.emit(&Output {
        key: r.key,
        value: Some(value),
        headers: (&hs).into(),
        ..Output::default()
    })?;
    Ok(())
}

/// leak never decides its record.
fn leak() -> Result<(), Error> {
    await_op(timer(Duration::from_millis(10)), |_, _, _| leak())
}

/// The output's value.
pub fn result(r: &Record, found: Option<&[u8]>) -> Vec<u8> {
    let key = r.key.unwrap_or_default();
    let mut b = Vec::with_capacity(
        64 + key.len() + r.value.map_or(0, |v| v.len()) + found.map_or(0, |f| f.len()),
    );
    b.extend_from_slice(br#"{"key":"#);
    append_string(&mut b, key);
    b.extend_from_slice(br#","record":"#);
    append_embedded(&mut b, r.value);
    b.extend_from_slice(br#","lookup":"#);
    append_embedded(&mut b, found);
    b.extend_from_slice(br#","attempt":"#);
    b.extend_from_slice(r.attempt.to_string().as_bytes());
    b.push(b'}');
    b
}

/// Appends v as JSON when it is JSON, as a string otherwise, None as null.
fn append_embedded(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => b.extend_from_slice(b"null"),
        Some(v) if json_valid(v) => b.extend_from_slice(v),
        Some(v) => append_string(b, v),
    }
}

/// Appends s as a JSON string, escaped as Go's encoding/json does (invalid
/// UTF-8 becomes U+FFFD, byte by byte; <, >, & and U+2028/9 are escaped).
pub fn append_string(b: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.push(b'"');
    let mut rest = s;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(v) => (v, false),
            Err(e) => (
                unsafe { std::str::from_utf8_unchecked(&rest[..e.valid_up_to()]) },
                true,
            ),
        };
        for c in valid.chars() {
            match c {
                '"' | '\\' => b.extend_from_slice(&[b'\\', c as u8]),
                '\n' => b.extend_from_slice(b"\\n"),
                '\r' => b.extend_from_slice(b"\\r"),
                '\t' => b.extend_from_slice(b"\\t"),
                '\u{8}' => b.extend_from_slice(b"\\b"),
                '\u{c}' => b.extend_from_slice(b"\\f"),
                '\0'..='\u{1f}' | '<' | '>' | '&' => {
                    let c = c as u8;
                    b.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[(c >> 4) as usize],
                        HEX[(c & 15) as usize],
                    ]);
                }
                '\u{2028}' | '\u{2029}' => b.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'2',
                    b'0',
                    b'2',
                    HEX[(c as u32 & 15) as usize],
                ]),
                _ => {
                    let mut buf = [0u8; 4];
                    b.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        rest = &rest[valid.len()..];
        if bad {
            b.extend_from_slice(b"\\ufffd");
            rest = &rest[1..];
        }
    }
    b.push(b'"');
}

/// Go's `url.PathEscape`.
pub fn path_escape(s: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut o = String::with_capacity(s.len());
    for &c in s {
        let keep = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'_' | b'.' | b'~' | b'$' | b'&' | b'+' | b':' | b'=' | b'@'
            );
        if keep {
            o.push(c as char);
        } else {
            o.push('%');
            o.push(HEX[(c >> 4) as usize] as char);
            o.push(HEX[(c & 15) as usize] as char);
        }
    }
    o
}

/// Go's `json.Valid`: one JSON value (RFC 8259), surrounded by optional
/// whitespace; strings are not checked for UTF-8, nesting is limited to
/// 10000 levels.
pub fn json_valid(b: &[u8]) -> bool {
    let mut p = Parser { b, i: 0, depth: 0 };
    p.ws();
    if !p.value() {
        return false;
    }
    p.ws();
    p.i == b.len()
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn lit(&mut self, s: &[u8]) -> bool {
        if self.b[self.i..].starts_with(s) {
            self.i += s.len();
            return true;
        }
        false
    }
    fn value(&mut self) -> bool {
        match self.peek() {
            Some(b'{') => self.nested(b'}', true),
            Some(b'[') => self.nested(b']', false),
            Some(b'"') => self.string(),
            Some(b't') => self.lit(b"true"),
            Some(b'f') => self.lit(b"false"),
            Some(b'n') => self.lit(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }
    fn nested(&mut self, close: u8, object: bool) -> bool {
        self.depth += 1;
        if self.depth > 10000 {
            return false;
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(close) {
            self.i += 1;
            self.depth -= 1;
            return true;
        }
        loop {
            if object {
                if self.peek() != Some(b'"') || !self.string() {
                    return false;
                }
                self.ws();
                if self.peek() != Some(b':') {
                    return false;
                }
                self.i += 1;
                self.ws();
            }
            if !self.value() {
                return false;
            }
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(c) if c == close => {
                    self.i += 1;
                    self.depth -= 1;
                    return true;
                }
                _ => return false,
            }
        }
    }
    fn string(&mut self) -> bool {
        self.i += 1;
        loop {
            match self.peek() {
                None => return false,
                Some(b'"') => {
                    self.i += 1;
                    return true;
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                if !matches!(self.peek(), Some(c) if c.is_ascii_hexdigit()) {
                                    return false;
                                }
                                self.i += 1;
                            }
                        }
                        _ => return false,
                    }
                }
                Some(c) if c < 0x20 => return false,
                Some(_) => self.i += 1,
            }
        }
    }
    fn digits(&mut self) -> usize {
        let s = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - s
    }
    fn number(&mut self) -> bool {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return false,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return false;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmstream::{run_with, OpResult, Operation, OwnedHeader, Status, TestRecord};

    fn service(op: &Operation) -> OpResult {
        match op {
            Operation::Http { url, .. } => match url.trim_start_matches("http://svc/users/") {
                "7" => OpResult::http(
                    200,
                    &[("Content-Type", b"application/json")],
                    Some(br#"{"name":"Ada"}"#),
                ),
                "down" => OpResult::http(503, &[], Some(b"")),
                "busy" => OpResult::http(429, &[], Some(b"")),
                "bad" => OpResult::http(400, &[], Some(b"no such thing")),
                "cut" => OpResult::error("http: connection reset"),
                "denied" => OpResult::refused("host svc is not allowed"),
                _ => OpResult::http(404, &[], Some(b"")),
            },
            Operation::Timer(_) => OpResult::done(),
        }
    }

    fn go(r: TestRecord) -> wasmstream::RunResult {
        std::env::set_var("LOOKUP_URL", "http://svc/users/");
        run_with(lookup, &r, service)
    }

    #[test]
    fn lookups() {
        let res = go(TestRecord::new("t")
            .key("7")
            .value(r#"{"order":1}"#)
            .attempt(2));
        assert_eq!(res.status, Status::Ok, "{:?}", res.error);
        assert_eq!(
            res.outputs[0].value.as_deref(),
            Some(&br#"{"key":"7","record":{"order":1},"lookup":{"name":"Ada"},"attempt":2}"#[..])
        );
        assert_eq!(
            res.outputs[0].headers,
            vec![OwnedHeader::new("lookup.status", Some(b"200"))]
        );
        let res = go(TestRecord::new("t").key("nobody").value("x"));
        assert_eq!(
            res.outputs[0].value.as_deref(),
            Some(&br#"{"key":"nobody","record":"x","lookup":null,"attempt":1}"#[..])
        );
        for (key, want) in [
            ("down", Status::Retry),
            ("busy", Status::Retry),
            ("cut", Status::Retry),
            ("bad", Status::Fail),
            ("denied", Status::Fail),
        ] {
            let res = go(TestRecord::new("t").key(key));
            assert_eq!(res.status, want, "{}: {:?}", key, res.error);
            assert!(res.outputs.is_empty());
        }
        let res = go(TestRecord::new("t")
            .key("7")
            .header("lookup.mode", Some(b"chain")));
        assert_eq!((res.status, res.outputs.len()), (Status::Ok, 1));
        let res = go(TestRecord::new("t")
            .key("7")
            .header("lookup.mode", Some(b"pending")));
        assert_eq!(res.status, Status::Fail);
        assert_eq!(go(TestRecord::new("t")).status, Status::Fail, "null key");
    }

    #[test]
    fn request() {
        std::env::set_var("LOOKUP_URL", "http://svc/users/");
        let mut seen = None;
        run_with(
            lookup,
            &TestRecord::new("orders").key("a b/c?é").at(4, 17),
            |op| {
                seen = Some(op.clone());
                OpResult::http(404, &[], None)
            },
        );
        match seen {
            Some(Operation::Http {
                method,
                url,
                headers,
                ..
            }) => {
                assert_eq!(
                    (method.as_str(), url.as_str()),
                    ("", "http://svc/users/a%20b%2Fc%3F%C3%A9")
                );
                assert_eq!(
                    headers,
                    vec![OwnedHeader::new("Idempotency-Key", Some(b"orders/4/17"))]
                );
            }
            other => panic!("{:?}", other),
        }
    }

    #[test]
    fn json() {
        for v in [
            "1",
            "-0.5e+3",
            " {\"a\" : [1, true, null, \"x\\u00e9\"]} \n",
            "\"\u{e9}\"",
            "[]",
            "{}",
        ] {
            assert!(json_valid(v.as_bytes()), "{}", v);
        }
        for v in [
            "",
            "01",
            "1.",
            "{",
            "[1,]",
            "{\"a\"}",
            "\"\\x\"",
            "\"\u{1}\"",
            "tru",
            "1 2",
            "-",
            "+1",
        ] {
            assert!(!json_valid(v.as_bytes()), "{}", v);
        }
        let mut b = Vec::new();
        append_string(
            &mut b,
            "q\"\\\n\r\t\u{8}\u{c}\u{1}<>&é\u{2028}\u{2029}".as_bytes(),
        );
        append_string(&mut b, b"a\xffb\xe2\x82");
        assert_eq!(String::from_utf8(b).unwrap(), "\"q\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u003c\\u003e\\u0026é\\u2028\\u2029\"\"a\\ufffdb\\ufffd\\ufffd\"");
    }
}
