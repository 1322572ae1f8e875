//! Event-time windows: tumbling, hopping and session windows with a grace period,
//! emitting one final result per window when it closes (Kafka Streams'
//! `EmitStrategy.onWindowClose()`), over the ABI's two-part state keys,
//! stream time and event-time timers (ABI.md §4.2). The Go SDK's package
//! `window` does the same, with the same boundaries and state layout.
//!
//! The boundaries are Kafka Streams':
//!
//! - A window is `[start, start + size)`, its start a multiple of `advance`
//!   from the epoch (`TimeWindows.windowsFor`): a record at exactly a
//!   window's end belongs to the next window, not to it.
//! - A window is open while `end + grace > stream time`, the stream time
//!   counting the record being added (`KStreamWindowAggregate`); it closes,
//!   and its final result is emitted, once stream time reaches
//!   `end + grace`.
//! - Session windows are `[start, end]`, both inclusive: a record at ts
//!   joins (and merges) every session of its key with `end >= ts - gap` and
//!   `start <= ts + gap`; a session closes once stream time passes
//!   `end + gap + grace` ([`SessionWindows`]).
//! - Stream time is the partition's (ABI.md §4.2), so, as in Kafka Streams,
//!   one key's records close the windows of every key of the partition.
//!
//! A record none of whose windows is open any more is late: it is counted
//! ([`Stats`]) and, when the windows have a `late_topic`, emitted there
//! unchanged with the header `window.late`; otherwise it is dropped. A
//! record with a negative timestamp fails terminally (it has no window).
//!
//! Each window is one state entry, `(record key, name | 0 | start)` →
//! aggregate, and each open window one timer, `(record key, end + grace)`:
//! the timer's firing emits the window's result and deletes the entry, so a
//! closed window leaves no state behind and `state.max_bytes` bounds the
//! open ones. A processor registers the record and timer functions with
//! [`crate::processor!`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use wasmstream::window::{self, Abi, Options, TimeWindows};
//! use wasmstream::{Emitter, Error, Record, Timer};
//!
//! thread_local! {
//!     static PER_MINUTE: TimeWindows = window::tumbling(Duration::from_secs(60), Options {
//!         name: "clicks".into(),
//!         grace: Duration::from_secs(10),
//!         ..Options::default()
//!     }).unwrap();
//! }
//!
//! fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
//!     PER_MINUTE.with(|w| w.add(&mut Abi, r, out))
//! }
//!
//! fn on_timer(t: &Timer, out: &mut Emitter) -> Result<(), Error> {
//!     PER_MINUTE.with(|w| w.fire(&mut Abi, t.key, t.at, out))
//! }
//!
//! wasmstream::processor!(process, timer: on_timer);
//! ```
//!
//! On the host (`cargo test`), [`crate::windowtest::Partition`] runs them
//! over an in-memory partition that keeps the firing rule.

use crate::{Emitter, Errno, Error, Header, Output, Record};

mod session;
pub use session::{sessions, SessionWindows};
use std::cell::Cell;
use std::time::Duration;

