//! The host functions of `wasmstream_v1` (ABI.md §4): imported in the
//! module, simulated by `hostrun` elsewhere.

use crate::{codec, Errno, Output};

#[cfg(target_arch = "wasm32")]
mod imp {
    use std::cell::{Cell, RefCell};

    #[link(wasm_import_module = "wasmstream_v1")]
    extern "C" {
        #[link_name = "record_read"]
        fn host_record_read(handle: u32, buf: *mut u8, len: u32) -> i32;
        #[link_name = "emit"]
        fn host_emit(handle: u32, ptr: *const u8, len: u32) -> i32;
        #[link_name = "set_error"]
        fn host_set_error(handle: u32, ptr: *const u8, len: u32) -> i32;
        #[link_name = "log"]
        fn host_log(level: i32, ptr: *const u8, len: u32);
        #[link_name = "async_start"]
        fn host_async_start(handle: u32, kind: i32, req: *const u8, len: u32) -> i32;
        #[link_name = "result_read"]
        fn host_result_read(op: u32, buf: *mut u8, len: u32) -> i32;
        #[link_name = "state_get"]
        fn host_state_get(
            handle: u32,
            key: *const u8,
            key_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
        #[link_name = "state_put"]
        fn host_state_put(
            handle: u32,
            key: *const u8,
            key_len: u32,
            val: *const u8,
            val_len: u32,
        ) -> i32;
        #[link_name = "state_delete"]
        fn host_state_delete(handle: u32, key: *const u8, key_len: u32) -> i32;
        #[link_name = "state_scan"]
        fn host_state_scan(
            handle: u32,
            prefix: *const u8,
            prefix_len: u32,
            after: *const u8,
            after_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
        // Event time (ABI.md §4.2). An import the module never calls is not
        // linked in, so a processor without timers loads in a host that
        // does not serve them.
        #[link_name = "state_get2"]
        fn host_state_get2(
            handle: u32,
            key: *const u8,
            key_len: u32,
            sub: *const u8,
            sub_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
        #[link_name = "state_put2"]
        fn host_state_put2(
            handle: u32,
            key: *const u8,
            key_len: u32,
            sub: *const u8,
            sub_len: u32,
            val: *const u8,
            val_len: u32,
        ) -> i32;
        #[link_name = "state_delete2"]
        fn host_state_delete2(
            handle: u32,
            key: *const u8,
            key_len: u32,
            sub: *const u8,
            sub_len: u32,
        ) -> i32;
        #[link_name = "state_scan2"]
        fn host_state_scan2(
            handle: u32,
            key: *const u8,
            key_len: u32,
            prefix: *const u8,
            prefix_len: u32,
            after: *const u8,
            after_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
        #[link_name = "stream_time"]
        fn host_stream_time(handle: u32, out: *mut u8) -> i32;
        #[link_name = "timer_set"]
        fn host_timer_set(handle: u32, key: *const u8, key_len: u32, at: i64) -> i32;
        #[link_name = "timer_delete"]
        fn host_timer_delete(handle: u32, key: *const u8, key_len: u32, at: i64) -> i32;
    }

    // The batch entry (ABI.md §10).
    #[link(wasm_import_module = "wasmstream_batch_v1")]
    extern "C" {
        #[link_name = "record_next"]
        fn host_record_next(
            status: i32,
            out: *const u8,
            out_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
        #[link_name = "completion_next"]
        fn host_completion_next(
            status: i32,
            out: *const u8,
            out_len: u32,
            buf: *mut u8,
            buf_len: u32,
        ) -> i32;
    }

    thread_local! {
        static OUT_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::new());
        static HOOKED: Cell<bool> = const { Cell::new(false) };
    }

    /// Once per instance: a panic prints "panic: <message>" to stderr, the
    /// form the host recognises as a `panic` fault (ABI.md §6), then traps.
    #[inline]
    pub fn init() {
        if !HOOKED.with(|h| h.replace(true)) {
            std::panic::set_hook(Box::new(|info| {
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    s.to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "(non-string payload)".to_string()
                };
                match info.location() {
                    Some(l) => eprintln!(
                        "panic: {}\n\nat {}:{}:{}",
                        msg,
                        l.file(),
                        l.line(),
                        l.column()
                    ),
                    None => eprintln!("panic: {}", msg),
                }
            }));
        }
    }

    pub fn record_read(handle: u32, buf: *mut u8, len: u32) -> i32 {
        unsafe { host_record_read(handle, buf, len) }
    }
    pub fn record_next(status: i32, out: &[u8], buf: *mut u8, buf_len: u32) -> i32 {
        unsafe { host_record_next(status, out.as_ptr(), out.len() as u32, buf, buf_len) }
    }
    pub fn completion_next(status: i32, out: &[u8], buf: *mut u8, buf_len: u32) -> i32 {
        unsafe { host_completion_next(status, out.as_ptr(), out.len() as u32, buf, buf_len) }
    }
    pub fn with_out_buf<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        OUT_BUF.with(|b| f(&mut b.borrow_mut()))
    }
    pub fn emit(handle: u32, b: &[u8]) -> i32 {
        unsafe { host_emit(handle, b.as_ptr(), b.len() as u32) }
    }
    pub fn set_error(handle: u32, msg: &str) {
        unsafe { host_set_error(handle, msg.as_ptr(), msg.len() as u32) };
    }
    pub fn log(level: i32, msg: &str) {
        unsafe { host_log(level, msg.as_ptr(), msg.len() as u32) }
    }
    pub fn async_start(handle: u32, kind: i32, req: &[u8]) -> i32 {
        unsafe { host_async_start(handle, kind, req.as_ptr(), req.len() as u32) }
    }
    pub fn result_read(op: u32, buf: *mut u8, len: u32) -> i32 {
        unsafe { host_result_read(op, buf, len) }
    }
    // A slice as the imports take it: its address and its length.
    fn raw(b: &[u8]) -> (*const u8, u32) {
        (b.as_ptr(), b.len() as u32)
    }
    fn raw_mut(b: &mut [u8]) -> (*mut u8, u32) {
        (b.as_mut_ptr(), b.len() as u32)
    }

    pub fn state_get(handle: u32, key: &[u8], buf: &mut [u8]) -> i32 {
        let ((k, kn), (b, bn)) = (raw(key), raw_mut(buf));
        unsafe { host_state_get(handle, k, kn, b, bn) }
    }
    pub fn state_put(handle: u32, key: &[u8], val: &[u8]) -> i32 {
        let ((k, kn), (v, vn)) = (raw(key), raw(val));
        unsafe { host_state_put(handle, k, kn, v, vn) }
    }
    pub fn state_delete(handle: u32, key: &[u8]) -> i32 {
        let (k, kn) = raw(key);
        unsafe { host_state_delete(handle, k, kn) }
    }
    pub fn state_scan(handle: u32, prefix: &[u8], after: &[u8], buf: &mut [u8]) -> i32 {
        let ((p, pn), (a, an), (b, bn)) = (raw(prefix), raw(after), raw_mut(buf));
        unsafe { host_state_scan(handle, p, pn, a, an, b, bn) }
    }
    pub fn state_get2(handle: u32, key: &[u8], sub: &[u8], buf: &mut [u8]) -> i32 {
        let ((k, kn), (s, sn), (b, bn)) = (raw(key), raw(sub), raw_mut(buf));
        unsafe { host_state_get2(handle, k, kn, s, sn, b, bn) }
    }
    pub fn state_put2(handle: u32, key: &[u8], sub: &[u8], val: &[u8]) -> i32 {
        let ((k, kn), (s, sn), (v, vn)) = (raw(key), raw(sub), raw(val));
        unsafe { host_state_put2(handle, k, kn, s, sn, v, vn) }
    }
    pub fn state_delete2(handle: u32, key: &[u8], sub: &[u8]) -> i32 {
        let ((k, kn), (s, sn)) = (raw(key), raw(sub));
        unsafe { host_state_delete2(handle, k, kn, s, sn) }
    }
    pub fn state_scan2(
        handle: u32,
        key: &[u8],
        prefix: &[u8],
        after: &[u8],
        buf: &mut [u8],
    ) -> i32 {
        let ((k, kn), (p, pn)) = (raw(key), raw(prefix));
        let ((a, an), (b, bn)) = (raw(after), raw_mut(buf));
        unsafe { host_state_scan2(handle, k, kn, p, pn, a, an, b, bn) }
    }
    pub fn stream_time(handle: u32, out: &mut [u8; 8]) -> i32 {
        unsafe { host_stream_time(handle, out.as_mut_ptr()) }
    }
    pub fn timer_set(handle: u32, key: &[u8], at: i64) -> i32 {
        unsafe { host_timer_set(handle, key.as_ptr(), key.len() as u32, at) }
    }
    pub fn timer_delete(handle: u32, key: &[u8], at: i64) -> i32 {
        unsafe { host_timer_delete(handle, key.as_ptr(), key.len() as u32, at) }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub use crate::hostrun::sim::*;
    pub fn init() {}
}

#[cfg(target_arch = "wasm32")]
pub(crate) use imp::completion_next;
pub(crate) use imp::record_next;
pub(crate) use imp::{
    async_start, init, log, record_read, result_read, set_error, state_delete, state_get,
    state_put, state_scan,
};
pub(crate) use imp::{
    state_delete2, state_get2, state_put2, state_scan2, stream_time, timer_delete, timer_set,
};

/// `emit` of an output already encoded.
pub(crate) fn emit_raw(handle: u32, b: &[u8]) -> i32 {
    imp::emit(handle, b)
}

pub(crate) fn emit_output(handle: u32, o: &Output<'_>) -> Result<(), Errno> {
    // A record of a batch hands its outputs over in a list (ABI.md §10).
    if let Some(r) = crate::rt::list_output(handle, o) {
        return r;
    }
    let rc = imp::with_out_buf(|b| {
        b.clear();
        codec::append_output(b, o);
        imp::emit(handle, b)
    });
    if rc < 0 {
        return Err(Errno(-rc));
    }
    Ok(())
}
