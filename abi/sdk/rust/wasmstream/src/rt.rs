//! The guest side of ABI.md §3 and §7: reading a record, deciding it, and
//! the per-record bookkeeping of pending operations. The same code runs in
//! the module (over the host's imports) and in tests (over `hostrun`'s
//! simulated host).

use crate::{codec, sys, Emitter, Error, Errno, Record};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// A continuation: called with the record, the emitter, the completion code,
/// its message and the whole result buffer.
pub(crate) type Cont = Box<dyn FnOnce(&Record<'_>, &mut Emitter, u8, &str, Vec<u8>) -> Result<(), Error>>;

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
}

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
    let st = match codec::decode_record(&buf) {
        Err(e) => fail(handle, &e.to_string()),
        Ok(rec) => {
            CUR.with(|c| c.set(handle));
            let res = f(&rec, &mut Emitter { handle });
            CUR.with(|c| c.set(0));
            decide(handle, res)
        }
    };
    if st == PENDING {
        WAITING.with(|w| {
            if let Some(e) = w.borrow_mut().get_mut(&handle) {
                e.buf = buf;
            }
        });
    } else {
        IN_BUF.with(|b| *b.borrow_mut() = buf);
    }
    st
}

/// `wasmstream_on_complete`.
pub fn on_complete(handle: u32, op: u32, len: u32) -> i32 {
    let mut res = Vec::with_capacity(len as usize);
    let rc = sys::result_read(op, res.as_mut_ptr(), len);
    if rc < 0 || rc as u32 > len {
        WAITING.with(|w| w.borrow_mut().remove(&handle)); // the record fails
        return fail(handle, &format!("result_read: {}", Errno(-rc)));
    }
    unsafe { res.set_len(rc as usize) };
    let decoded = codec::decode_completion(&res).map(|(code, msg)| (code, msg.to_owned()));
    let live = matches!(decoded, Ok((code, _)) if code != codec::COMPLETION_CANCELED);
    // Take the continuation of op and, if there is one, the record's buffer.
    let (cont, rbuf) = WAITING.with(|w| match w.borrow_mut().get_mut(&handle) {
        None => (None, Vec::new()),
        Some(e) => match e.ops.iter().position(|(id, _)| *id == op) {
            None => (None, Vec::new()),
            Some(i) => {
                let c = e.ops.swap_remove(i).1;
                (Some(c), if live { std::mem::take(&mut e.buf) } else { Vec::new() })
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
            let r = cont(&rec, &mut Emitter { handle }, code, &msg, res);
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
            Err(Error::terminal("wasmstream: returned pending, but no asynchronous operation is outstanding"))
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
        return Err(Error::terminal("wasmstream: await_op called outside a record's processing"));
    }
    let rc = sys::async_start(h, kind, req);
    if rc < 0 {
        let e = Errno(-rc);
        let msg = format!("wasmstream: start {} operation: {}", name, e);
        // Retrying the same request cannot help (the Go SDK's Await too).
        let terminal = matches!(e, Errno::BAD_ENCODING | Errno::NOT_SUPPORTED | Errno::TOO_LARGE | Errno::WRONG_KEY | Errno::NO_STATE);
        return Err(if terminal { Error::terminal(msg) } else { Error::retry(msg) });
    }
    WAITING.with(|w| {
        w.borrow_mut().entry(h).or_insert_with(|| Waiting { buf: Vec::new(), ops: Vec::with_capacity(2) }).ops.push((rc as u32, cont))
    });
    Err(Error::pending())
}

/// Whether operation op of record handle is outstanding (host runs).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn outstanding(handle: u32, op: u32) -> bool {
    WAITING.with(|w| w.borrow().get(&handle).map_or(false, |e| e.ops.iter().any(|(id, _)| *id == op)))
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