/// The ABI calls windows run over (ABI.md §4.2), for the call in progress
/// (a record's or a timer firing's). `key` must be the partition's (the
/// record key is); `sub` is free.
pub trait Host {
    /// The partition's stream time (milliseconds), -1 before any record;
    /// it does not count the record in progress.
    fn stream_time(&mut self) -> Result<i64, Errno>;
    /// `(key, sub)`'s value, `None` when it has none.
    fn get(&mut self, key: &[u8], sub: &[u8]) -> Result<Option<Vec<u8>>, Errno>;
    fn put(&mut self, key: &[u8], sub: &[u8], value: &[u8]) -> Result<(), Errno>;
    fn delete(&mut self, key: &[u8], sub: &[u8]) -> Result<(), Errno>;
    /// Calls `f` with each sub of `key` starting with `prefix` and its
    /// value, in sub order, until `f` returns false.
    fn scan(
        &mut self,
        key: &[u8],
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Errno>;
    /// Sets the timer `(key, at)`; setting it again is one timer.
    fn set_timer(&mut self, key: &[u8], at: i64) -> Result<(), Errno>;
    /// Removes the timer `(key, at)`, if set.
    fn delete_timer(&mut self, key: &[u8], at: i64) -> Result<(), Errno>;
}

/// The host's functions, for the call in progress: [`crate::state_get2`],
/// [`crate::stream_time`], [`crate::timer_set`] and the rest.
#[derive(Debug, Clone, Copy, Default)]
pub struct Abi;

impl Host for Abi {
    fn stream_time(&mut self) -> Result<i64, Errno> {
        crate::stream_time()
    }
    fn get(&mut self, key: &[u8], sub: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        crate::state_get2(key, sub)
    }
    fn put(&mut self, key: &[u8], sub: &[u8], value: &[u8]) -> Result<(), Errno> {
        crate::state_put2(key, sub, value)
    }
    fn delete(&mut self, key: &[u8], sub: &[u8]) -> Result<(), Errno> {
        crate::state_delete2(key, sub)
    }
    fn scan(
        &mut self,
        key: &[u8],
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Errno> {
        crate::state_scan2(key, prefix, f)
    }
    fn set_timer(&mut self, key: &[u8], at: i64) -> Result<(), Errno> {
        crate::timer_set(key, at)
    }
    fn delete_timer(&mut self, key: &[u8], at: i64) -> Result<(), Errno> {
        crate::timer_delete(key, at)
    }
}

/// Where windows emit: the call's [`Emitter`], or anything that holds
/// outputs the same way.
pub trait Emit {
    fn emit(&mut self, o: &Output<'_>) -> Result<(), Errno>;
}

impl Emit for Emitter {
    fn emit(&mut self, o: &Output<'_>) -> Result<(), Errno> {
        Emitter::emit(self, o)
    }
}

/// Folds records into a window's aggregate, kept as bytes in the state.
pub trait Aggregator {
    /// Adds a record's value (`None`: null) to `agg` (`None`: a new
    /// window's) and returns the new aggregate.
    fn add(&self, agg: Option<&[u8]>, value: Option<&[u8]>) -> Result<Vec<u8>, Error>;
    /// Combines the aggregates of two sessions a record joins (session
    /// windows only); `a` is the earlier session's. By default an
    /// aggregator cannot: it fails the record terminally.
    fn merge(&self, _a: &[u8], _b: &[u8]) -> Result<Vec<u8>, Error> {
        Err(Error::terminal(
            "window: this aggregator cannot merge sessions (Aggregator::merge)",
        ))
    }
}

/// Counts records: the aggregate is a u64, 8 bytes big-endian
/// ([`decode_count`]), as the Go SDK's `window.Count`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Count;

impl Aggregator for Count {
    fn add(&self, agg: Option<&[u8]>, _value: Option<&[u8]>) -> Result<Vec<u8>, Error> {
        let n = match agg {
            None => 0,
            Some(a) => decode_count(a)?,
        };
        Ok((n + 1).to_be_bytes().to_vec())
    }
    fn merge(&self, a: &[u8], b: &[u8]) -> Result<Vec<u8>, Error> {
        Ok((decode_count(a)? + decode_count(b)?).to_be_bytes().to_vec())
    }
}

/// Reads a [`Count`] aggregate. A malformed one fails terminally: a retry
/// reads the same bytes.
pub fn decode_count(agg: &[u8]) -> Result<u64, Error> {
    match agg.len() {
        0 => Ok(0),
        8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(agg);
            Ok(u64::from_be_bytes(b))
        }
        n => Err(Error::terminal(format!(
            "window: a count is 8 bytes, not {}",
            n
        ))),
    }
}

/// A closed window's final result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowResult {
    pub key: Vec<u8>,
    /// The window's start in milliseconds; `end` is exclusive for time
    /// windows (`start + size`), inclusive for a session (its last record's
    /// timestamp).
    pub start: i64,
    pub end: i64,
    pub agg: Vec<u8>,
}

/// What this instance's windows did since it started (a gauge of the
/// instance, which the host replaces after a fault; not a durable count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Records added to at least one window.
    pub records: i64,
    /// Records in no open window (dropped, or sent to `late_topic`).
    pub late: i64,
    /// (record, window) pairs refused because the window had closed, like
    /// Kafka Streams' dropped-records metric: a hopping window's record may
    /// be too late for its earliest windows only.
    pub dropped: i64,
    /// Final results emitted.
    pub closed: i64,
}

