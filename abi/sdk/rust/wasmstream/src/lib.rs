//! The Rust SDK for wasmstream processors (guest ABI v1, `abi/ABI.md`).
//!
//! A processor is a function from a record to emitted records and an
//! outcome, registered once with [`processor!`]:
//!
//! ```no_run
//! use wasmstream::{Emitter, Error, Output, Record};
//!
//! fn uppercase(r: &Record, out: &mut Emitter) -> Result<(), Error> {
//!     let v = r.value.map(|v| v.to_ascii_uppercase());
//!     out.emit(&Output { key: r.key, value: v.as_deref(), headers: r.headers.into(), ..Output::default() })?;
//!     Ok(())
//! }
//!
//! wasmstream::processor!(uppercase);
//! ```
//!
//! Built for `wasm32-wasi` (crate-type `cdylib`), the macro exports the ABI's
//! functions. Built for any other target (`cargo test`), [`run`] and
//! [`run_with`] call the function the way the host would, so a processor is
//! unit tested without a WebAssembly runtime.
//!
//! Outcomes: `Ok(())` succeeds and releases what was emitted. An [`Error`]
//! fails the record and discards what it emitted: it is retried unless it is
//! [`Error::terminal`]. Any `std::error::Error` converts (with `?`) into a
//! retryable `Error`. A panic or running out of memory is a fault: the record
//! fails and the host replaces the instance.
//!
//! State (a pipeline with `state.enabled`, ABI.md §4.1): [`state_get`],
//! [`state_put`], [`state_delete`] and [`state_scan`] read and write the
//! record's input partition's key-value store while a record is processed.
//!
//! Event time (ABI.md §4.2): two-part state keys ([`state_get2`],
//! [`state_put2`], [`state_delete2`], [`state_scan2`]), the partition's
//! [`stream_time`] and event-time timers ([`timer_set`], [`timer_delete`]),
//! whose firings call the timer function registered with
//! `processor!(f, timer: t)`; the [`window`] module runs tumbling, hopping
//! and session windows over them, and [`windowtest::Partition`] runs them on
//! the host with the firing rule.
//!
//! Asynchronous operations: [`await_op`] starts an HTTP request, a timer or
//! a state read ([`state_get_async`], [`state_scan_async`]) and returns
//! [`Error::pending`]; the continuation it is given runs when the operation
//! completes, with the record and emitter again, and decides the record as
//! the processing function would.

use std::fmt;
use std::time::Duration;

pub mod codec;
pub mod json;
mod rt;
pub mod schema;
#[cfg(feature = "avro")]
pub mod sr;
mod state;
mod sys;
pub mod window;

#[cfg(not(target_arch = "wasm32"))]
mod hostrun;
#[cfg(not(target_arch = "wasm32"))]
pub mod windowtest;
#[cfg(not(target_arch = "wasm32"))]
pub use hostrun::{add_test_schema, reset_test_schemas};
#[cfg(not(target_arch = "wasm32"))]
pub use hostrun::{
    perform, run, run_with, OpResult, Operation, OwnedHeader, OwnedOutput, RunResult, TestRecord,
};
#[cfg(not(target_arch = "wasm32"))]
pub use hostrun::{
    reset_state, set_foreign_state_prefix, set_max_state_value_bytes, set_state_enabled,
    state_snapshot,
};
pub use schema::{
    register_schema, schema_by_id, schema_by_subject, Registered, Schema, SchemaReference,
    SchemaType, SubjectSchema, SCHEMA_LATEST,
};
pub use state::{
    state_delete, state_delete2, state_get, state_get2, state_get_async, state_put, state_put2,
    state_scan, state_scan2, state_scan_async, stream_time, timer_delete, timer_set, StateBatch,
    StateEntry, MAX_STATE_KEY_BYTES, STATE_SCAN_DEFAULT_BYTES, STATE_SCAN_MAX_BYTES,
};

