//! An in-memory partition that serves ABI.md §4.2 — two-part state keys,
//! stream time and event-time timers with the firing rule — so that a
//! processor with timers ([`crate::window`], or [`crate::timer_set`] used
//! directly) is unit tested on the host, without a WebAssembly runtime (the
//! Go SDK's `windowtest`). Records and firings go through the ABI encoding
//! and the SDK's real entries (`wasmstream_on_record`,
//! `wasmstream_on_timer`), over the simulated host of [`crate::run`].
//!
//! The firing rule it keeps: when a record is decided (it succeeded, or
//! failed terminally: dead-lettered), stream time becomes the larger of
//! itself and the record's timestamp, T; then every timer with at <= T
//! fires, one call each, in (at, key) order, before the next record. A
//! call's writes (state and timers) and outputs are kept when it succeeds
//! and discarded when it fails, as the host does with a record's. A fired
//! timer is gone (a firing cannot set its own instant again).

use crate::hostrun::sim::{self, Event};
use crate::hostrun::{OwnedOutput, TestRecord};
use crate::{codec, rt, Emitter, Error, Record, Status, Timer};

/// One input partition's two-part state, timers and stream time. Each call
/// swaps them into the thread's simulated host for its duration, so several
/// partitions (and tests on other threads) do not meet.
pub struct Partition {
    ev: Event,
    /// The timer firings so far.
    pub firings: usize,
}

impl Default for Partition {
    fn default() -> Self {
        Partition::new()
    }
}

/// What a record and the firings it made due did: their outputs, in order
/// (the record's, then each firing's that succeeded), and their failures
/// (the record's, then each failed firing's), each with its status:
/// [`Status::Retry`] (not decided: the host would retry it) or
/// [`Status::Fail`] (dead-lettered).
#[derive(Debug, Clone, Default)]
pub struct Round {
    pub outputs: Vec<OwnedOutput>,
    pub failures: Vec<(Status, String)>,
}

impl Round {
    /// Whether nothing failed.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

impl Partition {
    /// An empty partition: stream time -1, no state, no timers.
    pub fn new() -> Partition {
        Partition {
            ev: Event::new(),
            firings: 0,
        }
    }

    /// The partition's stream time.
    pub fn stream_time(&self) -> i64 {
        self.ev.stream_time
    }

    /// Bounds a call's writes (two-part state and timers), as
    /// `limits.max_outputs` does on the host: one more gets
    /// [`crate::Errno::LIMIT`]. 10,000 by default.
    pub fn set_max_writes(&mut self, n: usize) {
        self.ev.max_writes = n;
    }

    /// A copy of the two-part state: ((key, sub), value), in key order.
    pub fn state(&self) -> Vec<((Vec<u8>, Vec<u8>), Vec<u8>)> {
        self.ev
            .state
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The set timers as (at, key), in firing order.
    pub fn timers(&self) -> Vec<(i64, Vec<u8>)> {
        self.ev.timers.iter().cloned().collect()
    }

    /// Runs `process` on `r`, then, if it was decided, `on_timer` for each
    /// timer it made due. A record that goes pending is not supported (its
    /// operations fail): windows do not wait.
    pub fn record<F, T>(&mut self, process: F, on_timer: T, r: &TestRecord) -> Round
    where
        F: Fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
        T: Fn(&Timer<'_>, &mut Emitter) -> Result<(), Error>,
    {
        sim::swap_event(&mut self.ev);
        let res = crate::run_with(process, r, |_| {
            crate::OpResult::error("windowtest: a partition performs no operations")
        });
        sim::swap_event(&mut self.ev);
        let mut round = Round::default();
        match res.status {
            Status::Ok => round.outputs = res.outputs,
            Status::Fail => round
                .failures
                .push((Status::Fail, res.error.unwrap_or_default())),
            _ => {
                // Retried: not decided, so it does not move the clock.
                round
                    .failures
                    .push((Status::Retry, res.error.unwrap_or_default()));
                return round;
            }
        }
        self.ev.stream_time = self.ev.stream_time.max(r.timestamp_ms);
        self.fire(&on_timer, &r.topic, r.partition, &mut round);
        round
    }

    /// Moves stream time to `t` (if later), as `timers.idle_advance` does
    /// for a silent partition, and fires the timers it makes due.
    pub fn advance<T>(&mut self, on_timer: T, t: i64) -> Round
    where
        T: Fn(&Timer<'_>, &mut Emitter) -> Result<(), Error>,
    {
        self.ev.stream_time = self.ev.stream_time.max(t);
        let mut round = Round::default();
        self.fire(&on_timer, "", 0, &mut round);
        round
    }

    /// The round: each due timer in (at, key) order. One that fails
    /// terminally is dead-lettered (its timer gone, its writes and outputs
    /// discarded) and the round goes on; one that fails retryably keeps its
    /// timer and ends the round (the host would retry it).
    fn fire<T>(&mut self, on_timer: &T, topic: &str, partition: i32, round: &mut Round)
    where
        T: Fn(&Timer<'_>, &mut Emitter) -> Result<(), Error>,
    {
        loop {
            let (at, key) = match self.ev.timers.iter().next() {
                Some((at, key)) if *at <= self.ev.stream_time => (*at, key.clone()),
                _ => return,
            };
            self.ev.timers.remove(&(at, key.clone()));
            self.firings += 1;
            let mut enc = Vec::new();
            codec::append_timer_firing(
                &mut enc,
                &Timer {
                    at,
                    stream_time: self.ev.stream_time,
                    partition,
                    attempt: 1,
                    topic,
                    key: &key,
                },
            );
            let len = enc.len() as u32;
            sim::swap_event(&mut self.ev);
            sim::set_firing(Some(at));
            let handle = sim::begin(enc);
            let st = rt::on_timer(handle, len, on_timer);
            rt::reset();
            sim::set_firing(None);
            sim::end_state(st == Status::Ok as i32);
            let (outputs, error) = sim::end();
            sim::swap_event(&mut self.ev);
            let what = format!("timer ({:?}, {})", String::from_utf8_lossy(&key), at);
            match st {
                0 => round.outputs.extend(outputs),
                3 => round.failures.push((
                    Status::Fail,
                    format!("{}: {}", what, error.unwrap_or_default()),
                )),
                _ => {
                    self.ev.timers.insert((at, key));
                    round.failures.push((
                        Status::Retry,
                        format!("{}: {}", what, error.unwrap_or_default()),
                    ));
                    return;
                }
            }
        }
    }
}
