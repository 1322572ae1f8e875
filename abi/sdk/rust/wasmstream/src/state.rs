//! State (ABI.md §4.1): the record's input partition's key-value store, when
//! the pipeline has `state.enabled`.

use crate::{codec, rt, sys, Errno, Op, OP_STATE_GET, OP_STATE_SCAN};
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
/// keys the producer also partitions by (else [`Errno::WRONG_KEY`]). The
/// empty key is a key: a record with a null key (`r.key.unwrap_or_default()`)
/// uses it; it belongs to the partition an empty record key is sent to, and
/// a scan of every key lists it first.
///
/// Errors: [`Errno::TOO_LARGE`] (a key over [`MAX_STATE_KEY_BYTES`]),
/// [`Errno::WRONG_KEY`], [`Errno::NO_STATE`] (the pipeline has no state),
/// [`Errno::BAD_HANDLE`] (called outside a record's call). Return them (as
/// [`crate::Error::terminal`], usually) to fail the record.
pub fn state_get(key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
    let h = handle()?;
    get_value(|buf| sys::state_get(h, key, buf))
}

/// The read of [`state_get`] and [`state_get2`]: `call` copies the value
/// into the buffer when it fits and returns its size (the host's return
/// code); a larger value is asked for again with a buffer of its size.
fn get_value<C>(mut call: C) -> Result<Option<Vec<u8>>, Errno>
where
    C: FnMut(&mut [u8]) -> i32,
{
    GET_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        if buf.is_empty() {
            buf.resize(1024, 0);
        }
        loop {
            let rc = call(&mut buf);
            if rc == -Errno::NOT_FOUND.0 {
                return Ok(None);
            }
            status(rc)?;
            let n = rc as usize;
            if n <= buf.len() {
                return Ok(Some(buf[..n].to_vec()));
            }
            buf.resize(n, 0); // the value is larger: ask again with its size
        }
    })
}

/// The host's return code as a result: a negative one is its errno.
fn status(rc: i32) -> Result<(), Errno> {
    if rc < 0 {
        return Err(Errno(-rc));
    }
    Ok(())
}

/// Sets `key` to `value` for the record: later records of the partition see
/// it at once; it becomes durable with the record's outputs, and a record
/// that fails leaves none of its writes behind. An empty value is a value.
/// Errors as [`state_get`]; [`Errno::TOO_LARGE`] also for a value over
/// `state.max_value_bytes`; [`Errno::LIMIT`] when the record's writes (which
/// count as its outputs) reach `limits.max_outputs` or
/// `limits.max_output_bytes`, the host holds its maximum of outputs, or the
/// partition's state is at `state.max_bytes` (ABI.md §4.1).
pub fn state_put(key: &[u8], value: &[u8]) -> Result<(), Errno> {
    status(sys::state_put(handle()?, key, value))
}

/// Removes `key` for the record. Errors as [`state_get`]; [`Errno::LIMIT`]
/// as [`state_put`]'s, but never for `state.max_bytes`.
pub fn state_delete(key: &[u8]) -> Result<(), Errno> {
    status(sys::state_delete(handle()?, key))
}

/// Calls `f` with every key that starts with `prefix` and its value, in key
/// order (bytewise), until `f` returns `false`. The host hands the entries
/// over in bounded batches (several host calls for a large scan); the
/// record's own writes are included, and a write during the scan may or may
/// not be seen by it. Errors: [`Errno::TOO_LARGE`] (a prefix over
/// [`MAX_STATE_KEY_BYTES`]), [`Errno::NO_STATE`], [`Errno::BAD_HANDLE`],
/// [`Errno::BAD_ENCODING`] (the host's batch is malformed).
pub fn state_scan<F>(prefix: &[u8], f: F) -> Result<(), Errno>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let h = handle()?;
    scan_batches(|after, buf| sys::state_scan(h, prefix, after, buf), f)
}

