//! The guest side of ABI.md §3 and §7: reading a record, deciding it, and
//! the per-record bookkeeping of pending operations. The same code runs in
//! the module (over the host's imports) and in tests (over `hostrun`'s
//! simulated host).

use crate::{codec, sys, Emitter, Errno, Error, Output, Record};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// A continuation: called with the record, the emitter, the completion code,
/// its message and the whole result buffer.
pub(crate) type Cont =
    Box<dyn FnOnce(&Record<'_>, &mut Emitter, u8, &str, Vec<u8>) -> Result<(), Error>>;

/// A record waiting on operations: its encoding (the record is decoded from
/// it again for each continuation) and its outstanding operations (most
/// records wait on one or two: a short vector).
struct Waiting {
    buf: Vec<u8>,
    ops: Vec<(u32, Cont)>,
}

thread_local! {
    /// The record of the call in progress; 0 outside calls.
    static CUR: Cell<u32> = const { Cell::new(0) };
    /// The record buffer, reused across records; a record that goes
    /// pending keeps it and the next record gets a new one.
    static IN_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::new());
    static WAITING: RefCell<BTreeMap<u32, Waiting>> = RefCell::new(BTreeMap::new());
    /// The batch's record in progress (ABI.md §10); 0 outside batches.
    static BATCH_CUR: Cell<u32> = const { Cell::new(0) };
    /// Its output list, reused across records.
    /// A timer firing is in progress (no asynchronous operations).
    static FIRING: Cell<bool> = const { Cell::new(false) };
    static LIST: RefCell<OutList> = RefCell::new(OutList { buf: Vec::new(), n: 0, direct: false });
}

/// A batch record's outputs, handed to the host with its status
/// (`record_next`): each a u32 length (little-endian) and the output's
/// encoding.
struct OutList {
    buf: Vec<u8>,
    /// The outputs in buf.
    n: usize,
    /// The record's outputs go to the host one by one with `emit`.
    direct: bool,
}

/// A batch record's output list holds at most this many outputs and bytes;
/// past them, its outputs are emitted one by one, so that a processor that
/// emits until `emit` fails stops at the host's limit as it would alone.
const LIST_MAX_OUTPUTS: usize = 64;
const LIST_MAX_BYTES: usize = 64 << 10;
/// The headers the host decodes in an output (abi.MaxHeaders).
const MAX_HEADERS: usize = 1000;

const OK: i32 = 0;
const PENDING: i32 = 1;
const FAIL: i32 = 3;

fn fail(handle: u32, msg: &str) -> i32 {
    sys::set_error(handle, msg);
    FAIL
}

/// `wasmstream_on_record`.
pub fn on_record<F>(handle: u32, len: u32, f: &F) -> i32
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
{
    sys::init();
    let mut buf = IN_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
    buf.clear();
    buf.reserve(len as usize);
    // The host writes exactly len bytes into the spare capacity.
    let rc = sys::record_read(handle, buf.as_mut_ptr(), len);
    if rc < 0 || rc as u32 > len {
        IN_BUF.with(|b| *b.borrow_mut() = buf);
        return fail(handle, &format!("record_read: {}", Errno(-rc)));
    }
    unsafe { buf.set_len(rc as usize) };
    let st = run(handle, &mut buf, f);
    IN_BUF.with(|b| *b.borrow_mut() = buf); // empty if the record kept it
    st
}