#[doc(hidden)]
pub mod __rt {
    #[cfg(target_arch = "wasm32")]
    pub use crate::rt::on_completions;
    pub use crate::rt::{on_batch, on_complete, on_record, on_timer};
}

/// The ABI version this SDK implements.
pub const ABI_VERSION: i32 = 1;

/// Registers the processing function, a `fn(&Record, &mut Emitter) ->
/// Result<(), Error>`. Use it once, in the crate's root. On `wasm32` it
/// exports `wasmstream_abi_version`, `wasmstream_on_record`,
/// `wasmstream_on_complete`, the batch entry `wasmstream_on_batch_v1`
/// (ABI.md §10: the host may hand the function several records in one
/// call, each decided as in a call of its own) and the completions entry
/// `wasmstream_on_completions_v1` (§10.1: several completions in one call,
/// each decided as in a call of its own); elsewhere it expands to
/// nothing (tests call [`run`] with the function).
///
/// `processor!(f, timer: t)` also registers the timer function, a
/// `fn(&Timer, &mut Emitter) -> Result<(), Error>`, exported as
/// `wasmstream_on_timer` (ABI.md §4.2): a module that sets timers
/// ([`timer_set`], the [`window`] module) must have it. A firing cannot wait
/// on asynchronous operations: [`await_op`] in it fails terminally.
#[macro_export]
macro_rules! processor {
    ($f:path) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            #[no_mangle]
            pub extern "C" fn wasmstream_abi_version() -> i32 {
                $crate::ABI_VERSION
            }
            #[no_mangle]
            pub extern "C" fn wasmstream_on_record(handle: u32, len: u32) -> i32 {
                $crate::__rt::on_record(handle, len, &$f)
            }
            #[no_mangle]
            pub extern "C" fn wasmstream_on_complete(handle: u32, op: u32, len: u32) -> i32 {
                $crate::__rt::on_complete(handle, op, len)
            }
            #[no_mangle]
            pub extern "C" fn wasmstream_on_batch_v1(first: u32, count: u32, max_len: u32) -> i32 {
                $crate::__rt::on_batch(first, count, max_len, &$f)
            }
            #[no_mangle]
            pub extern "C" fn wasmstream_on_completions_v1(count: u32, max_len: u32) -> i32 {
                $crate::__rt::on_completions(count, max_len)
            }
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn(
            &$crate::Record,
            &mut $crate::Emitter,
        ) -> ::std::result::Result<(), $crate::Error> = $f;
    };
    ($f:path, timer: $t:path) => {
        $crate::processor!($f);
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            #[no_mangle]
            pub extern "C" fn wasmstream_on_timer(handle: u32, len: u32) -> i32 {
                $crate::__rt::on_timer(handle, len, &$t)
            }
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn(
            &$crate::Timer,
            &mut $crate::Emitter,
        ) -> ::std::result::Result<(), $crate::Error> = $t;
    };
}

/// A record's outcome, as the host gets it (ABI.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    Pending = 1,
    Retry = 2,
    Fail = 3,
}

/// A Kafka record header. A `None` value is a null value (distinct from an
/// empty one). The key is bytes: the host passes header keys through from
/// Kafka without checking that they are UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    pub const fn new(key: &'a str, value: Option<&'a [u8]>) -> Self {
        Header {
            key: key.as_bytes(),
            value,
        }
    }
    /// The key as a string, if it is UTF-8.
    pub fn key_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.key).ok()
    }
}

/// A record's headers, as they were encoded (iterating decodes them; nothing
/// is allocated).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Headers<'a> {
    pub(crate) count: u32,
    pub(crate) raw: &'a [u8],
}

impl<'a> Headers<'a> {
    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter {
            left: self.count,
            raw: self.raw,
        }
    }
    /// The value of the first header named `key`: `None` when there is none,
    /// `Some(None)` when its value is null.
    pub fn get(&self, key: &str) -> Option<Option<&'a [u8]>> {
        self.iter()
            .find(|h| h.key == key.as_bytes())
            .map(|h| h.value)
    }
}

