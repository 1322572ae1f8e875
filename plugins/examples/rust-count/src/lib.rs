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
//! With the header `count.async` (any value) it is the Go example
//! `count-async` instead: the count is read with an asynchronous state get
//! (`state_get_async`), the put and the output in its continuation, and
//! `count.scan` reads with `state_scan_async` in batches of
//! `count.scanbytes` bytes (default: the host's), one operation per batch.
//! count-async's other headers work the same: `count.set` (a value) stores
//! it under the key before the read, which then reads it (the record's own
//! write); `count.abandon` starts the read and decides the record at once
//! (ok, no output), so that the host cancels the read. (`count.pad` is the
//! direct path's only; `count.delete` deletes on both.) A key the host
//! refuses at the read's start (another partition's, too long, no state)
//! fails the record terminally with the errno.
//!
//! Build: cargo build --release --target wasm32-wasi
//! (target/wasm32-wasi/release/rust_count.wasm)

use wasmstream::{
    await_op, state_delete, state_get, state_get_async, state_put, state_scan, state_scan_async,
    Emitter, Errno, Error, Header, OpError, Output, Record,
};

const VERSION: Option<&str> = option_env!("PROCESSOR_VERSION");

fn terminal(e: Errno) -> Error {
    Error::terminal(e.to_string())
}

fn op_terminal(e: OpError) -> Error {
    Error::terminal(e.msg)
}

/// The key counted: the record's, or the header count.key's.
fn count_key<'a>(r: &Record<'a>) -> Option<&'a [u8]> {
    match r.header("count.key") {
        Some(k) => k,
        None => r.key,
    }
}

fn version_headers() -> Vec<Header<'static>> {
    match VERSION {
        Some(v) if !v.is_empty() => vec![Header::new("processor.version", Some(v.as_bytes()))],
        _ => Vec::new(),
    }
}

pub fn count(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let key = count_key(r);
    let skey = key.unwrap_or_default();
    let hs = version_headers();
    if r.header("count.delete").is_some() {
        state_delete(skey).map_err(terminal)?;
        out.emit(&Output {
            key,
            value: Some(b"0"),
            headers: (&hs).into(),
            ..Output::default()
        })?;
        return Ok(());
    }
    if r.header("count.async").is_some() {
        return count_async(r, skey);
    }
    let old = state_get(skey).map_err(terminal)?.unwrap_or_default();
    let n = leading_count(&old).wrapping_add(1);
    let val = n.to_string();
    let mut stored = val.clone().into_bytes();
    if let Some(p) = r.header("count.pad") {
        let pad = std::str::from_utf8(p.unwrap_or_default())
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(0);
        stored.push(b' ');
        stored.resize(stored.len() + pad, b'.');
    }
    state_put(skey, &stored).map_err(terminal)?;
    out.emit(&Output {
        key,
        value: Some(val.as_bytes()),
        headers: (&hs).into(),
        ..Output::default()
    })?;
    if let Some(prefix) = r.header("count.scan") {
        let mut emitted = Ok(());
        state_scan(prefix.unwrap_or_default(), |k, v| {
            emitted = out.emit(&Output {
                key: Some(k),
                value: Some(v),
                ..Output::default()
            });
            emitted.is_ok()
        })
        .map_err(terminal)?;
        emitted?;
    }
    Ok(())
}

/// count-async: the read as an operation, the rest in its continuation.
fn count_async(r: &Record, skey: &[u8]) -> Result<(), Error> {
    if let Some(v) = r.header("count.set") {
        state_put(skey, v.unwrap_or_default()).map_err(terminal)?;
    }
    if r.header("count.abandon").is_some() {
        let res = await_op(state_get_async(skey), |_, _, _| Ok(()));
        if !matches!(&res, Err(e) if e.is_pending()) {
            return res;
        }
        return Ok(()); // decided while the read is outstanding: the host cancels it
    }
    await_op(state_get_async(skey), |r, out, res| {
        let old = res.map_err(op_terminal)?.unwrap_or_default();
        let key = count_key(r);
        let val = leading_count(&old).wrapping_add(1).to_string();
        state_put(key.unwrap_or_default(), val.as_bytes()).map_err(terminal)?;
        let hs = version_headers();
        out.emit(&Output {
            key,
            value: Some(val.as_bytes()),
            headers: (&hs).into(),
            ..Output::default()
        })?;
        if let Some(prefix) = r.header("count.scan") {
            let size = r
                .header("count.scanbytes")
                .flatten()
                .and_then(|s| std::str::from_utf8(s).ok()?.parse::<i64>().ok())
                .unwrap_or(0);
            return scan_async(
                prefix.unwrap_or_default().to_vec(),
                Vec::new(),
                size.max(0) as usize,
            );
        }
        Ok(())
    })
}

