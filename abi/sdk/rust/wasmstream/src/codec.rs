//! The byte encodings of ABI.md §5 and §7, byte for byte those of
//! abi/encoding.go and abi/async.go. Decoders reject what the Go decoders
//! reject: lengths past the end, nullable lengths below -1, string lengths
//! over i32::MAX, header counts the buffer cannot hold, trailing bytes.

use crate::{Header, Headers, Output, OutputHeaders, Record};
use std::fmt;

/// A malformed encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub what: &'static str,
    pub at: usize,
    pub msg: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wasmstream: decode {}: malformed encoding: at byte {}: {}",
            self.what, self.at, self.msg
        )
    }
}

impl std::error::Error for DecodeError {}

/// The decoder's reads are inlined whole into `decode_record`, each error
/// made out of line: in a module every call costs a frame on the shadow
/// stack and the host's fuel charge, and as eight calls a record's decoding
/// cost two thirds as much as the host's own work for the record
/// (BENCHMARKS.md, "The Rust SDK's decoding inlined").
pub(crate) struct Decoder<'a> {
    pub b: &'a [u8],
    pub off: usize,
    pub what: &'static str,
}

type R<T> = Result<T, DecodeError>;

impl<'a> Decoder<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Decoder { b, off: 0, what }
    }
    fn fail<T>(&self, msg: String) -> R<T> {
        Err(self.error(msg))
    }
    pub(crate) fn error(&self, msg: String) -> DecodeError {
        DecodeError {
            what: self.what,
            at: self.off,
            msg,
        }
    }
    #[cold]
    #[inline(never)]
    fn short<T>(&self, n: usize) -> R<T> {
        self.fail(format!(
            "need {} bytes, have {}",
            n,
            self.b.len() - self.off
        ))
    }
    #[inline(always)]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if n > self.b.len() - self.off {
            return self.short(n);
        }
        let s = &self.b[self.off..self.off + n];
        self.off += n;
        Ok(s)
    }
    #[inline(always)]
    pub fn u32(&mut self) -> R<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    #[inline(always)]
    pub fn u64(&mut self) -> R<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    /// A string's bytes (u32 length + bytes).
    #[inline(always)]
    pub fn str_bytes(&mut self) -> R<&'a [u8]> {
        let n = self.u32()?;
        if n > i32::MAX as u32 {
            return self.bad_len("string length", n as i64);
        }
        self.take(n as usize)
    }
    #[inline(always)]
    pub fn str(&mut self) -> R<&'a str> {
        let at = self.off;
        let b = self.str_bytes()?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s),
            Err(_) => Err(DecodeError {
                what: self.what,
                at,
                msg: "string is not UTF-8".into(),
            }),
        }
    }
    #[cold]
    #[inline(never)]
    fn bad_len<T>(&self, what: &str, n: i64) -> R<T> {
        self.fail(format!("{} {}", what, n))
    }
    #[inline(always)]
    pub fn bytes(&mut self) -> R<Option<&'a [u8]>> {
        let n = self.u32()? as i32;
        if n == -1 {
            return Ok(None);
        }
        if n < -1 {
            return self.bad_len("length", n as i64);
        }
        self.take(n as usize).map(Some)
    }
    /// Headers, checked whole, kept encoded (decoded again when iterated).
    #[inline(always)]
    pub fn headers(&mut self) -> R<Headers<'a>> {
        let n = self.u32()?;
        if n == 0 {
            return Ok(Headers { count: 0, raw: &[] });
        }
        if n as u64 * 8 > (self.b.len() - self.off) as u64 {
            return self.fail(format!(
                "header count {} exceeds remaining {} bytes",
                n,
                self.b.len() - self.off
            ));
        }
        let start = self.off;
        for _ in 0..n {
            self.str_bytes()?;
            self.bytes()?;
        }
        Ok(Headers {
            count: n,
            raw: &self.b[start..self.off],
        })
    }
    #[inline(always)]
    pub fn finish(&self) -> R<()> {
        if self.off != self.b.len() {
            return self.fail(format!(
                "{} trailing bytes after {}",
                self.b.len() - self.off,
                self.what
            ));
        }
        Ok(())
    }
}

/// Decodes a record (§5.1). The record borrows `b`.
pub fn decode_record(b: &[u8]) -> Result<Record<'_>, DecodeError> {
    let mut d = Decoder::new(b, "record");
    let offset = d.u64()? as i64;
    let timestamp_ms = d.u64()? as i64;
    let partition = d.u32()? as i32;
    let attempt = d.u32()?;
    let topic = d.str()?;
    let key = d.bytes()?;
    let value = d.bytes()?;
    let headers = d.headers()?;
    d.finish()?;
    Ok(Record {
        topic,
        partition,
        offset,
        timestamp_ms,
        attempt,
        key,
        value,
        headers,
    })
}