impl fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for Headers<'a> {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;
    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Headers`].
pub struct HeaderIter<'a> {
    left: u32,
    raw: &'a [u8],
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;
    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(codec::next_header(&mut self.raw))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// The record being processed. It borrows the SDK's buffer: copy what must
/// outlive the call (a continuation gets the record again).
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// 1 on the first attempt, counting up on each retry.
    pub attempt: u32,
    /// `None`: null key.
    pub key: Option<&'a [u8]>,
    /// `None`: null value.
    pub value: Option<&'a [u8]>,
    pub headers: Headers<'a>,
}

impl<'a> Record<'a> {
    /// `"<topic>/<partition>/<offset>"` of where the record was first
    /// consumed: the same on every attempt and re-processing, different for
    /// every input record (ABI.md §7.4). Pass it to services that
    /// deduplicate requests.
    pub fn idempotency_key(&self) -> String {
        format!("{}/{}/{}", self.topic, self.partition, self.offset)
    }
    /// The value of the first header named `key`: `None` when there is none,
    /// `Some(None)` when its value is null.
    pub fn header(&self, key: &str) -> Option<Option<&'a [u8]>> {
        self.headers.get(key)
    }
}

/// A timer firing (ABI.md §4.2): the timer `(key, at)` set with
/// [`timer_set`] is due, stream time having reached `at`. The timer
/// function registered with [`processor!`] gets it and decides it as a
/// record: it may emit, read and write state, set later timers and fail.
/// It borrows the SDK's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Timer<'a> {
    /// The timer's time, in milliseconds of stream time.
    pub at: i64,
    /// The round's stream time (at or after `at`).
    pub stream_time: i64,
    /// The input partition.
    pub partition: i32,
    /// 1 on the first attempt, counting up on each retry.
    pub attempt: u32,
    /// The input topic.
    pub topic: &'a str,
    /// The timer's key (a key of the partition's state).
    pub key: &'a [u8],
}

/// The headers of an output: a list, or a record's headers as they are.
#[derive(Debug, Clone, Copy)]
pub enum OutputHeaders<'a> {
    List(&'a [Header<'a>]),
    Encoded(Headers<'a>),
}

impl Default for OutputHeaders<'_> {
    fn default() -> Self {
        OutputHeaders::List(&[])
    }
}

impl<'a> From<Headers<'a>> for OutputHeaders<'a> {
    fn from(h: Headers<'a>) -> Self {
        OutputHeaders::Encoded(h)
    }
}

impl<'a> From<&'a [Header<'a>]> for OutputHeaders<'a> {
    fn from(h: &'a [Header<'a>]) -> Self {
        OutputHeaders::List(h)
    }
}

impl<'a, const N: usize> From<&'a [Header<'a>; N]> for OutputHeaders<'a> {
    fn from(h: &'a [Header<'a>; N]) -> Self {
        OutputHeaders::List(h)
    }
}

impl<'a> From<&'a Vec<Header<'a>>> for OutputHeaders<'a> {
    fn from(h: &'a Vec<Header<'a>>) -> Self {
        OutputHeaders::List(h)
    }
}

impl<'a> OutputHeaders<'a> {
    pub fn len(&self) -> usize {
        match self {
            OutputHeaders::List(l) => l.len(),
            OutputHeaders::Encoded(h) => h.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = Header<'a>> + 'a {
        let (l, e): (&'a [Header<'a>], Headers<'a>) = match *self {
            OutputHeaders::List(l) => (l, Headers::default()),
            OutputHeaders::Encoded(h) => (&[], h),
        };
        l.iter().copied().chain(e.iter())
    }
}

/// A record to produce. An empty `topic` is the pipeline's output topic;
/// another must be allowed by the pipeline. `partition: None` lets the host
/// partition by key; `Some(p)` (p >= 0) pins the partition.
#[derive(Debug, Clone, Copy, Default)]
pub struct Output<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: OutputHeaders<'a>,
}

/// A host function's failure (ABI.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const BAD_HANDLE: Errno = Errno(1);
    pub const BUF_TOO_SMALL: Errno = Errno(2);
    pub const BAD_ENCODING: Errno = Errno(3);
    pub const TOPIC_DENIED: Errno = Errno(4);
    pub const LIMIT: Errno = Errno(5);
    pub const NOT_SUPPORTED: Errno = Errno(6);
    pub const BAD_OP: Errno = Errno(7);
    /// `state_get`: the key has no value ([`state_get`] returns `Ok(None)`).
    pub const NOT_FOUND: Errno = Errno(8);
    /// `state_*`: the key is over [`MAX_STATE_KEY_BYTES`] (a scan's prefix
    /// too) or the value over `state.max_value_bytes`.
    pub const TOO_LARGE: Errno = Errno(9);
    /// `state_*`: the key belongs to another input partition than the record's.
    pub const WRONG_KEY: Errno = Errno(10);
    /// `state_*`: the pipeline has no state (`state.enabled` is off).
    pub const NO_STATE: Errno = Errno(11);
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            1 => "bad record handle",
            2 => "buffer too small",
            3 => "malformed output encoding",
            4 => "output topic not allowed",
            5 => "output limit reached",
            6 => "not supported",
            7 => "bad operation id",
            8 => "state key not found",
            9 => "state key or value too large",
            10 => "state key outside the record's partition",
            11 => "state not enabled for this pipeline",
            _ => "unknown errno",
        })
    }
}

impl std::error::Error for Errno {}

/// Takes a record's outputs. The host holds them and produces them only if
/// the record succeeds; `emit` copies what it is given.
///
/// In a batch call (ABI.md §10) the outputs of a record are handed to the
/// host in one list with its outcome, so `emit` cannot report the host's
/// refusal at once: an output the host refuses (a denied topic, a limit)
/// fails the record when it ends instead — retryably for a limit,
/// terminally for a denied topic — even if the processor ignored the
/// error. Past 64 outputs (or 64 KiB) in a record, they go to the host one
/// by one and `emit` returns its refusal as in a call of its own, so a
/// processor that emits until `emit` fails stops at the host's limit.
pub struct Emitter {
    pub(crate) handle: u32,
    /// Outputs held back (sr::run), each a u32 length then its encoding.
    pub(crate) hold: Option<Vec<u8>>,
}

impl Emitter {
    /// Holds `o` for the record. Fails with [`Errno::TOPIC_DENIED`],
    /// [`Errno::LIMIT`] (failing the record retryably is right) or
    /// [`Errno::BAD_ENCODING`] (a partition below -1); in a batch call, a
    /// denied topic or a limit may fail the record when it ends instead
    /// (see [`Emitter`]).
    pub fn emit(&mut self, o: &Output<'_>) -> Result<(), Errno> {
        if let Some(h) = self.hold.as_mut() {
            let at = h.len();
            h.extend_from_slice(&[0; 4]);
            codec::append_output(h, o);
            let n = (h.len() - at - 4) as u32;
            h[at..at + 4].copy_from_slice(&n.to_le_bytes());
            return Ok(());
        }
        sys::emit_output(self.handle, o)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Retry,
    Terminal,
    Pending,
}

/// A record's failure: retryable unless [`Error::terminal`]. Any
/// `std::error::Error` converts into a retryable one, so `?` works.
/// [`Error::pending`] is not a failure: it says the record waits on an
/// operation ([`await_op`] returns it).
pub struct Error {
    kind: Kind,
    msg: String,
}

impl Error {
    /// A retryable failure.
    pub fn retry(msg: impl Into<String>) -> Error {
        Error {
            kind: Kind::Retry,
            msg: msg.into(),
        }
    }
    /// A terminal failure: the record is not retried and goes to the
    /// dead-letter topic.
    pub fn terminal(msg: impl Into<String>) -> Error {
        Error {
            kind: Kind::Terminal,
            msg: msg.into(),
        }
    }
    /// The record waits on asynchronous operations it started. A
    /// continuation returns it to keep waiting on others.
    pub fn pending() -> Error {
        Error {
            kind: Kind::Pending,
            msg: String::new(),
        }
    }
    /// This error, made terminal.
    pub fn into_terminal(mut self) -> Error {
        if self.kind == Kind::Retry {
            self.kind = Kind::Terminal;
        }
        self
    }
    pub fn is_terminal(&self) -> bool {
        self.kind == Kind::Terminal
    }
    pub fn is_pending(&self) -> bool {
        self.kind == Kind::Pending
    }
    pub fn message(&self) -> &str {
        &self.msg
    }
    pub(crate) fn status(&self) -> Status {
        match self.kind {
            Kind::Retry => Status::Retry,
            Kind::Terminal => Status::Fail,
            Kind::Pending => Status::Pending,
        }
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Error {
        Error::retry(e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Pending => f.write_str("the record waits on an asynchronous operation"),
            _ => f.write_str(&self.msg),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self)
    }
}

/// Log levels of [`log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// Writes `msg` to the host's log (rate-limited per instance; at most 4096
/// bytes kept). On the host (tests) it prints to stderr.
pub fn log(level: Level, msg: &str) {
    sys::log(level as i32, msg)
}