/// A closed window's emitter, instead of the default output.
pub type OnClose = Box<dyn Fn(&WindowResult, &mut dyn Emit) -> Result<(), Error>>;

/// What every kind of window has.
pub struct Options {
    /// Tells this processor's windows apart in the state and its timers:
    /// it prefixes every window's sub key. Required; no 0 byte.
    pub name: String,
    /// How long after its end a window still takes records (whole
    /// milliseconds).
    pub grace: Duration,
    /// Aggregates records; `None` is [`Count`].
    pub agg: Option<Box<dyn Aggregator>>,
    /// The topic of the final results ("" the pipeline's output), each with
    /// the record key, the aggregate as value and the headers
    /// `window.start` and `window.end` (decimal milliseconds). `on_close`,
    /// when set, emits them instead.
    pub output: String,
    pub on_close: Option<OnClose>,
    /// When set, receives each late record (its key, value and headers, and
    /// the header `window.late` naming `name`); otherwise late records are
    /// dropped, and counted either way.
    pub late_topic: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: String::new(),
            grace: Duration::ZERO,
            agg: None,
            output: String::new(),
            on_close: None,
            late_topic: String::new(),
        }
    }
}

/// The header of a late record sent to `late_topic` (its value: the
/// windows' name), and those of a default final result.
pub const HEADER_LATE: &str = "window.late";
pub const HEADER_START: &str = "window.start";
pub const HEADER_END: &str = "window.end";

fn ms(d: Duration, what: &str) -> Result<i64, String> {
    if d.subsec_nanos() % 1_000_000 != 0 || d.as_millis() > i64::MAX as u128 {
        return Err(format!(
            "window: {} {:?}: must be a whole number of milliseconds",
            what, d
        ));
    }
    Ok(d.as_millis() as i64)
}

/// Tumbling (`advance == size`) or hopping (`advance < size`) windows of a
/// fixed size. An instance runs one call at a time (ABI.md §2), and so do
/// its windows: keep them in a `thread_local!`.
pub struct TimeWindows {
    b: Base,
    size: i64,
    advance: i64,
}

/// What every kind of window has: the options, checked, and the counts.
struct Base {
    name: String,
    grace: i64,
    /// name | 0: the sub keys' prefix.
    prefix: Vec<u8>,
    agg: Box<dyn Aggregator>,
    output: String,
    on_close: Option<OnClose>,
    late_topic: String,
    stats: Cell<Stats>,
}

impl Base {
    /// Checks opt: a name without a 0 byte, a grace of whole milliseconds.
    fn new(opt: Options) -> Result<Base, String> {
        if opt.name.is_empty() {
            return Err("window: Options.name is required".into());
        }
        if opt.name.as_bytes().contains(&0) {
            return Err(format!("window: Options.name {:?} has a 0 byte", opt.name));
        }
        let grace = ms(opt.grace, "grace")?;
        let mut prefix = opt.name.clone().into_bytes();
        prefix.push(0);
        Ok(Base {
            name: opt.name,
            grace,
            prefix,
            agg: opt.agg.unwrap_or_else(|| Box::new(Count)),
            output: opt.output,
            on_close: opt.on_close,
            late_topic: opt.late_topic,
            stats: Cell::new(Stats::default()),
        })
    }
}

/// Windows of `size`, each record in exactly one:
/// `[n·size, (n+1)·size)`.
pub fn tumbling(size: Duration, opt: Options) -> Result<TimeWindows, String> {
    hopping(size, size, opt)
}

