//! rust-uppercase is a wasmstream processor: it emits each record with its
//! value in upper case, keeping key and headers — byte for byte what the Go
//! example `uppercase` emits (Go's `bytes.ToUpper`: Unicode simple case
//! mapping, and each byte of invalid UTF-8 becomes U+FFFD). Built with
//! `PROCESSOR_VERSION=2` in the environment, it also sets the header
//! `processor.version`.
//!
//! Build: cargo build --release --target wasm32-wasi
//! (target/wasm32-wasi/release/rust_uppercase.wasm)

use wasmstream::{Emitter, Error, Header, Output, Record};

const VERSION: Option<&str> = option_env!("PROCESSOR_VERSION");

thread_local! {
    // The upper-cased value, reused across records (emit copies it).
    static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::new());
}

pub fn uppercase(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        let v = r.value.map(|v| {
            to_upper_into(&mut b, v);
            &b[..]
        });
        emit(r, out, v)
    })
}

fn emit(r: &Record, out: &mut Emitter, v: Option<&[u8]>) -> Result<(), Error> {
    let mut hs: Vec<Header> = Vec::new();
    let headers = match VERSION {
        Some(ver) if !ver.is_empty() => {
            hs.extend(r.headers.iter());
            hs.push(Header::new("processor.version", Some(ver.as_bytes())));
            (&hs).into()
        }
        _ => r.headers.into(),
    };
    out.emit(&Output {
        key: r.key,
        value: v,
        headers,
        ..Output::default()
    })?;
    Ok(())
}

wasmstream::processor!(uppercase);

/// Go's `bytes.ToUpper`.
pub fn to_upper(s: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    to_upper_into(&mut b, s);
    b
}

/// Go's `bytes.ToUpper`, into b (cleared first).
pub fn to_upper_into(b: &mut Vec<u8>, s: &[u8]) {
    b.clear();
    b.reserve(s.len() + 8);
    // The ASCII run at the start, the common case, in one pass; the rest
    // (from the first word holding a byte over 0x7f) one character at a
    // time. Every byte before the rest is ASCII: it starts a character.
    let n = upper_ascii_prefix(b, s);
    let mut rest = &s[n..];
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(v) => (v, false),
            Err(e) => (
                unsafe { std::str::from_utf8_unchecked(&rest[..e.valid_up_to()]) },
                true,
            ),
        };
        for c in valid.chars() {
            let mut buf = [0u8; 4];
            b.extend_from_slice(upper(c).encode_utf8(&mut buf).as_bytes());
        }
        rest = &rest[valid.len()..];
        if bad {
            // Go decodes an invalid byte as U+FFFD of width 1.
            b.extend_from_slice("\u{FFFD}".as_bytes());
            rest = &rest[1..];
        }
    }
}

/// Appends the upper case of the ASCII bytes at the start of s to b, eight
/// at a time, and returns how many it took: a word with a byte over 0x7f
/// ends the run, as does a byte over 0x7f in the last seven. In a word of
/// ASCII bytes a byte is a lower-case letter when adding 0x1f carries it
/// past 0x7f ('a' and above) and adding 0x05 does not ('z' and below); each
/// such byte loses 0x20.
fn upper_ascii_prefix(b: &mut Vec<u8>, s: &[u8]) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = s.chunks_exact(8);
    let mut n = 0;
    for w in &mut words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        if v & HIGH != 0 {
            return n;
        }
        let lower =
            v.wrapping_add(0x1f1f_1f1f_1f1f_1f1f) & !v.wrapping_add(0x0505_0505_0505_0505) & HIGH;
        b.extend_from_slice(&(v - (lower >> 2)).to_le_bytes());
        n += 8;
    }
    for &c in words.remainder() {
        if c >= 0x80 {
            break;
        }
        b.push(c.to_ascii_uppercase());
        n += 1;
    }
    n
}

/// Go's `unicode.ToUpper`: the simple (one character) uppercase mapping.
fn upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let mut u = c.to_uppercase();
    if u.len() == 1 {
        return u.next().unwrap_or(c);
    }
    // The full mapping has several characters (ß → SS); the simple one is
    // the character itself, except for Greek letters with ypogegrammeni,
    // whose simple uppercase is the titlecase letter.
    match c as u32 {
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => {
            char::from_u32(c as u32 + 8).unwrap_or(c)
        }
        0x1FB3 | 0x1FC3 | 0x1FF3 => char::from_u32(c as u32 + 9).unwrap_or(c),
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmstream::{run, OwnedHeader, Status, TestRecord};

    #[test]
    fn uppercases_and_keeps_key_and_headers() {
        let res = run(
            uppercase,
            &TestRecord::new("in")
                .key("k1")
                .value("hello, Wörld")
                .header("h", Some(b"v"))
                .header("n", None),
        );
        assert_eq!(res.status, Status::Ok, "{:?}", res.error);
        assert_eq!(res.outputs.len(), 1);
        let o = &res.outputs[0];
        assert_eq!(o.value.as_deref(), Some("HELLO, WÖRLD".as_bytes()));
        assert_eq!(
            (o.key.as_deref(), o.topic.as_str(), o.partition),
            (Some(&b"k1"[..]), "", None)
        );
        assert_eq!(
            o.headers,
            vec![
                OwnedHeader::new("h", Some(b"v")),
                OwnedHeader::new("n", None)
            ]
        );
    }

    #[test]
    fn null_and_empty() {
        let res = run(uppercase, &TestRecord::new("in"));
        assert_eq!(
            (
                res.status,
                res.outputs[0].value.clone(),
                res.outputs[0].key.clone()
            ),
            (Status::Ok, None, None)
        );
        let res = run(uppercase, &TestRecord::new("in").key("").value(""));
        assert_eq!(
            (res.outputs[0].value.clone(), res.outputs[0].key.clone()),
            (Some(vec![]), Some(vec![]))
        );
    }

    #[test]
    fn go_case_mapping() {
        assert_eq!(
            to_upper("straße ǅ ᾳ ﬀ ÿ".as_bytes()),
            "STRAßE Ǆ ᾼ ﬀ Ÿ".as_bytes()
        );
        assert_eq!(
            to_upper(b"a\xffb\xe2\x82c"),
            "A\u{FFFD}B\u{FFFD}\u{FFFD}C".as_bytes()
        );
    }
}
