//! rust-count is a stateful wasmstream processor, the Go example `count` in
//! Rust: it keeps a running count per record key in the pipeline's state
//! (`state.enabled`) and emits, for each record, the key with its count so
//! far (decimal) — byte for byte what `count` emits. A record with a null
//! key is counted under the empty key, which belongs to one partition of the
//! input: in any other it fails (state key outside the record's partition).
//!
//! The headers of the Go example for the host's tests work the same:
//! `count.key` counts under that key instead of the record's, `count.pad`
//! (a decimal n) stores n bytes of padding with the count, and `count.scan`
//! (a prefix) also emits every key with that prefix and its stored value, in
//! key order, after the count. One more, `count.delete`, deletes the key's
//! count instead of counting (and emits the key with "0"). A state error
//! fails the record terminally. Built with `PROCESSOR_VERSION=2` in the
//! environment, it sets the header `processor.version` on its count outputs.
//!
//! Build: cargo build --release --target wasm32-wasi
//! (target/wasm32-wasi/release/rust_count.wasm)

use wasmstream::{state_delete, state_get, state_put, state_scan, Emitter, Errno, Error, Header, Output, Record};

const VERSION: Option<&str> = option_env!("PROCESSOR_VERSION");

fn terminal(e: Errno) -> Error {
    Error::terminal(e.to_string())
}

pub fn count(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let key: Option<&[u8]> = match r.header("count.key") {
        Some(k) => k,
        None => r.key,
    };
    let skey = key.unwrap_or_default();
    let hs: Vec<Header> = match VERSION {
        Some(v) if !v.is_empty() => vec![Header::new("processor.version", Some(v.as_bytes()))],
        _ => Vec::new(),
    };
    if r.header("count.delete").is_some() {
        state_delete(skey).map_err(terminal)?;
        out.emit(&Output { key, value: Some(b"0"), headers: (&hs).into(), ..Output::default() })?;
        return Ok(());
    }
    let old = state_get(skey).map_err(terminal)?.unwrap_or_default();
    let n = leading_count(&old).wrapping_add(1);
    let val = n.to_string();
    let mut stored = val.clone().into_bytes();
    if let Some(p) = r.header("count.pad") {
        let pad = std::str::from_utf8(p.unwrap_or_default()).ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
        stored.push(b' ');
        stored.resize(stored.len() + pad, b'.');
    }
    state_put(skey, &stored).map_err(terminal)?;
    out.emit(&Output { key, value: Some(val.as_bytes()), headers: (&hs).into(), ..Output::default() })?;
    if let Some(prefix) = r.header("count.scan") {
        let mut emitted = Ok(());
        state_scan(prefix.unwrap_or_default(), |k, v| {
            emitted = out.emit(&Output { key: Some(k), value: Some(v), ..Output::default() });
            emitted.is_ok()
        })
        .map_err(terminal)?;
        emitted?;
    }
    Ok(())
}

/// The count a stored value starts with: its leading decimal digits, as
/// Go's strconv.ParseUint reads them (0 when there are none, the largest
/// u64 when they overflow).
fn leading_count(v: &[u8]) -> u64 {
    let mut n: u64 = 0;
    for &c in v.iter().take_while(|c| c.is_ascii_digit()) {
        match n.checked_mul(10).and_then(|n| n.checked_add((c - b'0') as u64)) {
            Some(m) => n = m,
            None => return u64::MAX,
        }
    }
    n
}

wasmstream::processor!(count);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmstream::{reset_state, run, state_snapshot, Status, TestRecord};

    #[test]
    fn counts() {
        reset_state();
        let want = ["1", "2", "1", "3"];
        for (i, k) in ["a", "a", "b", "a"].iter().enumerate() {
            let res = run(count, &TestRecord::new("in").key(k));
            assert_eq!(res.status, Status::Ok, "record {}: {:?}", i, res.error);
            assert_eq!(res.outputs.len(), 1);
            assert_eq!(res.outputs[0].key.as_deref(), Some(k.as_bytes()));
            assert_eq!(res.outputs[0].value.as_deref(), Some(want[i].as_bytes()));
        }
        // A value over the bound fails the record, and leaves the count as it was.
        let res = run(count, &TestRecord::new("in").key("a").header("count.pad", Some(b"70000")));
        assert_eq!(res.status, Status::Fail);
        assert!(res.error.unwrap().contains("too large"));
        assert!(state_snapshot().contains(&(b"a".to_vec(), b"3".to_vec())));
        // A scan after the count; a delete.
        let res = run(count, &TestRecord::new("in").key("b").header("count.scan", Some(b"")));
        let kv: Vec<_> = res.outputs.iter().map(|o| (o.key.clone().unwrap(), o.value.clone().unwrap())).collect();
        assert_eq!(kv, vec![(b"b".to_vec(), b"2".to_vec()), (b"a".to_vec(), b"3".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
        assert_eq!(run(count, &TestRecord::new("in").key("a").header("count.delete", None)).status, Status::Ok);
        assert_eq!(run(count, &TestRecord::new("in").key("a")).outputs[0].value.as_deref(), Some(&b"1"[..]));
    }

    #[test]
    fn leading_counts() {
        assert_eq!(leading_count(b""), 0);
        assert_eq!(leading_count(b"12 ...."), 12);
        assert_eq!(leading_count(b"18446744073709551615"), u64::MAX);
        assert_eq!(leading_count(b"99999999999999999999999"), u64::MAX);
    }
}