/// Windows of `size` starting every `advance` (0 < advance <= size): a
/// record is in each window `[n·advance, n·advance + size)` that holds its
/// timestamp.
pub fn hopping(size: Duration, advance: Duration, opt: Options) -> Result<TimeWindows, String> {
    let b = Base::new(opt)?;
    let s = ms(size, "size")?;
    let a = ms(advance, "advance")?;
    if s == 0 || a == 0 || a > s {
        return Err(format!(
            "window: size {:?}, advance {:?}: need 0 < advance <= size",
            size, advance
        ));
    }
    if s.checked_add(b.grace).is_none() {
        return Err("window: size + grace overflows".into());
    }
    Ok(TimeWindows {
        b,
        size: s,
        advance: a,
    })
}

/// A window start in a sub key: big endian with the sign bit flipped, so
/// that sub keys sort by start (the Go SDK's layout).
fn append_start(b: &mut Vec<u8>, start: i64) {
    b.extend_from_slice(&((start as u64) ^ (1 << 63)).to_be_bytes());
}

fn read_start(sub: &[u8], prefix_len: usize) -> Option<i64> {
    if sub.len() != prefix_len + 8 {
        return None;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&sub[prefix_len..]);
    Some((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

impl Base {
    /// The counts so far.
    pub fn stats(&self) -> Stats {
        self.stats.get()
    }

    fn count(&self, f: impl FnOnce(&mut Stats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Names the windows in an ABI error and makes the ones a retry cannot
    /// cure terminal (a key over 1024 bytes, a key of another partition, a
    /// pipeline without state, a topic not allowed), so the record goes to
    /// the dead-letter topic instead of being retried for ever. A limit
    /// stays retryable: the host may hold fewer outputs later.
    fn errno(&self, e: Errno) -> Error {
        let msg = format!("window: windows {:?}: {}", self.name, e);
        match e {
            Errno::TOO_LARGE
            | Errno::WRONG_KEY
            | Errno::NO_STATE
            | Errno::TOPIC_DENIED
            | Errno::BAD_ENCODING
            | Errno::NOT_SUPPORTED => Error::terminal(msg),
            _ => Error::retry(msg),
        }
    }

    fn sub(&self, start: i64) -> Vec<u8> {
        let mut sub = Vec::with_capacity(self.prefix.len() + 8);
        sub.extend_from_slice(&self.prefix);
        append_start(&mut sub, start);
        sub
    }

    /// Refuses a timestamp before the epoch (no window holds it) or one
    /// whose close time (ts + reach) overflows.
    fn record_time(&self, r: &Record<'_>, reach: i64) -> Result<i64, Error> {
        let ts = r.timestamp_ms;
        if ts < 0 {
            return Err(Error::terminal(format!(
                "window: record timestamp is negative: windows {:?}, timestamp {}",
                self.name, ts
            )));
        }
        if ts.checked_add(reach).is_none() {
            return Err(Error::terminal(format!(
                "window: windows {:?}: timestamp {}: its window's close time overflows",
                self.name, ts
            )));
        }
        Ok(ts)
    }

    fn late(&self, r: &Record<'_>, out: &mut dyn Emit) -> Result<(), Error> {
        self.count(|s| s.late += 1);
        if self.late_topic.is_empty() {
            return Ok(());
        }
        let mut hs: Vec<Header<'_>> = r.headers.iter().collect();
        hs.push(Header::new(HEADER_LATE, Some(self.name.as_bytes())));
        out.emit(&Output {
            topic: &self.late_topic,
            key: r.key,
            value: r.value,
            headers: (&hs).into(),
            ..Output::default()
        })
        .map_err(|e| self.errno(e))
    }

    fn emit(&self, res: &WindowResult, out: &mut dyn Emit) -> Result<(), Error> {
        self.count(|s| s.closed += 1);
        if let Some(f) = &self.on_close {
            return f(res, out);
        }
        let (start, end) = (res.start.to_string(), res.end.to_string());
        let hs = [
            Header::new(HEADER_START, Some(start.as_bytes())),
            Header::new(HEADER_END, Some(end.as_bytes())),
        ];
        out.emit(&Output {
            topic: &self.output,
            key: Some(&res.key),
            value: Some(&res.agg),
            headers: (&hs).into(),
            ..Output::default()
        })
        .map_err(|e| self.errno(e))
    }
}

impl TimeWindows {
    /// The counts so far.
    pub fn stats(&self) -> Stats {
        self.b.stats()
    }

    /// Adds the record to its windows (its key's, at its timestamp; a null
    /// key is the empty key): each still open takes it, and a window it
    /// opens sets the timer that will close it. A record no window takes is
    /// late. Call it from the processing function with [`Abi`].
    pub fn add(&self, h: &mut dyn Host, r: &Record<'_>, out: &mut dyn Emit) -> Result<(), Error> {
        let ts = self.b.record_time(r, self.size + self.b.grace)?;
        // Kafka Streams advances stream time before it looks at the
        // record's windows: the record's own timestamp counts.
        let st = h.stream_time().map_err(|e| self.b.errno(e))?.max(ts);
        let key = r.key.unwrap_or(&[]);
        let mut took = false;
        // TimeWindows.windowsFor: the first start clamped at 0.
        let mut start = (ts - self.size + self.advance).max(0) / self.advance * self.advance;
        while start <= ts {
            let end = start + self.size;
            if end + self.b.grace <= st {
                // Closed: KStreamWindowAggregate's windowEnd <= closeTime.
                self.b.count(|s| s.dropped += 1);
            } else {
                took = true;
                let sub = self.b.sub(start);
                let agg = h.get(key, &sub).map_err(|e| self.b.errno(e))?;
                if agg.is_none() {
                    h.set_timer(key, end + self.b.grace)
                        .map_err(|e| self.b.errno(e))?;
                }
                let agg = self.b.agg.add(agg.as_deref(), r.value)?;
                h.put(key, &sub, &agg).map_err(|e| self.b.errno(e))?;
            }
            start += self.advance;
        }
        if !took {
            return self.b.late(r, out);
        }
        self.b.count(|s| s.records += 1);
        Ok(())
    }

    /// Closes `key`'s windows whose close time (`end + grace`) is at or
    /// before `at`: emits their results, in start order, and deletes them.
    /// Call it from the timer function with the firing's key and at; a
    /// timer that closes none of these windows (another windows' timer)
    /// does nothing.
    pub fn fire(
        &self,
        h: &mut dyn Host,
        key: &[u8],
        at: i64,
        out: &mut dyn Emit,
    ) -> Result<(), Error> {
        let (plen, size, grace) = (self.b.prefix.len(), self.size, self.b.grace);
        // The window the timer was set for, whose close time is `at`: read
        // alone (a scan costs the host a store read of its own). Every
        // window has a timer at its close time, and the timers fire in time
        // order, so when it is there no other window of `key` is due. When
        // it is not (the timer is another windows', or a window's size or
        // grace changed since it was set), the scan below finds what is due.
        if let Some(start) = at.checked_sub(grace).and_then(|t| t.checked_sub(size)) {
            let sub = self.b.sub(start);
            if let Some(agg) = h.get(key, &sub).map_err(|e| self.b.errno(e))? {
                h.delete(key, &sub).map_err(|e| self.b.errno(e))?;
                let res = WindowResult {
                    key: key.to_vec(),
                    start,
                    end: start + size,
                    agg,
                };
                return self.b.emit(&res, out);
            }
        }
        let mut due: Vec<WindowResult> = Vec::new();
        let mut bad: Option<Vec<u8>> = None;
        h.scan(key, &self.b.prefix, &mut |sub, agg| {
            let start = match read_start(sub, plen) {
                Some(s) => s,
                None => {
                    bad = Some(sub.to_vec());
                    return false;
                }
            };
            if start + size + grace > at {
                return false; // sub keys sort by start, and so by close time
            }
            due.push(WindowResult {
                key: key.to_vec(),
                start,
                end: start + size,
                agg: agg.to_vec(),
            });
            true
        })
        .map_err(|e| self.b.errno(e))?;
        if let Some(sub) = bad {
            return Err(Error::terminal(format!(
                "window: windows {:?}: malformed sub key {:02x?}",
                self.b.name, sub
            )));
        }
        for res in &due {
            h.delete(key, &self.b.sub(res.start))
                .map_err(|e| self.b.errno(e))?;
            self.b.emit(res, out)?;
        }
        Ok(())
    }
}