/// `wasmstream_on_timer` (ABI.md §4.2): reads the firing with
/// `record_read`, runs f on it and decides it as a record is decided,
/// except that it cannot go pending (a firing has no asynchronous
/// operations: `pending` would be a protocol fault).
pub fn on_timer<F>(handle: u32, len: u32, f: &F) -> i32
where
    F: Fn(&crate::Timer<'_>, &mut Emitter) -> Result<(), Error>,
{
    sys::init();
    let mut buf: Vec<u8> = Vec::with_capacity(len as usize);
    // The host writes exactly len bytes into the spare capacity.
    let rc = sys::record_read(handle, buf.as_mut_ptr(), len);
    if rc < 0 || rc as u32 > len {
        return fail(handle, &format!("record_read: {}", Errno(-rc)));
    }
    unsafe { buf.set_len(rc as usize) };
    let t = match codec::decode_timer(&buf) {
        Ok(t) => t,
        Err(e) => return fail(handle, &e.to_string()),
    };
    CUR.with(|c| c.set(handle));
    FIRING.with(|c| c.set(true));
    let res = f(&t, &mut Emitter { handle, hold: None });
    FIRING.with(|c| c.set(false));
    CUR.with(|c| c.set(0));
    let res = match res {
        Err(e) if e.is_pending() => Err(Error::terminal(
            "wasmstream: a timer firing cannot wait on asynchronous operations (ABI.md §4.2)",
        )),
        r => r,
    };
    decide(handle, res)
}

/// Decodes the record handle from buf, runs f on it and decides it. A
/// record that goes pending keeps buf (taken, leaving an empty vector).
fn run<F>(handle: u32, buf: &mut Vec<u8>, f: &F) -> i32
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
{
    let st = match codec::decode_record(&buf[..]) {
        Err(e) => fail(handle, &e.to_string()),
        Ok(rec) => {
            CUR.with(|c| c.set(handle));
            let res = f(&rec, &mut Emitter { handle, hold: None });
            CUR.with(|c| c.set(0));
            decide(handle, res)
        }
    };
    if st == PENDING {
        WAITING.with(|w| {
            if let Some(e) = w.borrow_mut().get_mut(&handle) {
                e.buf = std::mem::take(buf);
            }
        });
    }
    st
}

/// `wasmstream_on_batch_v1` (ABI.md §10): takes the batch's records one by
/// one with `record_next`, handing over each one's status and output list,
/// and runs f on each as [`on_record`] would. The records' handles are
/// `first`, `first + 1`, ...; `max_len` is the longest record's encoding.
pub fn on_batch<F>(first: u32, _count: u32, max_len: u32, f: &F) -> i32
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
{
    sys::init();
    let mut buf = IN_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
    let mut status = OK;
    let mut handle = first.wrapping_sub(1);
    loop {
        buf.clear();
        // A new buffer only after a record that went pending (it kept the
        // old one).
        buf.reserve(max_len as usize);
        let (ptr, cap) = (
            buf.as_mut_ptr(),
            buf.capacity().min(u32::MAX as usize) as u32,
        );
        let n = hand_over(status, |st, list| sys::record_next(st, list, ptr, cap));
        if n <= 0 {
            IN_BUF.with(|b| *b.borrow_mut() = buf);
            return 0;
        }
        handle = handle.wrapping_add(1);
        let mut len = n as u32;
        if len as usize > buf.capacity() {
            buf.reserve(len as usize);
            let rc = sys::record_read(handle, buf.as_mut_ptr(), len);
            if rc < 0 || rc as u32 > len {
                status = fail(handle, &format!("record_read: {}", Errno(-rc)));
                continue;
            }
            len = rc as u32;
        }
        // record_next or record_read wrote len bytes into the spare capacity.
        unsafe { buf.set_len(len as usize) };
        BATCH_CUR.with(|c| c.set(handle));
        status = run(handle, &mut buf, f);
        BATCH_CUR.with(|c| c.set(0));
    }
}

/// Ends the record in progress with status through pull (`record_next` or
/// `completion_next`, which also begins the next), handing over its output
/// list unless it failed (its outputs are discarded with it), and empties
/// the list for the next record. Returns what pull returned.
fn hand_over(status: i32, pull: impl FnOnce(i32, &[u8]) -> i32) -> i32 {
    LIST.with(|l| {
        let mut l = l.borrow_mut();
        if status != OK && status != PENDING {
            l.buf.clear();
        }
        let n = pull(status, &l.buf);
        l.buf.clear();
        l.n = 0;
        l.direct = false;
        n
    })
}

/// Takes `o` into the output list when handle is the batch's record in
/// progress (what `emit` returns); `None` when the output goes to the host
/// with `emit` (a record alone, a continuation, or a record whose list is
/// full). The host checks the list when the record ends: an output it
/// refuses fails the record then (ABI.md §10).
pub(crate) fn list_output(handle: u32, o: &Output<'_>) -> Option<Result<(), Errno>> {
    if handle == 0 || BATCH_CUR.with(|c| c.get()) != handle {
        return None;
    }
    LIST.with(|l| {
        let mut l = l.borrow_mut();
        if l.direct {
            return None;
        }
        // What emit refuses by the output alone, refused at once.
        if o.partition.map_or(false, |p| p < -1) || o.headers.len() > MAX_HEADERS {
            return Some(Err(Errno::BAD_ENCODING));
        }
        let at = l.buf.len();
        l.buf.extend_from_slice(&[0; 4]);
        codec::append_output(&mut l.buf, o);
        let n = (l.buf.len() - at - 4) as u32;
        l.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
        l.n += 1;
        if l.n < LIST_MAX_OUTPUTS && l.buf.len() < LIST_MAX_BYTES {
            return Some(Ok(()));
        }
        // Many outputs: from here on they go to the host one by one, in
        // order, so that emit returns a limit when the host refuses.
        l.direct = true;
        Some(emit_list(handle, &mut l.buf))
    })
}

/// Emits the outputs of list one by one and empties it; after one the host
/// refuses, the rest is dropped (as after a refused emit).
fn emit_list(handle: u32, list: &mut Vec<u8>) -> Result<(), Errno> {
    let mut res = Ok(());
    let mut rest = &list[..];
    while rest.len() >= 4 {
        let n = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let rc = sys::emit_raw(handle, &rest[4..4 + n]);
        if rc < 0 {
            res = Err(Errno(-rc));
            break;
        }
        rest = &rest[4 + n..];
    }
    list.clear();
    res
}

/// `wasmstream_on_complete`.
pub fn on_complete(handle: u32, op: u32, len: u32) -> i32 {
    match read_result(handle, op, len) {
        Ok(res) => complete(handle, op, res),
        Err(st) => st,
    }
}

/// Reads the result of operation op with `result_read`; the record's
/// status when that fails.
fn read_result(handle: u32, op: u32, len: u32) -> Result<Vec<u8>, i32> {
    let mut res = Vec::with_capacity(len as usize);
    let rc = sys::result_read(op, res.as_mut_ptr(), len);
    if rc < 0 || rc as u32 > len {
        WAITING.with(|w| w.borrow_mut().remove(&handle)); // the record fails
        return Err(fail(handle, &format!("result_read: {}", Errno(-rc))));
    }
    unsafe { res.set_len(rc as usize) };
    Ok(res)
}

/// The length of the header `completion_next` writes before a result:
/// handle, op and the result's length, each a little-endian u32.
#[cfg(target_arch = "wasm32")]
const COMPLETION_HEADER: usize = 12;

/// `wasmstream_on_completions_v1` (ABI.md §10.1): takes the queued
/// completions one by one with `completion_next`, handing over each one's
/// record status and output list, and delivers each as [`on_complete`]
/// would. `max_len` is the longest header and result.
#[cfg(target_arch = "wasm32")]
pub fn on_completions(_count: u32, max_len: u32) -> i32 {
    sys::init();
    let mut buf: Vec<u8> = Vec::with_capacity((max_len as usize).max(COMPLETION_HEADER));
    let mut status = OK;
    loop {
        let (ptr, cap) = (
            buf.as_mut_ptr(),
            buf.capacity().min(u32::MAX as usize) as u32,
        );
        let n = hand_over(status, |st, list| sys::completion_next(st, list, ptr, cap));
        if n <= 0 {
            return 0;
        }
        let n = n as usize;
        // completion_next wrote the header, and the result when it fit,
        // into the spare capacity.
        unsafe {
            buf.set_len(if n <= buf.capacity() {
                n
            } else {
                COMPLETION_HEADER
            })
        };
        let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let (handle, op, size) = (word(0), word(4), word(8));
        let res = if n <= buf.capacity() {
            buf[COMPLETION_HEADER..n].to_vec() // the continuation owns its result
        } else {
            match read_result(handle, op, size) {
                Ok(r) => r,
                Err(st) => {
                    status = st;
                    continue;
                }
            }
        };
        BATCH_CUR.with(|c| c.set(handle));
        status = complete(handle, op, res);
        BATCH_CUR.with(|c| c.set(0));
    }
}

/// Delivers the result res of operation op to its continuation and
/// returns the record's status.
fn complete(handle: u32, op: u32, res: Vec<u8>) -> i32 {
    let decoded = codec::decode_completion(&res).map(|(code, msg)| (code, msg.to_owned()));
    let live = matches!(decoded, Ok((code, _)) if code != codec::COMPLETION_CANCELED);
    // Take the continuation of op and, if there is one, the record's buffer.
    let (cont, rbuf) = WAITING.with(|w| match w.borrow_mut().get_mut(&handle) {
        None => (None, Vec::new()),
        Some(e) => match e.ops.iter().position(|(id, _)| *id == op) {
            None => (None, Vec::new()),
            Some(i) => {
                let c = e.ops.swap_remove(i).1;
                (
                    Some(c),
                    if live {
                        std::mem::take(&mut e.buf)
                    } else {
                        Vec::new()
                    },
                )
            }
        },
    });
    let cont = match (cont, &decoded) {
        (Some(c), Ok(_)) if live => c,
        (_, Err(e)) => {
            WAITING.with(|w| w.borrow_mut().remove(&handle));
            return fail(handle, &e.to_string());
        }
        _ => {
            // A record that already ended (its handle is invalid now, the
            // status is ignored): forget it once nothing is outstanding.
            WAITING.with(|w| {
                let mut w = w.borrow_mut();
                if w.get(&handle).map_or(false, |e| e.ops.is_empty()) {
                    w.remove(&handle);
                }
            });
            return FAIL;
        }
    };
    let (code, msg) = decoded.unwrap_or_default();
    let st = match codec::decode_record(&rbuf) {
        Err(e) => {
            WAITING.with(|w| w.borrow_mut().remove(&handle));
            fail(handle, &e.to_string())
        }
        Ok(rec) => {
            CUR.with(|c| c.set(handle));
            let r = cont(&rec, &mut Emitter { handle, hold: None }, code, &msg, res);
            CUR.with(|c| c.set(0));
            decide(handle, r)
        }
    };
    if st == PENDING {
        WAITING.with(|w| {
            if let Some(e) = w.borrow_mut().get_mut(&handle) {
                e.buf = rbuf;
            }
        });
    }
    st
}

/// Turns what the processor or a continuation returned into the status the
/// host gets, setting the error message.
fn decide(handle: u32, res: Result<(), Error>) -> i32 {
    let res = match res {
        Err(e) if e.is_pending() => {
            if WAITING.with(|w| w.borrow().get(&handle).map_or(false, |e| !e.ops.is_empty())) {
                return PENDING;
            }
            Err(Error::terminal(
                "wasmstream: returned pending, but no asynchronous operation is outstanding",
            ))
        }
        r => r,
    };
    // Operations still outstanding are canceled by the host.
    WAITING.with(|w| {
        let mut w = w.borrow_mut();
        if !w.is_empty() {
            w.remove(&handle);
        }
    });
    match res {
        Ok(()) => OK,
        Err(e) => {
            sys::set_error(handle, e.message());
            e.status() as i32
        }
    }
}

/// Starts an operation for the record of the call in progress.
pub(crate) fn start(kind: i32, req: &[u8], name: &str, cont: Cont) -> Result<(), Error> {
    let h = CUR.with(|c| c.get());
    if h == 0 {
        return Err(Error::terminal(
            "wasmstream: await_op called outside a record's processing",
        ));
    }
    if FIRING.with(|c| c.get()) {
        return Err(Error::terminal(format!(
            "wasmstream: start {} operation: a timer firing cannot wait on asynchronous operations (ABI.md §4.2)",
            name
        )));
    }
    let rc = sys::async_start(h, kind, req);
    if rc < 0 {
        let e = Errno(-rc);
        let msg = format!("wasmstream: start {} operation: {}", name, e);
        // Retrying the same request cannot help (the Go SDK's Await too).
        let terminal = matches!(
            e,
            Errno::BAD_ENCODING
                | Errno::NOT_SUPPORTED
                | Errno::TOO_LARGE
                | Errno::WRONG_KEY
                | Errno::NO_STATE
        );
        return Err(if terminal {
            Error::terminal(msg)
        } else {
            Error::retry(msg)
        });
    }
    WAITING.with(|w| {
        w.borrow_mut()
            .entry(h)
            .or_insert_with(|| Waiting {
                buf: Vec::new(),
                ops: Vec::with_capacity(2),
            })
            .ops
            .push((rc as u32, cont))
    });
    Err(Error::pending())
}

/// Whether operation op of record handle is outstanding (host runs).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn outstanding(handle: u32, op: u32) -> bool {
    WAITING.with(|w| {
        w.borrow()
            .get(&handle)
            .map_or(false, |e| e.ops.iter().any(|(id, _)| *id == op))
    })
}

/// Forgets every waiting record (host runs, between records).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn reset() {
    WAITING.with(|w| w.borrow_mut().clear());
}

/// The record of the call in progress; 0 outside calls.
pub(crate) fn current() -> u32 {
    CUR.with(|c| c.get())
}