/// The scan loop of [`state_scan`] and [`state_scan2`]: `call` fills the
/// buffer with the entries after a cursor (the host's return code), `f`
/// gets them one by one.
fn scan_batches<C, F>(mut call: C, mut f: F) -> Result<(), Errno>
where
    C: FnMut(&[u8], &mut [u8]) -> i32,
    F: FnMut(&[u8], &[u8]) -> bool,
{
    // The buffer is taken for the scan: f may itself scan (with a new one).
    let mut buf = SCAN_BUF_.with(|b| std::mem::take(&mut *b.borrow_mut()));
    if buf.is_empty() {
        buf.resize(SCAN_BUF, 0);
    }
    let mut after: Vec<u8> = Vec::new();
    let res = loop {
        let rc = call(&after, &mut buf);
        if rc == -Errno::BUF_TOO_SMALL.0 && buf.len() < MAX_SCAN_BUF {
            let n = buf.len() * 2;
            buf.resize(n, 0);
            continue;
        }
        if rc < 0 {
            break Err(Errno(-rc));
        }
        if rc == 0 || rc as usize > buf.len() {
            break if rc == 0 {
                Ok(())
            } else {
                Err(Errno::BAD_ENCODING)
            };
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

// ---- event time (ABI.md §4.2) ----
//
// Two-part keys: (key, sub) names one value; only key is checked against
// the record's partition (Errno::WRONG_KEY), sub is any bytes up to
// MAX_STATE_KEY_BYTES (the empty sub is a sub). They are a namespace of
// their own: (k, sub) is never the one-part key k, and state_scan lists
// none of them. They are read and written during a record's call or a
// timer firing's (wasmstream::processor!'s timer function), like the
// one-part keys.

/// Returns `(key, sub)`'s value, or `None` when it has none. Errors as
/// [`state_get`] ([`Errno::TOO_LARGE`] also for a sub over
/// [`MAX_STATE_KEY_BYTES`]).
pub fn state_get2(key: &[u8], sub: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
    let h = handle()?;
    get_value(|buf| sys::state_get2(h, key, sub, buf))
}

/// Sets `(key, sub)` to `value` for the call in progress, as
/// [`state_put`] does for a one-part key (held until the record or firing
/// succeeds; counted in the record limits and `state.max_bytes`).
pub fn state_put2(key: &[u8], sub: &[u8], value: &[u8]) -> Result<(), Errno> {
    status(sys::state_put2(handle()?, key, sub, value))
}

/// Removes `(key, sub)` for the call in progress. Errors as
/// [`state_delete`].
pub fn state_delete2(key: &[u8], sub: &[u8]) -> Result<(), Errno> {
    status(sys::state_delete2(handle()?, key, sub))
}

/// Calls `f` with every sub of `key` that starts with `prefix` and its
/// value, in sub order (bytewise), until `f` returns `false`; as
/// [`state_scan`], in bounded batches, the call's own writes included.
/// Errors as [`state_scan`], and [`Errno::WRONG_KEY`].
pub fn state_scan2<F>(key: &[u8], prefix: &[u8], f: F) -> Result<(), Errno>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let h = handle()?;
    scan_batches(|after, buf| sys::state_scan2(h, key, prefix, after, buf), f)
}

/// The partition's stream time in milliseconds: the largest timestamp of
/// its records decided so far, -1 before any. It does not count the record
/// in progress (take the larger of the two for Kafka Streams' stream time);
/// during a timer firing it is the firing's round's. Errors:
/// [`Errno::NO_STATE`], [`Errno::BAD_HANDLE`].
pub fn stream_time() -> Result<i64, Errno> {
    let mut out = [0u8; 8];
    status(sys::stream_time(handle()?, &mut out))?;
    Ok(i64::from_le_bytes(out))
}

/// Sets the event-time timer `(key, at)`: the processor's timer function
/// is called once stream time reaches `at` (milliseconds), in `(at, key)`
/// order. Setting it again is the same timer. The timer is a state write of
/// the call (one output in the record limits, `key` and 8 bytes in
/// `state.max_bytes`), kept only if the call succeeds. Errors:
/// [`Errno::TOO_LARGE`], [`Errno::WRONG_KEY`], [`Errno::NO_STATE`],
/// [`Errno::LIMIT`] (a limit, or, during a firing, an `at` at or before
/// the firing's: a round always ends).
pub fn timer_set(key: &[u8], at: i64) -> Result<(), Errno> {
    status(sys::timer_set(handle()?, key, at))
}

/// Removes the timer `(key, at)`, whether or not it was set. Errors as
/// [`timer_set`].
pub fn timer_delete(key: &[u8], at: i64) -> Result<(), Errno> {
    status(sys::timer_delete(handle()?, key, at))
}

// ---- asynchronous state reads (ABI.md §7.3) ----
//
// state_get and state_scan as operations for await_op, so that the instance
// takes other records while the host reads the state (a read may wait on
// the disk). A read sees the record's own writes made before await_op, and
// the partition's state as it is when the host performs the read: under
// ordering key, every write of the key's earlier records; under ordering
// partition, a record still waiting may not have written yet (ABI.md §4.1).
// A request the host refuses at once (a key, prefix or cursor over
// MAX_STATE_KEY_BYTES: Errno::TOO_LARGE; a key of another partition:
// Errno::WRONG_KEY; no state: Errno::NO_STATE; malformed:
// Errno::BAD_ENCODING) makes await_op return a terminal error naming the
// errno, as the Go SDK's Await does; the continuation never runs. A read
// that fails when it runs (the partition moved to another host) arrives as
// an OpError.

/// The bound of a scan batch when [`state_scan_async`] is given 0.
pub const STATE_SCAN_DEFAULT_BYTES: usize = 64 << 10;
/// The largest bound of a scan batch: a larger one is cut to it.
pub const STATE_SCAN_MAX_BYTES: usize = 1 << 20;

/// Reads `key`'s value as an operation: the result is `None` when the key
/// has no value (an empty value is a value). Keys as [`state_get`].
pub fn state_get_async(key: &[u8]) -> Op<Option<Vec<u8>>> {
    let mut req = Vec::with_capacity(4 + key.len());
    codec::append_state_get(&mut req, key);
    Op {
        kind: OP_STATE_GET,
        req,
        decode: decode_state_value,
    }
}

fn decode_state_value(buf: Vec<u8>) -> Result<Option<Vec<u8>>, String> {
    // buf is the whole result: the code byte, then the payload.
    codec::decode_state_get_result(&buf[1..])
        .map(|v| v.map(|v| v.to_vec()))
        .map_err(|e| e.to_string())
}

/// A key and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEntry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// The result of [`state_scan_async`]: the next keys of the scan, in key
/// order. No entries means no more keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateBatch {
    pub entries: Vec<StateEntry>,
}

impl StateBatch {
    /// Whether the scan is over (the batch has no entries).
    pub fn done(&self) -> bool {
        self.entries.is_empty()
    }
    /// The cursor of the next batch: the last key of this one (empty when
    /// the batch is).
    pub fn after(&self) -> &[u8] {
        self.entries.last().map_or(&[], |e| &e.key[..])
    }
}

/// Reads the next batch of the keys with `prefix` that sort after `after`
/// (from the first when `after` is empty), as an operation: as many whole
/// entries as fit in `max_bytes` (0: [`STATE_SCAN_DEFAULT_BYTES`]; at most
/// [`STATE_SCAN_MAX_BYTES`]), at least one. To go on, start it again with
/// `after` = [`StateBatch::after`], until a batch is [`StateBatch::done`].
/// Each batch is a read of its own: a key written between two batches is
/// seen if it sorts after the cursor.
pub fn state_scan_async(prefix: &[u8], after: &[u8], max_bytes: usize) -> Op<StateBatch> {
    let mut req = Vec::with_capacity(12 + prefix.len() + after.len());
    codec::append_state_scan(
        &mut req,
        prefix,
        after,
        max_bytes.min(STATE_SCAN_MAX_BYTES) as u32,
    );
    Op {
        kind: OP_STATE_SCAN,
        req,
        decode: decode_state_batch,
    }
}

fn decode_state_batch(buf: Vec<u8>) -> Result<StateBatch, String> {
    let mut b = StateBatch::default();
    codec::decode_state_entries(&buf[1..], |k, v| {
        b.entries.push(StateEntry {
            key: k.to_vec(),
            value: v.to_vec(),
        });
        true
    })
    .map_err(|e| e.to_string())?;
    Ok(b)
}

/// Splits a `u32 LE length | bytes` field off b.
pub(crate) fn cut(b: &[u8]) -> Option<(&[u8], &[u8])> {
    if b.len() < 4 {
        return None;
    }
    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if n > b.len() - 4 {
        return None;
    }
    Some((&b[4..4 + n], &b[4 + n..]))
}
