//! rust-dedup is a stateful wasmstream processor, the Go example `dedup` in
//! Rust: it emits the first record of each id and drops (succeeds without
//! output) every later one — byte for byte what `dedup` emits. The id is
//! the record's key: produce with the id as key, so that every copy of a
//! record lands in the same partition and its state. The state keeps one
//! empty value per id seen. A state error fails the record terminally.
//!
//! Build: cargo build --release --target wasm32-wasi
//! (target/wasm32-wasi/release/rust_dedup.wasm)

use wasmstream::{state_get, state_put, Emitter, Error, Output, Record};

pub fn dedup(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let id = r.key.unwrap_or_default();
    let terminal = |e: wasmstream::Errno| Error::terminal(e.to_string());
    if state_get(id).map_err(terminal)?.is_some() {
        return Ok(());
    }
    state_put(id, b"").map_err(terminal)?;
    out.emit(&Output {
        key: r.key,
        value: r.value,
        headers: r.headers.into(),
        ..Output::default()
    })?;
    Ok(())
}

wasmstream::processor!(dedup);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmstream::{reset_state, run, state_snapshot, Status, TestRecord};

    #[test]
    fn first_of_each_id() {
        reset_state();
        let mut emitted = Vec::new();
        for (i, (k, v)) in [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("b", "5")]
            .iter()
            .enumerate()
        {
            let res = run(
                dedup,
                &TestRecord::new("in")
                    .key(k)
                    .value(v)
                    .header("h", Some(b"x")),
            );
            assert_eq!(res.status, Status::Ok, "record {}: {:?}", i, res.error);
            for o in &res.outputs {
                emitted.push((o.key.clone().unwrap(), o.value.clone().unwrap()));
            }
        }
        assert_eq!(
            emitted,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"4".to_vec())
            ]
        );
        assert_eq!(state_snapshot().len(), 3);
        // An id the host refuses (another partition's) fails the record.
        wasmstream::set_foreign_state_prefix(b"other-");
        let res = run(dedup, &TestRecord::new("in").key("other-a"));
        assert_eq!(res.status, Status::Fail);
        assert!(res
            .error
            .unwrap()
            .contains("state key outside the record's partition"));
    }
}