/// Decodes a timer firing (ABI.md §4.2, "The firing's encoding"). The
/// firing borrows `b`.
pub fn decode_timer(b: &[u8]) -> Result<crate::Timer<'_>, DecodeError> {
    let mut d = Decoder::new(b, "timer firing");
    let at = d.u64()? as i64;
    let stream_time = d.u64()? as i64;
    let partition = d.u32()? as i32;
    let attempt = d.u32()?;
    let topic = d.str()?;
    let key = d.str_bytes()?;
    d.finish()?;
    Ok(crate::Timer {
        at,
        stream_time,
        partition,
        attempt,
        topic,
        key,
    })
}

/// Appends a timer firing's encoding (ABI.md §4.2), as the host writes it.
pub fn append_timer_firing(b: &mut Vec<u8>, t: &crate::Timer<'_>) {
    b.extend_from_slice(&(t.at as u64).to_le_bytes());
    b.extend_from_slice(&(t.stream_time as u64).to_le_bytes());
    put_u32(b, t.partition as u32);
    put_u32(b, t.attempt);
    put_str(b, t.topic.as_bytes());
    put_str(b, t.key);
}

#[inline]
pub(crate) fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s);
}

#[inline]
pub(crate) fn put_bytes(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_u32(b, u32::MAX),
        Some(v) => put_str(b, v),
    }
}

pub(crate) fn put_headers(b: &mut Vec<u8>, hs: &OutputHeaders<'_>) {
    match hs {
        OutputHeaders::Encoded(h) => {
            put_u32(b, h.count);
            b.extend_from_slice(h.raw);
        }
        OutputHeaders::List(l) => {
            put_u32(b, l.len() as u32);
            for h in l.iter() {
                put_str(b, h.key);
                put_bytes(b, h.value);
            }
        }
    }
}

fn headers_len(hs: &OutputHeaders<'_>) -> usize {
    match hs {
        OutputHeaders::Encoded(h) => 4 + h.raw.len(),
        OutputHeaders::List(l) => {
            4 + l
                .iter()
                .map(|h| 8 + h.key.len() + h.value.map_or(0, |v| v.len()))
                .sum::<usize>()
        }
    }
}

/// The exact length of the encoding of `o`.
pub fn output_size(o: &Output<'_>) -> usize {
    4 + o.topic.len()
        + 4
        + 4
        + o.key.map_or(0, |k| k.len())
        + 4
        + o.value.map_or(0, |v| v.len())
        + headers_len(&o.headers)
}

/// Appends the encoding of `o` (§5.2) to `b`.
pub fn append_output(b: &mut Vec<u8>, o: &Output<'_>) {
    b.reserve(output_size(o));
    put_str(b, o.topic.as_bytes());
    put_u32(b, o.partition.unwrap_or(-1) as u32);
    put_bytes(b, o.key);
    put_bytes(b, o.value);
    put_headers(b, &o.headers);
}

/// Appends the encoding of a record (§5.1), as the host writes it.
#[allow(clippy::too_many_arguments)]
pub fn append_record(b: &mut Vec<u8>, r: &Record<'_>) {
    b.extend_from_slice(&(r.offset as u64).to_le_bytes());
    b.extend_from_slice(&(r.timestamp_ms as u64).to_le_bytes());
    put_u32(b, r.partition as u32);
    put_u32(b, r.attempt);
    put_str(b, r.topic.as_bytes());
    put_bytes(b, r.key);
    put_bytes(b, r.value);
    put_headers(b, &OutputHeaders::Encoded(r.headers));
}

/// Decodes an output (§5.2), as the host does.
pub fn decode_output(b: &[u8]) -> Result<Output<'_>, DecodeError> {
    let mut d = Decoder::new(b, "output");
    let topic = d.str()?;
    let p = d.u32()? as i32;
    let key = d.bytes()?;
    let value = d.bytes()?;
    let headers = d.headers()?;
    if p < -1 {
        return Err(DecodeError {
            what: "output",
            at: d.off,
            msg: format!("partition {} (want -1 or >= 0)", p),
        });
    }
    d.finish()?;
    Ok(Output {
        topic,
        partition: if p == -1 { None } else { Some(p) },
        key,
        value,
        headers: OutputHeaders::Encoded(headers),
    })
}

/// Completion codes (§7.2).
pub const COMPLETION_OK: u8 = 0;
pub const COMPLETION_ERROR: u8 = 1;
pub const COMPLETION_CANCELED: u8 = 2;
pub const COMPLETION_REFUSED: u8 = 3;

