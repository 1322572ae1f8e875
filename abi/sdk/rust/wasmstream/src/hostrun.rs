//! Running a processor on the host, without a WebAssembly runtime (the Rust
//! counterpart of the Go SDK's `guest.Run`). The record goes through the ABI
//! encoding and the SDK's real entry points (`wasmstream_on_record`,
//! `wasmstream_on_complete`), over a simulated host that checks outputs the
//! way the host does.

use crate::codec::{self, put_bytes, put_str, put_u32, Decoder};
use crate::{rt, Emitter, Error, Record, Status};
use std::collections::VecDeque;
use std::time::Duration;

/// A header that owns its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedHeader {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

impl OwnedHeader {
    pub fn new(key: impl AsRef<[u8]>, value: Option<&[u8]>) -> Self {
        OwnedHeader {
            key: key.as_ref().to_vec(),
            value: value.map(|v| v.to_vec()),
        }
    }
}

fn own(h: crate::Header<'_>) -> OwnedHeader {
    OwnedHeader {
        key: h.key.to_vec(),
        value: h.value.map(|v| v.to_vec()),
    }
}

/// A record to run a processor on. `attempt` 0 is taken as 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub attempt: u32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<OwnedHeader>,
}

impl TestRecord {
    /// A record of `topic` with a null key and value.
    pub fn new(topic: &str) -> Self {
        TestRecord {
            topic: topic.to_string(),
            attempt: 1,
            ..Default::default()
        }
    }
    pub fn key(mut self, k: impl AsRef<[u8]>) -> Self {
        self.key = Some(k.as_ref().to_vec());
        self
    }
    pub fn value(mut self, v: impl AsRef<[u8]>) -> Self {
        self.value = Some(v.as_ref().to_vec());
        self
    }
    pub fn header(mut self, k: impl AsRef<[u8]>, v: Option<&[u8]>) -> Self {
        self.headers.push(OwnedHeader::new(k, v));
        self
    }
    pub fn attempt(mut self, n: u32) -> Self {
        self.attempt = n;
        self
    }
    pub fn at(mut self, partition: i32, offset: i64) -> Self {
        self.partition = partition;
        self.offset = offset;
        self
    }

    /// The record's encoding (ABI.md §5.1), as the host writes it.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(self.offset as u64).to_le_bytes());
        b.extend_from_slice(&(self.timestamp_ms as u64).to_le_bytes());
        put_u32(&mut b, self.partition as u32);
        put_u32(&mut b, if self.attempt == 0 { 1 } else { self.attempt });
        put_str(&mut b, self.topic.as_bytes());
        put_bytes(&mut b, self.key.as_deref());
        put_bytes(&mut b, self.value.as_deref());
        put_u32(&mut b, self.headers.len() as u32);
        for h in &self.headers {
            put_str(&mut b, &h.key);
            put_bytes(&mut b, h.value.as_deref());
        }
        b
    }
}

/// An output as the host holds it (decoded from what the guest emitted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedOutput {
    pub topic: String,
    /// `None`: the host partitions by key.
    pub partition: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<OwnedHeader>,
}

/// What a run observed: the outputs (as the host would hold them; empty
/// unless the record succeeded), the outcome and the error message.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub status: Status,
    pub outputs: Vec<OwnedOutput>,
    pub error: Option<String>,
}

/// An operation a processor started, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    Timer(Duration),
    Http {
        /// "" is GET.
        method: String,
        url: String,
        headers: Vec<OwnedHeader>,
        body: Option<Vec<u8>>,
        /// `None`: the pipeline's timeout.
        timeout: Option<Duration>,
    },
}

/// The result of an operation (ABI.md §7.2), as a test answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpResult(pub Vec<u8>);

impl OpResult {
    /// A timer that fired.
    pub fn done() -> Self {
        OpResult(vec![codec::COMPLETION_OK])
    }
    /// An HTTP response.
    pub fn http(status: i32, headers: &[(&str, &[u8])], body: Option<&[u8]>) -> Self {
        let mut b = vec![codec::COMPLETION_OK];
        put_u32(&mut b, status as u32);
        put_u32(&mut b, headers.len() as u32);
        for (k, v) in headers {
            put_str(&mut b, k.as_bytes());
            put_bytes(&mut b, Some(v));
        }
        put_bytes(&mut b, body);
        OpResult(b)
    }
    fn with_message(code: u8, msg: &str) -> Self {
        let mut b = vec![code];
        put_str(&mut b, msg.as_bytes());
        OpResult(b)
    }
    /// A failed operation (transport error, timeout): code 1.
    pub fn error(msg: &str) -> Self {
        Self::with_message(codec::COMPLETION_ERROR, msg)
    }
    /// An operation refused by policy (not on the allow list): code 3.
    pub fn refused(msg: &str) -> Self {
        Self::with_message(codec::COMPLETION_REFUSED, msg)
    }
}