// ---- asynchronous operations ----

pub(crate) const OP_TIMER: i32 = 1;
pub(crate) const OP_HTTP: i32 = 2;
pub(crate) const OP_STATE_GET: i32 = 3;
pub(crate) const OP_STATE_SCAN: i32 = 4;
pub(crate) const OP_SCHEMA_BY_ID: i32 = 5;
pub(crate) const OP_SCHEMA_BY_SUBJECT: i32 = 6;
pub(crate) const OP_SCHEMA_REGISTER: i32 = 7;

fn kind_name(kind: i32) -> &'static str {
    match kind {
        OP_TIMER => "timer",
        OP_HTTP => "http",
        OP_STATE_GET => "state_get",
        OP_STATE_SCAN => "state_scan",
        OP_SCHEMA_BY_ID => "schema_by_id",
        OP_SCHEMA_BY_SUBJECT => "schema_by_subject",
        OP_SCHEMA_REGISTER => "schema_register",
        _ => "unknown",
    }
}

/// The failure of an operation, as the host reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    /// "http", "timer", "state_get", "state_scan", "schema_by_id",
    /// "schema_by_subject", "schema_register".
    pub op: &'static str,
    pub msg: String,
    /// The host refused the operation by policy (a host not on the allow
    /// list, a body over a limit): retrying will not help.
    pub refused: bool,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for OpError {}