/// Decodes a result's code and message (the payload of an ok result is
/// `b[1..]`).
pub fn decode_completion(b: &[u8]) -> Result<(u8, &str), DecodeError> {
    let mut d = Decoder::new(b, "completion");
    let code = d.take(1)?[0];
    match code {
        COMPLETION_OK => Ok((code, "")),
        COMPLETION_ERROR | COMPLETION_CANCELED | COMPLETION_REFUSED => {
            let m = d.str_bytes()?;
            d.finish()?;
            Ok((
                code,
                std::str::from_utf8(m).unwrap_or("(message is not UTF-8)"),
            ))
        }
        _ => d.fail(format!("completion code {}", code)),
    }
}

/// Appends a timer request (§7.3, kind 1): u64 nanoseconds, at most 2^62
/// (the host refuses longer timers as malformed; ~146 years).
pub fn append_timer(b: &mut Vec<u8>, d: std::time::Duration) {
    let ns = d.as_nanos().min(1u128 << 62) as u64;
    b.extend_from_slice(&ns.to_le_bytes());
}

/// Appends an HTTP request (§7.3, kind 2).
pub fn append_http_request(b: &mut Vec<u8>, r: &crate::HttpRequest<'_>) {
    put_str(b, r.method.as_bytes());
    put_str(b, r.url.as_bytes());
    put_headers(b, &OutputHeaders::List(r.headers));
    put_bytes(b, r.body);
    let ms = r
        .timeout
        .map_or(0, |t| t.as_millis().min(u32::MAX as u128) as u32);
    put_u32(b, ms);
}

/// Appends a state get request (§7.3, kind 3): the key, as a string.
pub fn append_state_get(b: &mut Vec<u8>, key: &[u8]) {
    put_str(b, key);
}

/// Appends a state scan request (§7.3, kind 4): prefix and after as
/// strings, then max_bytes.
pub fn append_state_scan(b: &mut Vec<u8>, prefix: &[u8], after: &[u8], max_bytes: u32) {
    put_str(b, prefix);
    put_str(b, after);
    put_u32(b, max_bytes);
}

/// Decodes the payload of a completed state get: the value, `None` when
/// the key has none (an empty value is a value).
pub fn decode_state_get_result(p: &[u8]) -> Result<Option<&[u8]>, DecodeError> {
    let mut d = Decoder::new(p, "state get result");
    let v = d.bytes()?;
    d.finish()?;
    Ok(v)
}

/// Calls `f` with each scan entry of `p` (`key_len u32 | key | value_len
/// u32 | value`, §4.1), in order, until `f` returns false.
pub fn decode_state_entries<'a, F>(mut p: &'a [u8], mut f: F) -> Result<(), DecodeError>
where
    F: FnMut(&'a [u8], &'a [u8]) -> bool,
{
    let total = p.len();
    while !p.is_empty() {
        let at = total - p.len();
        let bad = || DecodeError {
            what: "state scan entries",
            at,
            msg: "not a whole entry".into(),
        };
        let (k, rest) = crate::state::cut(p).ok_or_else(bad)?;
        let (v, rest) = crate::state::cut(rest).ok_or_else(bad)?;
        p = rest;
        if !f(k, v) {
            break;
        }
    }
    Ok(())
}

/// Iterates encoded headers that were checked by the decoder.
pub(crate) fn next_header<'a>(raw: &mut &'a [u8]) -> Header<'a> {
    let mut d = Decoder::new(raw, "headers");
    // Checked when the record was decoded: cannot fail.
    let key = d.str_bytes().unwrap_or(&[]);
    let value = d.bytes().unwrap_or(None);
    *raw = &raw[d.off..];
    Header { key, value }
}

#[cfg(test)]
mod tests {
    use super::*;

    // TestGoldenRecord in abi/encoding_test.go.
    #[test]
    fn golden_record() {
        let want: Vec<u8> = vec![
            0x2a, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0, 0, 3, 0, 0, 0, 1, 0,
            0, 0, 2, 0, 0, 0, b'i', b'n', 1, 0, 0, 0, b'k', 2, 0, 0, 0, b'h', b'i', 0, 0, 0, 0,
        ];
        let r = decode_record(&want).unwrap();
        assert_eq!(
            (r.offset, r.timestamp_ms, r.partition, r.attempt, r.topic),
            (42, 1700000000123, 3, 1, "in")
        );
        assert_eq!(
            (r.key, r.value, r.headers.len()),
            (Some(&b"k"[..]), Some(&b"hi"[..]), 0)
        );
        let mut b = Vec::new();
        append_record(&mut b, &r);
        assert_eq!(b, want);
    }