/// Runs `process` on `record` the way the host would (without its allow
/// list). Operations are performed for real, one after the other in the
/// order they were started: timers sleep, and HTTP requests to `http://`
/// URLs go out over a plain HTTP/1.1 connection (point them at a local test
/// server; `https` completes with an error). To answer operations from the
/// test instead, use [`run_with`].
pub fn run<F>(process: F, record: &TestRecord) -> RunResult
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
{
    run_with(process, record, perform)
}

/// Performs an operation as [`run`] does.
pub fn perform(op: &Operation) -> OpResult {
    match op {
        Operation::Timer(d) => {
            std::thread::sleep(*d);
            OpResult::done()
        }
        Operation::Http {
            method,
            url,
            headers,
            body,
            timeout,
        } => {
            match http_do(
                method,
                url,
                headers,
                body.as_deref(),
                timeout.unwrap_or(Duration::from_secs(10)),
            ) {
                Ok(r) => r,
                Err(e) => OpResult::error(&format!("http: {}", e)),
            }
        }
    }
}

/// A minimal HTTP/1.1 client (one request per connection), enough for
/// tests against a local server.
fn http_do(
    method: &str,
    url: &str,
    headers: &[OwnedHeader],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<OpResult, String> {
    use std::io::{Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{}: only http:// URLs are performed on the host", url))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{}:80", authority)
    };
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut c = TcpStream::connect_timeout(&sock, timeout).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let method = if method.is_empty() { "GET" } else { method };
    let mut req = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        method, path, authority
    )
    .into_bytes();
    for h in headers {
        req.extend_from_slice(&h.key);
        req.extend_from_slice(b": ");
        req.extend_from_slice(h.value.as_deref().unwrap_or_default());
        req.extend_from_slice(b"\r\n");
    }
    if let Some(b) = body {
        req.extend_from_slice(format!("Content-Length: {}\r\n", b.len()).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body.unwrap_or_default());
    c.write_all(&req).map_err(|e| e.to_string())?;
    let mut resp = Vec::new();
    c.read_to_end(&mut resp).map_err(|e| e.to_string())?;
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed response")?;
    let head = String::from_utf8_lossy(&resp[..end]).into_owned();
    let mut raw = resp[end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: i32 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("malformed status line")?;
    let mut hs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let k = canonical(k.trim());
            let v = v.trim();
            if k == "Transfer-Encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
                continue;
            }
            hs.push((k, v.as_bytes().to_vec()));
        }
    }
    if chunked {
        raw = dechunk(&raw).ok_or("malformed chunked body")?;
    }
    let hs: Vec<(&str, &[u8])> = hs.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    Ok(OpResult::http(status, &hs, Some(&raw)))
}

/// Go's textproto.CanonicalMIMEHeaderKey, for ASCII names.
fn canonical(k: &str) -> String {
    let mut up = true;
    k.chars()
        .map(|c| {
            let o = if up {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            up = c == '-';
            o
        })
        .collect()
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let i = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..i]).ok()?.split(';').next()?.trim();
        let n = usize::from_str_radix(size, 16).ok()?;
        b = &b[i + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n + 2..)?;
    }
}

/// Runs `process` on `record`, completing each operation it starts, one
/// after the other in the order they were started, with what `perform`
/// returns. State operations (`state_get_async`, `state_scan_async`) never
/// reach `perform`: the simulated state answers them, as read when they
/// started.
pub fn run_with<F, P>(process: F, record: &TestRecord, mut perform: P) -> RunResult
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
    P: FnMut(&Operation) -> OpResult,
{
    let enc = record.encode();
    let len = enc.len() as u32;
    let handle = sim::begin(enc);
    let mut st = rt::on_record(handle, len, &process);
    while st == Status::Pending as i32 {
        let (id, kind, req, read) = match sim::next_op() {
            Some(op) => op,
            None => break,
        };
        if !rt::outstanding(handle, id) {
            continue;
        }
        let res = match read {
            // A state operation: the simulated host read it at start.
            Some(r) => r,
            None => {
                perform(&decode_op(kind, &req).expect("the simulated host checked the request")).0
            }
        };
        let n = res.len() as u32;
        sim::set_result(id, res);
        st = rt::on_complete(handle, id, n);
    }
    rt::reset();
    sim::end_state(st == Status::Ok as i32);
    let (outputs, error) = sim::end();
    run_result(st, outputs, error)
}

/// The RunResult of a record that ended with status st.
fn run_result(st: i32, outputs: Vec<OwnedOutput>, error: Option<String>) -> RunResult {
    let status = match st {
        0 => Status::Ok,
        1 => Status::Pending,
        2 => Status::Retry,
        _ => Status::Fail,
    };
    if status == Status::Ok {
        RunResult {
            status,
            outputs,
            error: None,
        }
    } else {
        RunResult {
            status,
            outputs: Vec::new(),
            error: Some(error.unwrap_or_default()),
        }
    }
}