/// An asynchronous operation whose result is a `T`.
pub struct Op<T> {
    kind: i32,
    req: Vec<u8>,
    decode: fn(Vec<u8>) -> Result<T, String>,
}

/// Completes after `d`.
pub fn timer(d: Duration) -> Op<()> {
    let mut req = Vec::with_capacity(8);
    codec::append_timer(&mut req, d);
    Op {
        kind: OP_TIMER,
        req,
        decode: |_| Ok(()),
    }
}

/// An HTTP request. Only hosts in the pipeline's `async.http.allow_hosts`
/// can be reached; the refusal of any other arrives as an [`OpError`] with
/// `refused` set.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpRequest<'a> {
    /// "" is GET.
    pub method: &'a str,
    pub url: &'a str,
    pub headers: &'a [Header<'a>],
    pub body: Option<&'a [u8]>,
    /// Shortens the pipeline's request timeout (`async.http.timeout`).
    pub timeout: Option<Duration>,
}

/// Performs `req`.
pub fn http(req: &HttpRequest<'_>) -> Op<HttpResponse> {
    let mut b = Vec::with_capacity(32 + req.url.len() + req.body.map_or(0, |b| b.len()));
    codec::append_http_request(&mut b, req);
    Op {
        kind: OP_HTTP,
        req: b,
        decode: HttpResponse::decode,
    }
}