    #[test]
    fn rejects_malformed() {
        let mut good = Vec::new();
        let hs = [Header::new("h", Some(b"v")), Header::new("n", None)];
        let o = Output {
            topic: "t",
            key: None,
            value: Some(b""),
            headers: OutputHeaders::List(&hs),
            ..Output::default()
        };
        append_output(&mut good, &o);
        assert_eq!(good.len(), output_size(&o));
        let d = decode_output(&good).unwrap();
        assert_eq!(
            (d.topic, d.partition, d.key, d.value, d.headers.len()),
            ("t", None, None, Some(&b""[..]), 2)
        );
        let got: Vec<_> = d.headers.iter().collect();
        assert_eq!(got, hs.to_vec());
        // trailing byte
        let mut t = good.clone();
        t.push(0);
        assert!(decode_output(&t).is_err());
        // every truncation
        for n in 0..good.len() {
            assert!(decode_output(&good[..n]).is_err(), "truncated to {}", n);
        }
        // partition below -1
        let mut p = Vec::new();
        append_output(
            &mut p,
            &Output {
                partition: Some(-2),
                ..Output::default()
            },
        );
        assert!(decode_output(&p).is_err());
        // nullable length below -1
        let mut n = Vec::new();
        put_str(&mut n, b"");
        put_u32(&mut n, u32::MAX);
        put_u32(&mut n, (-2i32) as u32);
        assert!(decode_output(&n).is_err());
        // header count the buffer cannot hold
        let mut h = Vec::new();
        append_output(&mut h, &Output::default());
        let l = h.len();
        h[l - 4..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode_output(&h).is_err());
    }

    #[test]
    fn timers() {
        let mut b = Vec::new();
        append_timer(&mut b, std::time::Duration::from_millis(5));
        assert_eq!(b, 5_000_000u64.to_le_bytes());
        b.clear();
        append_timer(&mut b, std::time::Duration::MAX);
        assert_eq!(b, (1u64 << 62).to_le_bytes());
    }

    #[test]
    fn completions() {
        assert_eq!(decode_completion(&[0, 1, 2]).unwrap(), (0, ""));
        assert_eq!(
            decode_completion(&[1, 2, 0, 0, 0, b'n', b'o']).unwrap(),
            (1, "no")
        );
        assert!(decode_completion(&[]).is_err());
        assert!(decode_completion(&[9]).is_err());
        assert!(decode_completion(&[1, 2, 0, 0, 0, b'n']).is_err());
        assert!(decode_completion(&[1, 1, 0, 0, 0, b'n', 0]).is_err());
    }

    // TestStateOpEncodings in abi: the requests of kinds 3 and 4 and their payloads.
    #[test]
    fn state_op_encodings() {
        let mut b = Vec::new();
        append_state_get(&mut b, b"k1");
        assert_eq!(b, [2, 0, 0, 0, b'k', b'1']);
        b.clear();
        append_state_scan(&mut b, b"p", b"", 100);
        assert_eq!(b, [1, 0, 0, 0, b'p', 0, 0, 0, 0, 100, 0, 0, 0]);
        assert_eq!(
            decode_state_get_result(&[0xff, 0xff, 0xff, 0xff]).unwrap(),
            None
        );
        assert_eq!(
            decode_state_get_result(&[0, 0, 0, 0]).unwrap(),
            Some(&b""[..])
        );
        assert_eq!(
            decode_state_get_result(&[1, 0, 0, 0, b'v']).unwrap(),
            Some(&b"v"[..])
        );
        assert!(decode_state_get_result(&[]).is_err());
        assert!(decode_state_get_result(&[1, 0, 0, 0, b'v', 0]).is_err());
        let mut got = Vec::new();
        let p = [
            1, 0, 0, 0, b'a', 0, 0, 0, 0, 1, 0, 0, 0, b'b', 2, 0, 0, 0, b'x', b'y',
        ];
        decode_state_entries(&p, |k, v| {
            got.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"".to_vec()),
                (b"b".to_vec(), b"xy".to_vec())
            ]
        );
        assert!(decode_state_entries(&p[..p.len() - 1], |_, _| true).is_err());
        assert!(decode_state_entries(&[1, 0, 0], |_, _| true).is_err());
        assert!(decode_state_entries(&[], |_, _| panic!("no entries")).is_ok());
    }

    #[test]
    fn http_request_encoding() {
        let hs = [Header::new("A", Some(b"1"))];
        let r = crate::HttpRequest {
            method: "",
            url: "http://x/",
            headers: &hs,
            body: None,
            timeout: Some(std::time::Duration::from_millis(1500)),
        };
        let mut b = Vec::new();
        append_http_request(&mut b, &r);
        let mut want = vec![0, 0, 0, 0, 9, 0, 0, 0];
        want.extend_from_slice(b"http://x/");
        want.extend_from_slice(&[
            1, 0, 0, 0, 1, 0, 0, 0, b'A', 1, 0, 0, 0, b'1', 0xff, 0xff, 0xff, 0xff, 0xdc, 0x05, 0,
            0,
        ]);
        assert_eq!(b, want);
    }
}