/// Runs `process` on `records` in one batch call (`wasmstream_on_batch_v1`,
/// ABI.md §10) over the simulated host, which ends each record with the
/// status and output list `record_next` hands it, checking the list as the
/// host does. A record that goes pending is reported pending (its
/// operations are not performed).
#[cfg(test)]
pub(crate) fn run_batch<F>(process: F, records: &[TestRecord]) -> Vec<RunResult>
where
    F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
{
    let recs: Vec<Vec<u8>> = records.iter().map(|r| r.encode()).collect();
    let max_len = recs.iter().map(|r| r.len()).max().unwrap_or(0) as u32;
    let n = recs.len() as u32;
    let first = sim::batch_begin(recs);
    let ret = rt::on_batch(first, n, max_len, &process);
    rt::reset();
    assert_eq!(ret, 0, "the guest returned during a record");
    sim::batch_end()
}

fn decode_op(kind: i32, req: &[u8]) -> Result<Operation, codec::DecodeError> {
    if kind == crate::OP_TIMER {
        let mut d = Decoder::new(req, "timer request");
        let ns = d.u64()?;
        d.finish()?;
        return Ok(Operation::Timer(Duration::from_nanos(ns)));
    }
    let mut d = Decoder::new(req, "http request");
    let method = d.str()?.to_string();
    let url = d.str()?.to_string();
    let headers = d.headers()?.iter().map(own).collect();
    let body = d.bytes()?.map(|b| b.to_vec());
    let ms = d.u32()?;
    d.finish()?;
    Ok(Operation::Http {
        method,
        url,
        headers,
        body,
        timeout: if ms == 0 {
            None
        } else {
            Some(Duration::from_millis(ms as u64))
        },
    })
}

/// Forgets every state key (of this thread: each test has its own state),
/// and undoes [`set_foreign_state_prefix`] and [`set_state_enabled`].
/// On the host (`cargo test`), the state is an in-memory map where every
/// key is taken to be in the record's partition: [`run`] applies a record's
/// writes when it succeeds and discards them otherwise, as the wasmstream
/// host does.
pub fn reset_state() {
    sim::reset_state()
}

/// A copy of the committed state, in key order.
pub fn state_snapshot() -> Vec<(Vec<u8>, Vec<u8>)> {
    sim::state_snapshot()
}

/// The value bound the simulated state enforces (`state.max_value_bytes`,
/// 64 KiB by default), for this thread.
pub fn set_max_state_value_bytes(n: usize) {
    sim::set_max_value(n)
}

/// Makes the keys that start with `prefix` belong to another partition, for
/// this thread: the simulated host answers [`crate::Errno::WRONG_KEY`] for
/// them (`state_get`, `state_put`, `state_delete` and the state get
/// operation), as the host does for a key the input's partitioner sends
/// elsewhere. An empty prefix: every key is the record's partition's (the
/// default).
pub fn set_foreign_state_prefix(prefix: &[u8]) {
    sim::set_foreign(prefix)
}

/// Whether the simulated pipeline has state (for this thread; the default
/// is true). Without it, every state call and state operation answers
/// [`crate::Errno::NO_STATE`].
pub fn set_state_enabled(on: bool) {
    sim::set_enabled(on)
}

/// The in-memory schema registry of the host side (thread-local, as the
/// state): schemas by id (id i at i-1), and each subject's ids by version
/// (version 1 first).
#[derive(Default)]
struct TestSchemas {
    by_id: Vec<crate::Schema>,
    subjects: std::collections::HashMap<String, Vec<i32>>,
}

thread_local! {
    static TEST_SCHEMAS: std::cell::RefCell<TestSchemas> = std::cell::RefCell::new(TestSchemas::default());
}

/// Adds `s` to `subject` of the host side's schema registry (this
/// thread's) as its next version, as a registration would, and returns its
/// id and version: a schema of the same type and text keeps the id it has
/// under any subject, and one the subject holds already keeps its version.
/// On the host side the schema operations ([`crate::schema_by_id`],
/// [`crate::schema_by_subject`], [`crate::register_schema`]) read it: there
/// is no pipeline config there, so every operation is granted.
pub fn add_test_schema(subject: &str, s: &crate::Schema) -> (i32, i32) {
    TEST_SCHEMAS.with(|t| {
        let mut t = t.borrow_mut();
        let id = match t
            .by_id
            .iter()
            .position(|o| o.schema_type == s.schema_type && o.schema == s.schema)
        {
            Some(i) => i as i32 + 1,
            None => {
                t.by_id.push(s.clone());
                t.by_id.len() as i32
            }
        };
        let versions = t.subjects.entry(subject.to_string()).or_default();
        if let Some(i) = versions.iter().position(|&v| v == id) {
            return (id, i as i32 + 1);
        }
        versions.push(id);
        (id, versions.len() as i32)
    })
}

/// Empties the host side's schema registry (this thread's).
pub fn reset_test_schemas() {
    TEST_SCHEMAS.with(|t| *t.borrow_mut() = TestSchemas::default())
}