/// Performs a GET of `url`.
pub fn get(url: &str) -> Op<HttpResponse> {
    http(&HttpRequest {
        method: "GET",
        url,
        ..HttpRequest::default()
    })
}

/// A response, whatever its status code: check `status`.
pub struct HttpResponse {
    pub status: i32,
    buf: Vec<u8>,
    headers: (u32, usize, usize),
    body: Option<(usize, usize)>,
}

impl HttpResponse {
    fn decode(buf: Vec<u8>) -> Result<HttpResponse, String> {
        let (status, headers, body) = {
            // buf is the whole result: code byte, then the payload.
            let mut d = codec::Decoder::new(&buf, "http response");
            d.off = 1;
            let r = (|| {
                let status = d.u32()? as i32;
                let h = d.headers()?;
                let hs = (h.count, d.off - h.raw.len(), h.raw.len());
                let b = d.bytes()?.map(|b| b.len());
                let b = b.map(|n| (d.off - n, n));
                d.finish()?;
                Ok::<_, codec::DecodeError>((status, hs, b))
            })();
            r.map_err(|e| e.to_string())?
        };
        Ok(HttpResponse {
            status,
            buf,
            headers,
            body,
        })
    }
    /// The response headers (canonical names, e.g. `Content-Type`).
    pub fn headers(&self) -> Headers<'_> {
        let (count, at, n) = self.headers;
        Headers {
            count,
            raw: &self.buf[at..at + n],
        }
    }
    /// The first value of the header named `key` (canonical form).
    pub fn header(&self, key: &str) -> Option<&[u8]> {
        self.headers().get(key).map(|v| v.unwrap_or(&[]))
    }
    /// The body (`None`: null).
    pub fn body(&self) -> Option<&[u8]> {
        self.body.map(|(at, n)| &self.buf[at..at + n])
    }
}

impl fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("headers", &self.headers())
            .field("body", &self.body().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Starts `op` and returns [`Error::pending`], which the processing function
/// (or a continuation) returns. `then` is called with the record, the
/// emitter and the result when `op` completes; what it returns decides the
/// record (`Ok`, an error, or another `await_op`). What `then` captures must
/// be owned (`move`). If `op` cannot be started, `await_op` returns why
/// instead (terminal for a request the host refuses whatever the attempt: a
/// malformed one, an unknown kind, a state key refused with
/// [`Errno::TOO_LARGE`], [`Errno::WRONG_KEY`] or [`Errno::NO_STATE`];
/// retryable for the per-record limit), and `then` is never called.
///
/// To run several operations at once, call `await_op` for each and return
/// `Err(Error::pending())` from every continuation but the one that decides;
/// the operations still outstanding then are canceled.
pub fn await_op<T: 'static, F>(op: Op<T>, then: F) -> Result<(), Error>
where
    F: FnOnce(&Record<'_>, &mut Emitter, Result<T, OpError>) -> Result<(), Error> + 'static,
{
    let kind = op.kind;
    let decode = op.decode;
    rt::start(
        kind,
        &op.req,
        kind_name(kind),
        Box::new(move |r, out, code, msg, buf| {
            let res = if code == codec::COMPLETION_OK {
                decode(buf).map_err(|m| OpError {
                    op: kind_name(kind),
                    msg: m,
                    refused: false,
                })
            } else {
                Err(OpError {
                    op: kind_name(kind),
                    msg: msg.to_string(),
                    refused: code == codec::COMPLETION_REFUSED,
                })
            };
            then(r, out, res)
        }),
    )
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;