/// Emits the keys with prefix after `after`, one batch per operation, until
/// a batch is empty.
fn scan_async(prefix: Vec<u8>, after: Vec<u8>, size: usize) -> Result<(), Error> {
    await_op(
        state_scan_async(&prefix, &after, size),
        move |_, out, res| {
            let b = res.map_err(op_terminal)?;
            if b.done() {
                return Ok(());
            }
            for e in &b.entries {
                out.emit(&Output {
                    key: Some(&e.key),
                    value: Some(&e.value),
                    ..Output::default()
                })?;
            }
            scan_async(prefix, b.after().to_vec(), size)
        },
    )
}

/// The count a stored value starts with: its leading decimal digits, as
/// Go's strconv.ParseUint reads them (0 when there are none, the largest
/// u64 when they overflow).
fn leading_count(v: &[u8]) -> u64 {
    let mut n: u64 = 0;
    for &c in v.iter().take_while(|c| c.is_ascii_digit()) {
        match n
            .checked_mul(10)
            .and_then(|n| n.checked_add((c - b'0') as u64))
        {
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
        let res = run(
            count,
            &TestRecord::new("in")
                .key("a")
                .header("count.pad", Some(b"70000")),
        );
        assert_eq!(res.status, Status::Fail);
        assert!(res.error.unwrap().contains("too large"));
        assert!(state_snapshot().contains(&(b"a".to_vec(), b"3".to_vec())));
        // A scan after the count; a delete.
        let res = run(
            count,
            &TestRecord::new("in")
                .key("b")
                .header("count.scan", Some(b"")),
        );
        let kv: Vec<_> = res
            .outputs
            .iter()
            .map(|o| (o.key.clone().unwrap(), o.value.clone().unwrap()))
            .collect();
        assert_eq!(
            kv,
            vec![
                (b"b".to_vec(), b"2".to_vec()),
                (b"a".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
        assert_eq!(
            run(
                count,
                &TestRecord::new("in").key("a").header("count.delete", None)
            )
            .status,
            Status::Ok
        );
        assert_eq!(
            run(count, &TestRecord::new("in").key("a")).outputs[0]
                .value
                .as_deref(),
            Some(&b"1"[..])
        );
    }

    // count.async: the same counts through state_get_async, the record's
    // own write (count.set) read back, a scan chained over small batches, a
    // refused key failing the record.
    #[test]
    fn counts_async() {
        reset_state();
        let a = |k: &str| TestRecord::new("in").key(k).header("count.async", None);
        for (i, (k, want)) in [("a", "1"), ("a", "2"), ("b", "1")].iter().enumerate() {
            let res = run(count, &a(k));
            assert_eq!(res.status, Status::Ok, "record {}: {:?}", i, res.error);
            assert_eq!(
                (res.outputs.len(), res.outputs[0].value.as_deref()),
                (1, Some(want.as_bytes()))
            );
        }
        // The direct path and the asynchronous one count the same keys.
        assert_eq!(
            run(count, &TestRecord::new("in").key("a")).outputs[0]
                .value
                .as_deref(),
            Some(&b"3"[..])
        );
        let res = run(count, &a("a").header("count.set", Some(b"41")));
        assert_eq!(res.outputs[0].value.as_deref(), Some(&b"42"[..]));
        let res = run(
            count,
            &a("b")
                .header("count.scan", Some(b""))
                .header("count.scanbytes", Some(b"10")),
        );
        assert_eq!(res.status, Status::Ok, "{:?}", res.error);
        let kv: Vec<_> = res
            .outputs
            .iter()
            .map(|o| (o.key.clone().unwrap(), o.value.clone().unwrap()))
            .collect();
        assert_eq!(
            kv,
            vec![
                (b"b".to_vec(), b"2".to_vec()),
                (b"a".to_vec(), b"42".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
        let res = run(count, &a("a").header("count.abandon", None));
        assert_eq!((res.status, res.outputs.len()), (Status::Ok, 0));
        wasmstream::set_foreign_state_prefix(b"other-");
        let res = run(count, &a("a").header("count.key", Some(b"other-a")));
        assert_eq!(res.status, Status::Fail);
        assert!(res
            .error
            .unwrap()
            .contains("state key outside the record's partition"));
        let res = run(count, &a(&"k".repeat(1025)));
        assert_eq!(res.status, Status::Fail);
        assert!(res.error.unwrap().contains("too large"));
        assert_eq!(
            state_snapshot(),
            vec![
                (b"a".to_vec(), b"42".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
    }

    #[test]
    fn leading_counts() {
        assert_eq!(leading_count(b""), 0);
        assert_eq!(leading_count(b"12 ...."), 12);
        assert_eq!(leading_count(b"18446744073709551615"), u64::MAX);
        assert_eq!(leading_count(b"99999999999999999999999"), u64::MAX);
    }
}