/// Answers a schema operation at async_start from the test registry: its
/// result, or the errno async_start would.
fn start_schema_op(kind: i32, req: &[u8]) -> Result<Vec<u8>, i32> {
    let not_found = |what: String| {
        OpResult::refused(&format!(
            "schema registry: {}: not found (the test registry: add_test_schema)",
            what
        ))
        .0
    };
    let mut out = vec![codec::COMPLETION_OK];
    let mut d = Decoder::new(req, "schema request");
    match kind {
        crate::OP_SCHEMA_BY_ID => {
            let id = d.u32().map_err(|_| -3)? as i32;
            d.finish().map_err(|_| -3)?;
            TEST_SCHEMAS.with(|t| {
                let t = t.borrow();
                match t.by_id.get((id as usize).wrapping_sub(1)) {
                    Some(s) if id >= 1 => {
                        crate::schema::append_schema(&mut out, s);
                        Ok(out)
                    }
                    _ => Ok(not_found(format!("schema id {}", id))),
                }
            })
        }
        crate::OP_SCHEMA_BY_SUBJECT => {
            let subject = d.str().map_err(|_| -3)?.to_string();
            let mut version = d.u32().map_err(|_| -3)? as i32;
            d.finish().map_err(|_| -3)?;
            TEST_SCHEMAS.with(|t| {
                let t = t.borrow();
                let versions = t.subjects.get(&subject).map_or(&[][..], |v| &v[..]);
                if version == crate::SCHEMA_LATEST {
                    version = versions.len() as i32;
                }
                if version < 1 || version as usize > versions.len() {
                    return Ok(not_found(format!(
                        "subject {:?} version {}",
                        subject, version
                    )));
                }
                let id = versions[version as usize - 1];
                let ss = crate::SubjectSchema {
                    id,
                    version,
                    schema: t.by_id[id as usize - 1].clone(),
                };
                crate::schema::append_subject_schema(&mut out, &ss);
                Ok(out)
            })
        }
        _ => {
            let subject = d.str().map_err(|_| -3)?.to_string();
            let s = crate::schema::decode_schema(&d.b[d.off..]).map_err(|_| -3)?;
            let (id, version) = add_test_schema(&subject, &s);
            crate::schema::append_registered(&mut out, id, version);
            Ok(out)
        }
    }
}

