//! State (ABI.md §4.1): the record's input partition's key-value store, when
//! the pipeline has `state.enabled`.

use crate::{rt, sys, Errno};
use std::cell::RefCell;

/// The largest state key (a scan's prefix too), in bytes.
pub const MAX_STATE_KEY_BYTES: usize = 1024;

/// The first scan buffer; it doubles (up to 8 MiB) while not even one entry
/// fits.
const SCAN_BUF: usize = 64 << 10;
const MAX_SCAN_BUF: usize = 8 << 20;

thread_local! {
    /// Buffers reused by every call: an instance runs one call at a time.
    static GET_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::new());
    static SCAN_BUF_: RefCell<Vec<u8>> = RefCell::new(Vec::new());
}

fn handle() -> Result<u32, Errno> {
    match rt::current() {
        // Outside a record's call there is no record: the host would say so.
        0 => Err(Errno::BAD_HANDLE),
        h => Ok(h),
    }
}

/// Returns `key`'s value, or `None` when it has none. Call it only while
/// processing a record (in the processing function or a continuation): the
/// state is the record's input partition's, and `key` must be one the
/// input's partitioner sends to that partition — the record's own key, or
/// keys the producer also partitions by (else [`Errno::WRONG_KEY`]).
///
/// Errors: [`Errno::TOO_LARGE`] (a key over [`MAX_STATE_KEY_BYTES`]),
/// [`Errno::WRONG_KEY`], [`Errno::NO_STATE`] (the pipeline has no state),
/// [`Errno::BAD_HANDLE`] (called outside a record's call). Return them (as
/// [`crate::Error::terminal`], usually) to fail the record.
pub fn state_get(key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
    let h = handle()?;
    GET_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        if buf.is_empty() {
            buf.resize(1024, 0);
        }
        loop {
            let rc = sys::state_get(h, key, &mut buf);
            if rc == -Errno::NOT_FOUND.0 {
                return Ok(None);
            }
            if rc < 0 {
                return Err(Errno(-rc));
            }
            let n = rc as usize;
            if n <= buf.len() {
                return Ok(Some(buf[..n].to_vec()));
            }
            buf.resize(n, 0); // the value is larger: ask again with its size
        }
    })
}

/// Sets `key` to `value` for the record: later records of the partition see
/// it at once; it becomes durable with the record's outputs, and a record
/// that fails leaves none of its writes behind. An empty value is a value.
/// Errors as [`state_get`]; [`Errno::TOO_LARGE`] also for a value over
/// `state.max_value_bytes`.
pub fn state_put(key: &[u8], value: &[u8]) -> Result<(), Errno> {
    let rc = sys::state_put(handle()?, key, value);
    if rc < 0 {
        return Err(Errno(-rc));
    }
    Ok(())
}

/// Removes `key` for the record. Errors as [`state_get`].
pub fn state_delete(key: &[u8]) -> Result<(), Errno> {
    let rc = sys::state_delete(handle()?, key);
    if rc < 0 {
        return Err(Errno(-rc));
    }
    Ok(())
}

/// Calls `f` with every key that starts with `prefix` and its value, in key
/// order (bytewise), until `f` returns `false`. The host hands the entries
/// over in bounded batches (several host calls for a large scan); the
/// record's own writes are included, and a write during the scan may or may
/// not be seen by it. Errors: [`Errno::TOO_LARGE`] (a prefix over
/// [`MAX_STATE_KEY_BYTES`]), [`Errno::NO_STATE`], [`Errno::BAD_HANDLE`],
/// [`Errno::BAD_ENCODING`] (the host's batch is malformed).
pub fn state_scan<F>(prefix: &[u8], mut f: F) -> Result<(), Errno>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let h = handle()?;
    // The buffer is taken for the scan: f may itself scan (with a new one).
    let mut buf = SCAN_BUF_.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buf.is_empty() {
        buf.resize(SCAN_BUF, 0);
    }
    let mut after: Vec<u8> = Vec::new();
    let res = loop {
        let rc = sys::state_scan(h, prefix, &after, &mut buf);
        if rc == -Errno::BUF_TOO_SMALL.0 && buf.len() < MAX_SCAN_BUF {
            let n = buf.len() * 2;
            buf.resize(n, 0);
            continue;
        }
        if rc < 0 {
            break Err(Errno(-rc));
        }
        if rc == 0 || rc as usize > buf.len() {
            break if rc == 0 { Ok(()) } else { Err(Errno::BAD_ENCODING) };
        }
        let mut b = &buf[..rc as usize];
        let mut last: &[u8] = &[];
        let mut stop = false;
        let mut bad = false;
        while !b.is_empty() {
            let (k, rest) = match cut(b) {
                Some(x) => x,
                None => {
                    bad = true;
                    break;
                }
            };
            let (v, rest) = match cut(rest) {
                Some(x) => x,
                None => {
                    bad = true;
                    break;
                }
            };
            b = rest;
            last = k;
            if !f(k, v) {
                stop = true;
                break;
            }
        }
        if bad {
            break Err(Errno::BAD_ENCODING);
        }
        if stop {
            break Ok(());
        }
        after.clear();
        after.extend_from_slice(last);
    };
    SCAN_BUF_.with(|b| *b.borrow_mut() = buf);
    res
}

/// Splits a `u32 LE length | bytes` field off b.
fn cut(b: &[u8]) -> Option<(&[u8], &[u8])> {
    if b.len() < 4 {
        return None;
    }
    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if n > b.len() - 4 {
        return None;
    }
    Some((&b[4..4 + n], &b[4 + n..]))
}
