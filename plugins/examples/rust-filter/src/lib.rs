//! rust-filter is a wasmstream processor that keeps only the records whose
//! value contains the bytes in the record header "match", or, when the header
//! is absent, the word "keep". Dropped records succeed with no output. The
//! same behaviour as the Go example `filter` (a null `match` header, like an
//! empty one, keeps every record).
//!
//! Build: cargo build --release --target wasm32-wasi

use wasmstream::{Emitter, Error, Output, Record};

pub fn filter(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let want: &[u8] = match r.header("match") {
        Some(m) => m.unwrap_or_default(),
        None => b"keep",
    };
    if !contains(r.value.unwrap_or_default(), want) {
        return Ok(());
    }
    out.emit(&Output {
        key: r.key,
        value: r.value,
        headers: r.headers.into(),
        ..Output::default()
    })?;
    Ok(())
}

wasmstream::processor!(filter);

/// Go's `bytes.Contains`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmstream::{run, Status, TestRecord};

    #[test]
    fn filters() {
        let cases: [(&str, Option<Option<&[u8]>>, bool); 7] = [
            ("please keep me", None, true),
            ("drop me", None, false),
            ("", None, false),
            ("x-red-x", Some(Some(b"red")), true),
            ("keep but not blue", Some(Some(b"blue!")), false),
            ("anything", Some(None), true),
            ("anything", Some(Some(b"")), true),
        ];
        for (value, m, kept) in cases {
            let mut rec = TestRecord::new("in").value(value);
            if let Some(m) = m {
                rec = rec.header("match", m);
            }
            let res = run(filter, &rec);
            assert_eq!(res.status, Status::Ok, "{}: {:?}", value, res.error);
            assert_eq!(res.outputs.len() == 1, kept, "{}", value);
            if kept {
                assert_eq!(res.outputs[0].value.as_deref(), Some(value.as_bytes()));
                assert_eq!(res.outputs[0].headers, rec.headers);
            }
        }
        assert!(run(filter, &TestRecord::new("in")).outputs.is_empty());
    }
}