/// The simulated host functions (thread-local: tests run in parallel).
pub(crate) mod sim {
    use super::*;
    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Default)]
    struct Sim {
        handle: u32,
        record: Vec<u8>,
        outputs: Vec<OwnedOutput>,
        error: Option<String>,
        next_op: u32,
        /// Operations started: id, kind, request, and a state
        /// operation's result (read at start, as the record's writes then).
        queued: VecDeque<(u32, i32, Vec<u8>, Option<Vec<u8>>)>,
        result: Option<(u32, Vec<u8>)>,
        out_buf: Vec<u8>,
        /// The batch call in progress (run_batch).
        batch: Option<Batch>,
        /// The emit calls so far (tests of the output list).
        emits: usize,
    }

    /// A batch call: the records' encodings, how many were begun, whether
    /// one is in progress, and the results of those that ended.
    #[derive(Default)]
    struct Batch {
        recs: Vec<Vec<u8>>,
        next: usize,
        cur: bool,
        results: Vec<RunResult>,
    }

    /// The simulated state: committed values, and the running record's
    /// writes (`None`: a delete).
    struct State {
        committed: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
        pending: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        max_value: usize,
        /// Keys of another partition (empty: none).
        foreign: Vec<u8>,
        disabled: bool,
        /// Two-part keys, stream time and timers (ABI.md §4.2).
        ev: Event,
    }

    /// The simulated partition's event time (ABI.md §4.2): its two-part
    /// state, timers and stream time, with the call in progress's writes
    /// held until it ends. `windowtest::Partition` owns one and swaps it in
    /// for its calls.
    pub(crate) struct Event {
        pub(crate) state: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
        pending: BTreeMap<(Vec<u8>, Vec<u8>), Option<Vec<u8>>>,
        /// Set timers, in (at, key) order: the firing order.
        pub(crate) timers: BTreeSet<(i64, Vec<u8>)>,
        /// The call's timers: true set, false deleted.
        pending_timers: BTreeMap<(i64, Vec<u8>), bool>,
        pub(crate) stream_time: i64,
        /// The at of the firing in progress: a firing cannot set a timer
        /// at or before it.
        pub(crate) firing_at: Option<i64>,
        /// The call's writes (two-part state and timers), bounded by
        /// max_writes as limits.max_outputs bounds them on the host.
        writes: usize,
        pub(crate) max_writes: usize,
    }

    impl Event {
        pub(crate) fn new() -> Event {
            Event {
                state: BTreeMap::new(),
                pending: BTreeMap::new(),
                timers: BTreeSet::new(),
                pending_timers: BTreeMap::new(),
                stream_time: -1,
                firing_at: None,
                writes: 0,
                max_writes: 10_000,
            }
        }
    }

    thread_local! {
        static SIM: RefCell<Sim> = RefCell::new(Sim::default());
        static STATE: RefCell<State> = RefCell::new(State { committed: Default::default(), pending: Default::default(), max_value: 64 << 10, foreign: Vec::new(), disabled: false, ev: Event::new() });
    }

    /// Marks a timer firing at `at` in progress (None: a record's call).
    pub(crate) fn set_firing(at: Option<i64>) {
        with_state(|s| s.ev.firing_at = at)
    }

    /// Swaps ev with the thread's event time (windowtest::Partition).
    pub(crate) fn swap_event(ev: &mut Event) {
        with_state(|s| std::mem::swap(&mut s.ev, ev))
    }

    fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
        STATE.with(|s| f(&mut s.borrow_mut()))
    }

    pub(crate) fn reset_state() {
        with_state(|s| {
            s.committed.clear();
            s.pending.clear();
            s.ev = Event::new();
            s.foreign.clear();
            s.disabled = false;
        })
    }

    pub(crate) fn set_foreign(prefix: &[u8]) {
        with_state(|s| s.foreign = prefix.to_vec())
    }

    pub(crate) fn set_enabled(on: bool) {
        with_state(|s| s.disabled = !on)
    }

    /// The errno the host answers for a key before reading or writing it
    /// (0: none): no state, too large, another partition's.
    fn refuse(key: &[u8]) -> i32 {
        with_state(|s| {
            if s.disabled {
                -11
            } else if key.len() > MAX_KEY {
                -9
            } else if !s.foreign.is_empty() && key.starts_with(&s.foreign) {
                -10
            } else {
                0
            }
        })
    }

    pub(crate) fn set_max_value(n: usize) {
        with_state(|s| s.max_value = n)
    }

    pub(crate) fn state_snapshot() -> Vec<(Vec<u8>, Vec<u8>)> {
        with_state(|s| {
            s.committed
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }

    pub(crate) fn end_state(ok: bool) {
        with_state(|s| {
            let pending = std::mem::take(&mut s.pending);
            let pending2 = std::mem::take(&mut s.ev.pending);
            let timers = std::mem::take(&mut s.ev.pending_timers);
            s.ev.writes = 0;
            if !ok {
                return;
            }
            for (k, v) in pending {
                match v {
                    Some(v) => s.committed.insert(k, v),
                    None => s.committed.remove(&k),
                };
            }
            for (k, v) in pending2 {
                match v {
                    Some(v) => s.ev.state.insert(k, v),
                    None => s.ev.state.remove(&k),
                };
            }
            for (t, set) in timers {
                if set {
                    s.ev.timers.insert(t);
                } else {
                    s.ev.timers.remove(&t);
                }
            }
        })
    }

    // ---- event time (ABI.md §4.2) ----

    /// The errno for a two-part key before reading or writing it (0:
    /// none): the key as a one-part key's, the sub bounded alone.
    fn refuse2(key: &[u8], sub: &[u8]) -> i32 {
        match refuse(key) {
            0 if sub.len() > MAX_KEY => -9,
            e => e,
        }
    }

    /// Applies a write of the call, counted: -5 (and not applied) past
    /// max_writes, else 0.
    fn write2<R>(apply: impl FnOnce(&mut Event) -> R) -> i32 {
        with_state(|s| {
            if s.ev.writes >= s.ev.max_writes {
                return -5;
            }
            s.ev.writes += 1;
            apply(&mut s.ev);
            0
        })
    }

    fn lookup2(ev: &Event, key: &[u8], sub: &[u8]) -> Option<Vec<u8>> {
        let k = (key.to_vec(), sub.to_vec());
        match ev.pending.get(&k) {
            Some(v) => v.clone(),
            None => ev.state.get(&k).cloned(),
        }
    }

    pub fn state_get2(handle: u32, key: &[u8], sub: &[u8], buf: &mut [u8]) -> i32 {
        match admit(handle, || refuse2(key, sub)) {
            0 => with_state(|s| answer_value(lookup2(&s.ev, key, sub), buf)),
            e => e,
        }
    }

    pub fn state_put2(handle: u32, key: &[u8], sub: &[u8], val: &[u8]) -> i32 {
        let e = admit(handle, || refuse2(key, sub));
        if e != 0 {
            return e;
        }
        if with_state(|s| val.len() > s.max_value) {
            return -9;
        }
        write2(|ev| {
            ev.pending
                .insert((key.to_vec(), sub.to_vec()), Some(val.to_vec()))
        })
    }

    pub fn state_delete2(handle: u32, key: &[u8], sub: &[u8]) -> i32 {
        match admit(handle, || refuse2(key, sub)) {
            0 => write2(|ev| ev.pending.insert((key.to_vec(), sub.to_vec()), None)),
            e => e,
        }
    }

    /// As state_scan, over the subs of key.
    pub fn state_scan2(
        handle: u32,
        key: &[u8],
        prefix: &[u8],
        after: &[u8],
        buf: &mut [u8],
    ) -> i32 {
        let e = admit(handle, || refuse2(key, prefix));
        if e != 0 {
            return e;
        }
        if after.len() > MAX_KEY {
            return -9;
        }
        with_state(|s| {
            let ev = &s.ev;
            let subs = ev
                .state
                .keys()
                .chain(ev.pending.keys())
                .filter(|(k, sub)| k.as_slice() == key && listed(sub, prefix, after))
                .map(|(_, sub)| sub);
            fill_batch(subs, |sub| lookup2(ev, key, sub), buf)
        })
    }

    pub fn stream_time(handle: u32, out: &mut [u8; 8]) -> i32 {
        match admit(handle, enabled) {
            0 => with_state(|s| {
                *out = s.ev.stream_time.to_le_bytes();
                0
            }),
            e => e,
        }
    }

    fn timer_write(handle: u32, key: &[u8], at: i64, set: bool) -> i32 {
        let e = admit(handle, || refuse(key));
        if e != 0 {
            return e;
        }
        if set && with_state(|s| s.ev.firing_at.map_or(false, |f| at <= f)) {
            return -5; // a firing cannot set its own instant or an earlier one
        }
        write2(|ev| ev.pending_timers.insert((at, key.to_vec()), set))
    }

    pub fn timer_set(handle: u32, key: &[u8], at: i64) -> i32 {
        timer_write(handle, key, at, true)
    }

    pub fn timer_delete(handle: u32, key: &[u8], at: i64) -> i32 {
        timer_write(handle, key, at, false)
    }

    const MAX_KEY: usize = crate::MAX_STATE_KEY_BYTES;

    /// Where a scan batch may end, as the host decides (ABI.md §4.1): after
    /// at least one entry, and never after the empty key alone (its cursor,
    /// the empty key, would start the scan over).
    #[derive(Default)]
    struct BatchCut {
        entries: usize,
        only_empty: bool,
    }

    impl BatchCut {
        fn add(&mut self, key: &[u8]) {
            self.entries += 1;
            self.only_empty = self.entries == 1 && key.is_empty();
        }

        fn may_end(&self) -> bool {
            self.entries > 0 && !self.only_empty
        }
    }

    fn lookup(s: &State, key: &[u8]) -> Option<Vec<u8>> {
        match s.pending.get(key) {
            Some(v) => v.clone(),
            None => s.committed.get(key).cloned(),
        }
    }

    /// The errno of a call on handle: -1 for a handle not the call's,
    /// else e's (0: none).
    fn admit(handle: u32, e: impl FnOnce() -> i32) -> i32 {
        if !with(|s| valid(s, handle)) {
            return -1;
        }
        e()
    }

    /// The host's answer to a get of a value v: -8 for none, else its
    /// size, the value copied into buf when it fits.
    fn answer_value(v: Option<Vec<u8>>, buf: &mut [u8]) -> i32 {
        match v {
            None => -8,
            Some(v) => {
                if v.len() <= buf.len() {
                    buf[..v.len()].copy_from_slice(&v);
                }
                v.len() as i32
            }
        }
    }

    /// The errno of a call that needs state (0: none): -11 without it.
    fn enabled() -> i32 {
        with_state(|s| if s.disabled { -11 } else { 0 })
    }

    /// Whether a scan with prefix after the cursor after lists name.
    fn listed(name: &[u8], prefix: &[u8], after: &[u8]) -> bool {
        name.starts_with(prefix) && (after.is_empty() || name > after)
    }

    /// As the host fills a scan's buffer (ABI.md §4.1): the names in
    /// order, each once, with their values (one without a value is
    /// skipped), as many whole entries as fit; their size, or -2 when the
    /// batch cannot end where buf does.
    fn fill_batch<'a>(
        names: impl Iterator<Item = &'a Vec<u8>>,
        value: impl Fn(&[u8]) -> Option<Vec<u8>>,
        buf: &mut [u8],
    ) -> i32 {
        let mut names: Vec<&Vec<u8>> = names.collect();
        names.sort();
        names.dedup();
        let mut n = 0usize;
        let mut cut = BatchCut::default();
        for k in names {
            let v = match value(k) {
                Some(v) => v,
                None => continue,
            };
            let size = 8 + k.len() + v.len();
            if n + size > buf.len() {
                if !cut.may_end() {
                    return -2;
                }
                break;
            }
            cut.add(k);
            buf[n..n + 4].copy_from_slice(&(k.len() as u32).to_le_bytes());
            buf[n + 4..n + 4 + k.len()].copy_from_slice(k);
            let m = n + 4 + k.len();
            buf[m..m + 4].copy_from_slice(&(v.len() as u32).to_le_bytes());
            buf[m + 4..m + 4 + v.len()].copy_from_slice(&v);
            n += size;
        }
        n as i32
    }

    pub fn state_get(handle: u32, key: &[u8], buf: &mut [u8]) -> i32 {
        match admit(handle, || refuse(key)) {
            0 => with_state(|s| answer_value(lookup(s, key), buf)),
            e => e,
        }
    }

    pub fn state_put(handle: u32, key: &[u8], val: &[u8]) -> i32 {
        match admit(handle, || refuse(key)) {
            0 => with_state(|s| {
                if val.len() > s.max_value {
                    return -9;
                }
                s.pending.insert(key.to_vec(), Some(val.to_vec()));
                0
            }),
            e => e,
        }
    }

    pub fn state_delete(handle: u32, key: &[u8]) -> i32 {
        match admit(handle, || refuse(key)) {
            0 => with_state(|s| {
                s.pending.insert(key.to_vec(), None);
                0
            }),
            e => e,
        }
    }

    /// As the host: whole entries after `after`, as many as fit.
    pub fn state_scan(handle: u32, prefix: &[u8], after: &[u8], buf: &mut [u8]) -> i32 {
        let e = admit(handle, enabled);
        if e != 0 {
            return e;
        }
        if prefix.len() > MAX_KEY || after.len() > MAX_KEY {
            return -9;
        }
        with_state(|s| {
            let s: &State = s;
            let keys = s
                .committed
                .keys()
                .chain(s.pending.keys())
                .filter(|k| listed(k, prefix, after));
            fill_batch(keys, |k| lookup(s, k), buf)
        })
    }

    fn with<R>(f: impl FnOnce(&mut Sim) -> R) -> R {
        SIM.with(|s| f(&mut s.borrow_mut()))
    }

    pub(crate) fn begin(record: Vec<u8>) -> u32 {
        with(|s| {
            s.handle = s.handle.wrapping_add(1).max(1);
            s.record = record;
            s.outputs.clear();
            s.error = None;
            s.queued.clear();
            s.result = None;
            s.handle
        })
    }

    pub(crate) fn next_op() -> Option<(u32, i32, Vec<u8>, Option<Vec<u8>>)> {
        with(|s| s.queued.pop_front())
    }

    pub(crate) fn set_result(op: u32, r: Vec<u8>) {
        with(|s| s.result = Some((op, r)))
    }

    pub(crate) fn end() -> (Vec<OwnedOutput>, Option<String>) {
        with(|s| {
            s.queued.clear();
            s.result = None;
            s.record.clear();
            (std::mem::take(&mut s.outputs), s.error.take())
        })
    }

    #[cfg(test)]
    pub(crate) fn batch_begin(recs: Vec<Vec<u8>>) -> u32 {
        with(|s| {
            s.batch = Some(Batch {
                recs,
                ..Batch::default()
            });
            s.handle.wrapping_add(1).max(1)
        })
    }

    /// The emit calls the simulated host has had.
    #[cfg(test)]
    pub(crate) fn emit_calls() -> usize {
        with(|s| s.emits)
    }

    #[cfg(test)]
    pub(crate) fn batch_end() -> Vec<RunResult> {
        let b = with(|s| s.batch.take()).expect("a batch call");
        assert!(!b.cur, "a record in progress");
        b.results
    }

    /// `record_next` (ABI.md §10) of a batch call of run_batch.
    pub fn record_next(status: i32, out: &[u8], buf: *mut u8, buf_len: u32) -> i32 {
        let (cur, handle) = match with(|s| s.batch.as_ref().map(|b| (b.cur, s.handle))) {
            None => return -1,
            Some(c) => c,
        };
        if cur {
            let mut st = status;
            if st == 0 || st == 1 {
                // The output list, checked as the host checks it.
                let mut rest = out;
                let mut i = 0;
                while !rest.is_empty() {
                    let n = if rest.len() < 4 {
                        usize::MAX
                    } else {
                        u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize
                    };
                    let rc = if n > rest.len().saturating_sub(4) {
                        -3
                    } else {
                        hold(handle, &rest[4..4 + n])
                    };
                    if rc < 0 {
                        with(|s| s.outputs.clear());
                        set_error(
                            handle,
                            &format!("output {} handed to record_next refused: errno {}", i, -rc),
                        );
                        st = 3;
                        break;
                    }
                    rest = &rest[4 + n..];
                    i += 1;
                }
            }
            end_state(st == 0);
            let (outputs, error) = end();
            let res = run_result(st, outputs, error);
            with(|s| {
                if let Some(b) = s.batch.as_mut() {
                    b.results.push(res);
                }
            });
        }
        let enc = with(|s| {
            let b = s.batch.as_mut()?;
            b.cur = b.next < b.recs.len();
            if !b.cur {
                return None;
            }
            b.next += 1;
            Some(std::mem::take(&mut b.recs[b.next - 1]))
        });
        let enc = match enc {
            None => return 0,
            Some(e) => e,
        };
        let n = enc.len();
        if n <= buf_len as usize {
            unsafe { std::ptr::copy_nonoverlapping(enc.as_ptr(), buf, n) };
        }
        begin(enc);
        n as i32
    }

    fn valid(s: &Sim, handle: u32) -> bool {
        handle != 0 && handle == s.handle
    }

    pub fn record_read(handle: u32, buf: *mut u8, len: u32) -> i32 {
        with(|s| {
            if !valid(s, handle) {
                return -1;
            }
            if (len as usize) < s.record.len() {
                return -2;
            }
            unsafe { std::ptr::copy_nonoverlapping(s.record.as_ptr(), buf, s.record.len()) };
            s.record.len() as i32
        })
    }

    pub fn with_out_buf<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut b = with(|s| std::mem::take(&mut s.out_buf));
        let r = f(&mut b);
        with(|s| s.out_buf = b);
        r
    }

    pub fn emit(handle: u32, b: &[u8]) -> i32 {
        with(|s| s.emits += 1);
        hold(handle, b)
    }

    /// Holds the output b for the record handle, as emit.
    fn hold(handle: u32, b: &[u8]) -> i32 {
        with(|s| {
            if !valid(s, handle) {
                return -1;
            }
            match codec::decode_output(b) {
                Err(_) => -3,
                Ok(o) => {
                    s.outputs.push(OwnedOutput {
                        topic: o.topic.to_string(),
                        partition: o.partition,
                        key: o.key.map(|k| k.to_vec()),
                        value: o.value.map(|v| v.to_vec()),
                        headers: o.headers.iter().map(own).collect(),
                    });
                    0
                }
            }
        })
    }

    pub fn set_error(handle: u32, msg: &str) {
        with(|s| {
            if valid(s, handle) {
                let mut end = msg.len().min(4096);
                while !msg.is_char_boundary(end) {
                    end -= 1;
                }
                s.error = Some(msg[..end].to_string());
            }
        })
    }

    pub fn log(level: i32, msg: &str) {
        eprintln!("guest log [{}]: {}", level, msg);
    }

    pub fn async_start(handle: u32, kind: i32, req: &[u8]) -> i32 {
        with(|s| {
            if !valid(s, handle) {
                return -1;
            }
            let read = match kind {
                crate::OP_TIMER | crate::OP_HTTP => {
                    if decode_op(kind, req).is_err() {
                        return -3;
                    }
                    None
                }
                crate::OP_STATE_GET | crate::OP_STATE_SCAN => match start_state_op(kind, req) {
                    Ok(r) => Some(r),
                    Err(e) => return e,
                },
                crate::OP_SCHEMA_BY_ID
                | crate::OP_SCHEMA_BY_SUBJECT
                | crate::OP_SCHEMA_REGISTER => match super::start_schema_op(kind, req) {
                    Ok(r) => Some(r),
                    Err(e) => return e,
                },
                _ => return -6,
            };
            s.next_op = s.next_op.wrapping_add(1).max(1);
            s.queued.push_back((s.next_op, kind, req.to_vec(), read));
            s.next_op as i32
        })
    }

    /// A state operation, checked and read at async_start as the host
    /// checks it then: the simulated state does not change while a record
    /// runs, so reading it now is reading it when the host would (the
    /// record's writes so far over the committed state). The result, or
    /// the errno async_start answers.
    fn start_state_op(kind: i32, req: &[u8]) -> Result<Vec<u8>, i32> {
        let mut out = vec![codec::COMPLETION_OK];
        if kind == crate::OP_STATE_GET {
            let mut d = Decoder::new(req, "state get request");
            let key = d.str_bytes().map_err(|_| -3)?;
            d.finish().map_err(|_| -3)?;
            let e = refuse(key);
            if e != 0 {
                return Err(e);
            }
            put_bytes(&mut out, with_state(|s| lookup(s, key)).as_deref());
            return Ok(out);
        }
        let mut d = Decoder::new(req, "state scan request");
        let prefix = d.str_bytes().map_err(|_| -3)?;
        let after = d.str_bytes().map_err(|_| -3)?;
        let max = d.u32().map_err(|_| -3)? as usize;
        d.finish().map_err(|_| -3)?;
        if with_state(|s| s.disabled) {
            return Err(-11);
        }
        if prefix.len() > MAX_KEY || after.len() > MAX_KEY {
            return Err(-9);
        }
        let limit = match max {
            0 => crate::STATE_SCAN_DEFAULT_BYTES,
            n => n.min(crate::STATE_SCAN_MAX_BYTES),
        };
        with_state(|s| {
            let s: &State = s;
            let mut keys: Vec<&Vec<u8>> = s
                .committed
                .keys()
                .chain(s.pending.keys())
                .filter(|k| k.starts_with(prefix) && (after.is_empty() || k.as_slice() > after))
                .collect();
            keys.sort();
            keys.dedup();
            let mut cut = BatchCut::default();
            for k in keys {
                let v = match lookup(s, k) {
                    Some(v) => v,
                    None => continue,
                };
                // As many whole entries as fit, at least one.
                if cut.may_end() && out.len() - 1 + 8 + k.len() + v.len() > limit {
                    break;
                }
                cut.add(k);
                put_str(&mut out, k);
                put_str(&mut out, &v);
            }
        });
        Ok(out)
    }

    pub fn result_read(op: u32, buf: *mut u8, len: u32) -> i32 {
        with(|s| match &s.result {
            Some((id, r)) if *id == op => {
                if (len as usize) < r.len() {
                    return -2;
                }
                unsafe { std::ptr::copy_nonoverlapping(r.as_ptr(), buf, r.len()) };
                r.len() as i32
            }
            _ => -7,
        })
    }
}
