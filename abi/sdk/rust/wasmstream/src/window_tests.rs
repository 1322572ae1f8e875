//! The window module over the in-memory partition, against a port of the
//! reference model (internal/windowmodel): the same cases as the Go SDK's
//! window tests.

use crate::window::{self, Abi, Options, TimeWindows};
use crate::windowtest::{Partition, Round};
use crate::*;
use std::cell::RefCell;
use std::time::Duration;

/// A record's key and timestamp, as the model takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: String,
    ts: i64,
}

/// A window's count; end exclusive.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Win {
    key: String,
    start: i64,
    end: i64,
    count: i64,
}

#[derive(Debug, Default)]
struct Model {
    finals: Vec<Win>,
    open: Vec<Win>,
    late: i64,
    dropped: i64,
    stream_time: i64,
}

/// internal/windowmodel's Hopping, line for line: what Kafka Streams'
/// windowed count with grace and emit-on-close makes of a partition's
/// records (tumbling: advance == size).
fn model(recs: &[Rec], size: i64, advance: i64, grace: i64) -> Model {
    let mut counts: std::collections::BTreeMap<(String, i64), i64> = Default::default();
    let mut res = Model {
        stream_time: -1,
        ..Model::default()
    };
    for r in recs {
        res.stream_time = res.stream_time.max(r.ts);
        let mut took = false;
        let mut n = r.ts / advance;
        while n >= 0 {
            let start = n * advance;
            n -= 1;
            if start + size <= r.ts {
                break; // this window and every earlier one ends at or before ts
            }
            if start + size + grace <= res.stream_time {
                res.dropped += 1;
                continue;
            }
            *counts.entry((r.key.clone(), start)).or_insert(0) += 1;
            took = true;
        }
        if !took {
            res.late += 1;
        }
    }
    for ((key, start), count) in counts {
        let w = Win {
            key,
            start,
            end: start + size,
            count,
        };
        if w.end + grace <= res.stream_time {
            res.finals.push(w);
        } else {
            res.open.push(w);
        }
    }
    res.finals.sort();
    res.open.sort();
    res
}

/// internal/windowmodel's Sessions, line for line: a session is [start,
/// end], both inclusive; a record joins (merging) every session not yet
/// closed that it touches within gap; one closes once end < stream time -
/// gap - grace.
fn model_sessions(recs: &[Rec], gap: i64, grace: i64) -> Model {
    let mut res = Model {
        stream_time: -1,
        ..Model::default()
    };
    let mut sessions: std::collections::BTreeMap<String, Vec<Win>> = Default::default();
    for r in recs {
        res.stream_time = res.stream_time.max(r.ts);
        let close_time = res.stream_time - gap - grace;
        let mut merged = Win {
            key: r.key.clone(),
            start: r.ts,
            end: r.ts,
            count: 1,
        };
        let mut keep = Vec::new();
        for s in sessions.get(&r.key).cloned().unwrap_or_default() {
            if s.end >= close_time && s.end >= r.ts - gap && s.start <= r.ts + gap {
                merged.start = merged.start.min(s.start);
                merged.end = merged.end.max(s.end);
                merged.count += s.count;
            } else {
                keep.push(s);
            }
        }
        if merged.end < close_time {
            res.late += 1; // it joined nothing (an open session ends at or after close_time)
            continue;
        }
        keep.push(merged);
        sessions.insert(r.key.clone(), keep);
    }
    for (_, ss) in sessions {
        for s in ss {
            if s.end < res.stream_time - gap - grace {
                res.finals.push(s);
            } else {
                res.open.push(s);
            }
        }
    }
    res.finals.sort();
    res.open.sort();
    res
}

/// splitmix64: random inputs without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// In [0, n).
    fn int(&mut self, n: i64) -> i64 {
        (self.next() % n as u64) as i64
    }
}

/// Records of a few keys whose timestamps mostly rise, some out of order
/// within grace and some late beyond it, with records exactly at window
/// edges and close times among them (small steps hit edges often): the Go
/// test's randomInput.
fn random_input(rng: &mut Rng, grace: i64) -> Vec<Rec> {
    let n = rng.int(80) as usize;
    let mut hi = 0i64;
    let mut recs = Vec::with_capacity(n);
    for _ in 0..n {
        let ts = match rng.int(10) {
            0 | 1 => (hi - rng.int(grace + 1)).max(0),
            2 => (hi - grace - rng.int(40)).max(0),
            _ => hi + rng.int(8),
        };
        hi = hi.max(ts);
        let key = ((b'a' + rng.int(3) as u8) as char).to_string();
        recs.push(Rec { key, ts });
    }
    recs
}

fn rec(key: &str, ts: i64) -> TestRecord {
    let mut r = TestRecord::new("in").key(key).value("v");
    r.timestamp_ms = ts;
    r
}

fn header<'a>(o: &'a OwnedOutput, name: &str) -> Option<&'a [u8]> {
    o.headers
        .iter()
        .find(|h| h.key == name.as_bytes())
        .and_then(|h| h.value.as_deref())
}

fn num(o: &OwnedOutput, name: &str) -> i64 {
    std::str::from_utf8(header(o, name).expect("header"))
        .unwrap()
        .parse()
        .unwrap()
}

/// The windows a test runs, time windows and sessions alike, over the ABI.
trait Windows {
    fn on_record(&self, r: &Record<'_>, out: &mut Emitter) -> Result<(), Error>;
    fn on_timer(&self, t: &Timer<'_>, out: &mut Emitter) -> Result<(), Error>;
    fn counted(&self) -> window::Stats;
}

// Both kinds of windows have the same add, fire and stats.
macro_rules! impl_windows {
    ($($t:ty),*) => {$(
        impl Windows for $t {
            fn on_record(&self, r: &Record<'_>, out: &mut Emitter) -> Result<(), Error> {
                self.add(&mut Abi, r, out)
            }
            fn on_timer(&self, t: &Timer<'_>, out: &mut Emitter) -> Result<(), Error> {
                self.fire(&mut Abi, t.key, t.at, out)
            }
            fn counted(&self) -> window::Stats {
                self.stats()
            }
        }
    )*};
}
impl_windows!(TimeWindows, window::SessionWindows);

/// The round failed once, with status, its message saying says.
fn failed_once(round: &Round, status: Status, says: &str, what: &str) {
    assert!(
        round.failures.len() == 1
            && round.failures[0].0 == status
            && round.failures[0].1.contains(says),
        "{}: {:?}",
        what,
        round.failures
    );
}

fn add_fn<W: Windows>(w: &W) -> impl Fn(&Record<'_>, &mut Emitter) -> Result<(), Error> + '_ {
    move |r, out| w.on_record(r, out)
}

fn fire_fn<W: Windows>(w: &W) -> impl Fn(&Timer<'_>, &mut Emitter) -> Result<(), Error> + '_ {
    move |t, out| w.on_timer(t, out)
}

/// Options named "w" (the tests' windows' name), the rest default.
fn named() -> Options {
    Options {
        name: "w".into(),
        ..Options::default()
    }
}

/// The options of the model tests: grace milliseconds of grace, late
/// records to "late".
fn with_grace(grace: i64) -> Options {
    Options {
        grace: Duration::from_millis(grace as u64),
        late_topic: "late".into(),
        ..named()
    }
}

/// A run of windows over a partition: the partition after it, the final
/// results (from the outputs) and the late records sent to "late".
struct Run {
    p: Partition,
    finals: Vec<Win>,
    late: i64,
}

/// Feeds recs to a new partition.
fn run_windows<W: Windows>(w: &W, recs: &[Rec]) -> Run {
    let mut p = Partition::new();
    let mut finals = Vec::new();
    let mut late = 0;
    for (i, r) in recs.iter().enumerate() {
        let round = p.record(add_fn(w), fire_fn(w), &rec(&r.key, r.ts).at(0, i as i64));
        assert!(round.ok(), "record {} {:?}: {:?}", i, r, round.failures);
        for o in round.outputs {
            if o.topic == "late" {
                assert_eq!(header(&o, window::HEADER_LATE), Some(&b"w"[..]));
                assert_eq!(o.key.as_deref(), Some(r.key.as_bytes()));
                late += 1;
                continue;
            }
            finals.push(Win {
                key: String::from_utf8(o.key.clone().unwrap()).unwrap(),
                start: num(&o, window::HEADER_START),
                end: num(&o, window::HEADER_END),
                count: window::decode_count(o.value.as_deref().unwrap()).unwrap() as i64,
            });
        }
    }
    finals.sort();
    Run { p, finals, late }
}

impl Run {
    /// The run shows the model's results want: its final results, its
    /// late records (sent and counted by w), its dropped pairs (time
    /// windows, size Some: sessions count none), its open windows in the
    /// state and its stream time.
    fn matches<W: Windows>(&self, w: &W, want: &Model, size: Option<i64>, ctx: &str) {
        let stats = w.counted();
        assert_eq!(self.finals, want.finals, "final results: {}", ctx);
        assert_eq!(
            (self.late, stats.late),
            (want.late, want.late),
            "late: {}",
            ctx
        );
        if size.is_some() {
            assert_eq!(stats.dropped, want.dropped, "dropped: {}", ctx);
        }
        assert_eq!(open_windows(&self.p, size), want.open, "state: {}", ctx);
        assert_eq!(
            self.p.stream_time(),
            want.stream_time,
            "stream time: {}",
            ctx
        );
    }

    /// Every timer left is in the future, and each open window of want
    /// has one at close(window); with exact, no other.
    fn timers_match(&self, want: &Model, close: impl Fn(&Win) -> i64, exact: bool, ctx: &str) {
        let timers = self.p.timers();
        for (at, key) in &timers {
            assert!(
                *at > self.p.stream_time(),
                "timer ({:?}, {}) due did not fire: {}",
                key,
                at,
                ctx
            );
        }
        if exact {
            assert_eq!(
                timers.len(),
                want.open.len(),
                "timers {:?}: {}",
                timers,
                ctx
            );
        }
        for o in &want.open {
            let t = (close(o), o.key.clone().into_bytes());
            assert!(
                timers.contains(&t),
                "open window {:?} has no timer: {}",
                o,
                ctx
            );
        }
    }
}

/// The open windows in the state, the SDK's layout: sub name | 0 | start
/// (big endian, sign bit flipped); a time window's (size) value is its
/// count, a session's (None) its end | count.
fn open_windows(p: &Partition, size: Option<i64>) -> Vec<Win> {
    let mut ws: Vec<Win> = p
        .state()
        .into_iter()
        .map(|((key, sub), mut v)| {
            assert!(
                sub.len() == 10 && &sub[..2] == b"w\0",
                "state ({:?}, {:02x?}): not a window's",
                key,
                sub
            );
            let mut b = [0u8; 8];
            b.copy_from_slice(&sub[2..]);
            let start = (u64::from_be_bytes(b) ^ (1 << 63)) as i64;
            let end = match size {
                Some(size) => start + size,
                None => {
                    b.copy_from_slice(&v[..8]);
                    v.drain(..8);
                    i64::from_be_bytes(b)
                }
            };
            Win {
                key: String::from_utf8(key).unwrap(),
                start,
                end,
                count: window::decode_count(&v).unwrap() as i64,
            }
        })
        .collect();
    ws.sort();
    ws
}

#[derive(Default)]
struct Exercised {
    finals: usize,
    late: usize,
    open: usize,
}

impl Exercised {
    fn note(&mut self, m: &Model) {
        self.finals += !m.finals.is_empty() as usize;
        self.late += (m.late > 0) as usize;
        self.open += !m.open.is_empty() as usize;
    }
    fn check(&self) {
        assert!(
            self.finals >= 100 && self.late >= 50 && self.open >= 100,
            "the inputs exercise too little: trials with final results {}, late records {}, open windows {}",
            self.finals,
            self.late,
            self.open
        );
    }
}

/// The main test, as the Go SDK's: random inputs through the windows over
/// the in-memory partition (timers, firing rule, two-part keys) emit
/// exactly the model's final results, send exactly its late records to the
/// late topic, count its dropped pairs, and leave in the state exactly its
/// open windows, each with one timer at its close time.
fn matches_model(seed: u64, hopping: bool) {
    let mut rng = Rng(seed);
    let mut ex = Exercised::default();
    for trial in 0..500 {
        let (size, grace) = (1 + rng.int(20), rng.int(15));
        let advance = if hopping { 1 + rng.int(size) } else { size };
        let ms = |n: i64| Duration::from_millis(n as u64);
        let w = window::hopping(ms(size), ms(advance), with_grace(grace)).unwrap();
        let recs = random_input(&mut rng, grace);
        let want = model(&recs, size, advance, grace);
        let run = run_windows(&w, &recs);
        let ctx = format!(
            "trial {} (size {}, advance {}, grace {}), input {:?}",
            trial, size, advance, grace, recs
        );
        run.matches(&w, &want, Some(size), &ctx);
        // One timer per open window, at its close time.
        run.timers_match(&want, |o| o.end + grace, true, &ctx);
        ex.note(&want);
    }
    ex.check();
}

#[test]
fn tumbling_count_matches_model() {
    matches_model(21, false);
}

#[test]
fn hopping_count_matches_model() {
    matches_model(23, true);
}

/// The same for session windows (a session's end inclusive; a merge
/// leaves the old timer to fire and find nothing).
#[test]
fn session_count_matches_model() {
    let mut rng = Rng(25);
    let mut ex = Exercised::default();
    for trial in 0..500 {
        let (gap, grace) = (1 + rng.int(15), rng.int(15));
        let w = window::sessions(Duration::from_millis(gap as u64), with_grace(grace)).unwrap();
        let recs = random_input(&mut rng, grace);
        let want = model_sessions(&recs, gap, grace);
        let run = run_windows(&w, &recs);
        let ctx = format!(
            "trial {} (gap {}, grace {}), input {:?}",
            trial, gap, grace, recs
        );
        run.matches(&w, &want, None, &ctx);
        run.timers_match(&want, |o| o.end + gap + grace + 1, false, &ctx);
        ex.note(&want);
    }
    ex.check();
}

/// Sessions need an aggregator that merges: the default merge fails the
/// record terminally when a record bridges two sessions.
#[test]
fn session_merge_needs_an_aggregator_that_merges() {
    struct Last;
    impl window::Aggregator for Last {
        fn add(&self, _agg: Option<&[u8]>, v: Option<&[u8]>) -> Result<Vec<u8>, Error> {
            Ok(v.unwrap_or_default().to_vec())
        }
    }
    let w = window::sessions(
        Duration::from_millis(5),
        Options {
            grace: Duration::from_millis(100),
            agg: Some(Box::new(Last)),
            ..named()
        },
    )
    .unwrap();
    let mut p = Partition::new();
    for ts in [0, 10] {
        let round = p.record(add_fn(&w), fire_fn(&w), &rec("k", ts));
        assert!(round.ok(), "{:?}", round.failures);
    }
    let round = p.record(add_fn(&w), fire_fn(&w), &rec("k", 5));
    failed_once(&round, Status::Fail, "merge", "the round");
}

fn outputs(p: &mut Partition, w: &TimeWindows, key: &str, ts: i64) -> Vec<OwnedOutput> {
    let round = p.record(add_fn(w), fire_fn(w), &rec(key, ts));
    assert!(round.ok(), "{:?}", round.failures);
    round.outputs
}

/// A window's edges as Kafka Streams draws them: a record at exactly a
/// window's end is the next window's; the window closes, and emits, when
/// stream time reaches end + grace, and a record for it then is late.
#[test]
fn tumbling_edges() {
    let w = window::tumbling(
        Duration::from_millis(10),
        Options {
            grace: Duration::from_millis(5),
            ..named()
        },
    )
    .unwrap();
    let mut p = Partition::new();
    outputs(&mut p, &w, "k", 9);
    outputs(&mut p, &w, "k", 10); // [10, 20)
    assert!(
        outputs(&mut p, &w, "x", 14).is_empty(),
        "stream time 14 < end + grace 15"
    );
    outputs(&mut p, &w, "k", 3); // still in [0, 10): its close time is 15
    let outs = outputs(&mut p, &w, "x", 15);
    assert_eq!(outs.len(), 1, "stream time 15 = end + grace: {:?}", outs);
    assert_eq!(outs[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(
        window::decode_count(outs[0].value.as_deref().unwrap()).unwrap(),
        2,
        "[0,10) holds 9 and 3; 10 is the next window's"
    );
    let before = w.stats().late;
    outputs(&mut p, &w, "k", 9); // its window closed
    assert_eq!(
        w.stats().late,
        before + 1,
        "a record for a closed window is not late"
    );
    let closed = (
        b"k".to_vec(),
        [&b"w\0"[..], &[0x80, 0, 0, 0, 0, 0, 0, 0]].concat(),
    );
    assert!(
        !p.state().iter().any(|(k, _)| *k == closed),
        "the closed window [0,10) is still in the state"
    );
}

/// A firing's outputs go after the record's that moved the clock; stream
/// time stays where the record put it; an idle advance fires the rest.
#[test]
fn firing_follows_the_record() {
    let w = window::tumbling(
        Duration::from_millis(10),
        Options {
            output: "counts".into(),
            ..named()
        },
    )
    .unwrap();
    let mut p = Partition::new();
    for ts in [1, 2, 11] {
        let outs = outputs(&mut p, &w, "k", ts);
        if ts < 11 {
            assert!(outs.is_empty(), "at {}: {:?}", ts, outs);
        } else {
            assert!(
                outs.len() == 1 && outs[0].topic == "counts",
                "at 11: {:?}",
                outs
            );
        }
    }
    assert_eq!(p.firings, 1);
    let round = p.advance(fire_fn(&w), 20);
    assert!(round.ok() && round.outputs.len() == 1, "{:?}", round);
    assert!(
        p.state().is_empty() && p.timers().is_empty(),
        "advance to 20 left state {:?}, timers {:?}",
        p.state(),
        p.timers()
    );
}

/// A record that fails leaves neither its windows' writes nor its timers;
/// a terminal failure is decided (dead-lettered) and moves the clock.
#[test]
fn failed_record_leaves_nothing() {
    let w = window::tumbling(Duration::from_millis(10), named()).unwrap();
    let mut p = Partition::new();
    let failing = |terminal: bool| {
        let w = &w;
        move |r: &Record<'_>, out: &mut Emitter| -> Result<(), Error> {
            w.add(&mut Abi, r, out)?;
            Err(if terminal {
                Error::terminal("boom")
            } else {
                Error::retry("boom")
            })
        }
    };
    let round = p.record(failing(false), fire_fn(&w), &rec("k", 5));
    assert_eq!(round.failures.len(), 1);
    assert_eq!(round.failures[0].0, Status::Retry);
    assert!(
        p.state().is_empty() && p.timers().is_empty() && p.stream_time() == -1,
        "a retried record left state {:?}, timers {:?}, stream time {}",
        p.state(),
        p.timers(),
        p.stream_time()
    );
    let round = p.record(failing(true), fire_fn(&w), &rec("k", 7));
    assert_eq!(round.failures[0].0, Status::Fail);
    assert!(
        p.state().is_empty() && p.stream_time() == 7,
        "a dead-lettered record: state {:?}, stream time {}",
        p.state(),
        p.stream_time()
    );
}

/// A record before the epoch has no window: it fails terminally, naming
/// the windows.
#[test]
fn negative_timestamp_fails() {
    let w = window::tumbling(Duration::from_secs(1), named()).unwrap();
    let round = Partition::new().record(add_fn(&w), fire_fn(&w), &rec("k", -1));
    assert_eq!(round.failures.len(), 1);
    let (st, msg) = &round.failures[0];
    assert!(
        *st == Status::Fail && msg.contains("negative") && msg.contains("\"w\""),
        "{:?}",
        round.failures
    );
}

/// Bad options are refused, naming what is wrong.
#[test]
fn options_refused() {
    let ok = named;
    let s = Duration::from_secs(1);
    let cases: Vec<(&str, Result<TimeWindows, String>, &str)> = vec![
        ("no name", window::tumbling(s, Options::default()), "name"),
        (
            "0 byte in name",
            window::tumbling(
                s,
                Options {
                    name: "a\0".into(),
                    ..Options::default()
                },
            ),
            "0 byte",
        ),
        (
            "zero size",
            window::tumbling(Duration::ZERO, ok()),
            "advance <= size",
        ),
        (
            "sub-ms size",
            window::tumbling(Duration::from_micros(1), ok()),
            "size",
        ),
        (
            "sub-ms grace",
            window::tumbling(
                s,
                Options {
                    grace: Duration::from_micros(1500),
                    ..ok()
                },
            ),
            "grace",
        ),
        (
            "advance > size",
            window::hopping(s, 2 * s, ok()),
            "advance <= size",
        ),
        (
            "size + grace overflows",
            window::tumbling(
                Duration::from_millis(i64::MAX as u64),
                Options { grace: s, ..ok() },
            ),
            "overflows",
        ),
    ];
    for (name, res, want) in cases {
        match res {
            Ok(_) => panic!("{}: accepted", name),
            Err(e) => assert!(
                e.contains(want),
                "{}: {:?} does not say {:?}",
                name,
                e,
                want
            ),
        }
    }
}

/// The in-memory partition refuses what the host would: a firing re-arming
/// its own instant (a later one fires in the same round), an over-long key.
#[test]
fn partition_refuses() {
    let got: RefCell<Vec<Result<(), Errno>>> = RefCell::new(Vec::new());
    let mut p = Partition::new();
    let round = p.record(
        |_r: &Record<'_>, _out: &mut Emitter| -> Result<(), Error> {
            got.borrow_mut()
                .push(state_put2(&[0u8; MAX_STATE_KEY_BYTES + 1], b"", b""));
            got.borrow_mut()
                .push(state_put2(b"k", &[0u8; MAX_STATE_KEY_BYTES + 1], b""));
            timer_set(b"k", 3)?;
            Ok(())
        },
        |t: &Timer<'_>, _out: &mut Emitter| -> Result<(), Error> {
            if t.at == 3 {
                got.borrow_mut().push(timer_set(t.key, t.at));
                got.borrow_mut().push(timer_set(t.key, t.at + 1));
            }
            Ok(())
        },
        &rec("k", 5),
    );
    assert!(round.ok(), "{:?}", round.failures);
    assert_eq!(
        *got.borrow(),
        vec![
            Err(Errno::TOO_LARGE),
            Err(Errno::TOO_LARGE),
            Err(Errno::LIMIT),
            Ok(())
        ]
    );
    assert_eq!(
        p.firings, 2,
        "3, then the 4 its firing set (due: stream time 5)"
    );
}

/// Firings run in (at, key) order with the firing's fields; one that fails
/// terminally is dead-lettered (its writes and outputs discarded) and the
/// round goes on; one that fails retryably keeps its timer and ends the
/// round.
#[test]
fn firing_order_and_failures() {
    let fired: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let process = |_r: &Record<'_>, _out: &mut Emitter| -> Result<(), Error> {
        for (key, at) in [("b", 2), ("a", 2), ("c", 1), ("a", 9), ("a", 2)] {
            timer_set(key.as_bytes(), at)?;
        }
        Ok(())
    };
    let on_timer = |t: &Timer<'_>, out: &mut Emitter| -> Result<(), Error> {
        assert_eq!((t.topic, t.partition, t.attempt), ("in", 4, 1));
        assert!(
            t.stream_time >= t.at && stream_time()? == t.stream_time,
            "firing {:?}",
            t
        );
        fired
            .borrow_mut()
            .push(format!("{}{}", String::from_utf8_lossy(t.key), t.at));
        state_put2(t.key, b"s", b"x")?;
        out.emit(&Output {
            key: Some(t.key),
            ..Output::default()
        })?;
        match t.key {
            b"b" => Err(Error::terminal("boom")),
            b"c" if fired.borrow().len() == 1 => Err(Error::retry("boom")),
            _ => Ok(()),
        }
    };
    let mut p = Partition::new();
    let round = p.record(process, on_timer, &rec("k", 5).at(4, 0));
    assert!(
        round.outputs.is_empty() && *fired.borrow() == ["c1"],
        "first round: fired {:?}, {:?}",
        fired.borrow(),
        round
    );
    assert_eq!(round.failures[0].0, Status::Retry);
    assert!(
        p.timers().len() == 4 && p.state().is_empty(),
        "after a retried firing: timers {:?} (want 4: deduplicated), state {:?}",
        p.timers(),
        p.state()
    );
    let round: Round = p.record(
        |_r: &Record<'_>, _o: &mut Emitter| Ok(()),
        on_timer,
        &rec("k", 5).at(4, 1),
    );
    assert_eq!(
        *fired.borrow(),
        ["c1", "c1", "a2", "b2"],
        "c1 again, then a2, b2 in (at, key) order"
    );
    assert_eq!(
        round.outputs.len(),
        2,
        "the outputs of c1 and a2: {:?}",
        round
    );
    failed_once(&round, Status::Fail, "boom", "the round");
    let keys: Vec<Vec<u8>> = p.state().into_iter().map(|((k, _), _)| k).collect();
    assert_eq!(
        keys,
        vec![b"a".to_vec(), b"c".to_vec()],
        "b's write discarded"
    );
    assert_eq!(p.timers(), vec![(9, b"a".to_vec())]);
}

/// A firing cannot wait: await_op in it fails terminally, and so does a
/// timer function that returns pending.
#[test]
fn firing_cannot_wait() {
    let mut p = Partition::new();
    let round = p.record(
        |_r: &Record<'_>, _o: &mut Emitter| -> Result<(), Error> { Ok(timer_set(b"k", 1)?) },
        |_t: &Timer<'_>, _o: &mut Emitter| -> Result<(), Error> {
            await_op(timer(Duration::from_millis(1)), |_, _, _| Ok(()))
        },
        &rec("k", 5),
    );
    failed_once(&round, Status::Fail, "cannot wait", "the round");
    assert!(
        p.timers().is_empty(),
        "a dead-lettered firing's timer is gone"
    );
}

/// An ABI error a retry cannot cure fails the record terminally, naming
/// the windows; a limit stays retryable and leaves nothing.
#[test]
fn host_errors_classified() {
    let w = window::hopping(Duration::from_millis(10), Duration::from_millis(5), named()).unwrap();
    let long = "k".repeat(MAX_STATE_KEY_BYTES + 1);
    let round = Partition::new().record(add_fn(&w), fire_fn(&w), &rec(&long, 7));
    let (st, msg) = &round.failures[0];
    assert!(
        *st == Status::Fail && msg.contains("windows \"w\"") && msg.contains("too large"),
        "over-long key: {:?}",
        round.failures
    );
    let mut p = Partition::new();
    p.set_max_writes(3); // a record at 7 opens two windows: two timers and two puts
    let round = p.record(add_fn(&w), fire_fn(&w), &rec("k", 7));
    failed_once(&round, Status::Retry, "limit", "over the writes' limit");
    assert!(
        p.state().is_empty() && p.timers().is_empty(),
        "a failed record left state {:?}, timers {:?}",
        p.state(),
        p.timers()
    );
    crate::set_state_enabled(false);
    let round = Partition::new().record(add_fn(&w), fire_fn(&w), &rec("k", 7));
    crate::set_state_enabled(true);
    failed_once(&round, Status::Fail, "not enabled", "no state");
}

/// The same records give the same outputs in the same order (a replay
/// after an aborted transaction must emit what the aborted attempt did).
#[test]
fn same_records_same_outputs() {
    let mut rng = Rng(27);
    for trial in 0..100 {
        let recs = random_input(&mut rng, 3);
        for (size, advance, grace) in [(7u64, 7u64, 3u64), (9, 4, 2)] {
            let mut runs: Vec<Vec<OwnedOutput>> = Vec::new();
            for _ in 0..2 {
                let ms = Duration::from_millis;
                let w = window::hopping(ms(size), ms(advance), with_grace(grace as i64)).unwrap();
                let mut p = Partition::new();
                let mut outs = Vec::new();
                for r in &recs {
                    outs.extend(outputs(&mut p, &w, &r.key, r.ts));
                }
                runs.push(outs);
            }
            assert_eq!(
                runs[0], runs[1],
                "trial {}: two runs of the same records differ",
                trial
            );
        }
    }
}

/// on_close replaces the default output; a null key is the empty key.
#[test]
fn on_close_and_null_key() {
    let w = window::tumbling(
        Duration::from_millis(10),
        Options {
            on_close: Some(Box::new(
                |r: &window::WindowResult, out: &mut dyn window::Emit| {
                    let v = format!(
                        "{}@{}-{}={}",
                        String::from_utf8_lossy(&r.key),
                        r.start,
                        r.end,
                        window::decode_count(&r.agg)?
                    );
                    out.emit(&Output {
                        topic: "closed",
                        value: Some(v.as_bytes()),
                        ..Output::default()
                    })?;
                    Ok(())
                },
            )),
            ..named()
        },
    )
    .unwrap();
    let mut p = Partition::new();
    let mut r = TestRecord::new("in");
    r.timestamp_ms = 3;
    assert!(p.record(add_fn(&w), fire_fn(&w), &r).ok());
    let round = p.advance(fire_fn(&w), 10);
    assert_eq!(round.outputs.len(), 1, "{:?}", round);
    assert_eq!(
        (
            round.outputs[0].topic.as_str(),
            round.outputs[0].value.as_deref()
        ),
        ("closed", Some(&b"@0-10=1"[..]))
    );
    assert_eq!(
        w.stats(),
        window::Stats {
            records: 1,
            late: 0,
            dropped: 0,
            closed: 1
        }
    );
}

/// The firing's encoding (ABI.md §4.2) round-trips, and a truncated one is
/// refused.
#[test]
fn timer_encoding() {
    let t = Timer {
        at: -5,
        stream_time: 1 << 40,
        partition: 3,
        attempt: 2,
        topic: "in",
        key: b"k\0",
    };
    let mut b = Vec::new();
    codec::append_timer_firing(&mut b, &t);
    assert_eq!(b.len(), 8 + 8 + 4 + 4 + 4 + 2 + 4 + 2);
    let d = codec::decode_timer(&b).unwrap();
    assert_eq!(
        (d.at, d.stream_time, d.partition, d.attempt, d.topic, d.key),
        (t.at, t.stream_time, t.partition, t.attempt, t.topic, t.key)
    );
    assert!(codec::decode_timer(&b[..b.len() - 1]).is_err());
    // abi/timer_test.go's vector: the host's encoding, byte for byte.
    let t = Timer {
        at: 1700000060000,
        stream_time: 1700000061234,
        partition: 3,
        attempt: 2,
        topic: "in",
        key: b"k",
    };
    let mut b = Vec::new();
    codec::append_timer_firing(&mut b, &t);
    let want: &[u8] = &[
        0x60, 0x52, 0xe6, 0xcf, 0x8b, 0x01, 0, 0, 0x32, 0x57, 0xe6, 0xcf, 0x8b, 0x01, 0, 0, 3, 0,
        0, 0, 2, 0, 0, 0, 2, 0, 0, 0, b'i', b'n', 1, 0, 0, 0, b'k',
    ];
    assert_eq!(b, want);
    assert!(
        codec::decode_timer(&[b.as_slice(), &[0]].concat()).is_err(),
        "a trailing byte accepted"
    );
}

/// One case of internal/windowmodel's vectors file.
struct Vector {
    kind: String,
    size: i64,
    advance: i64,
    grace: i64,
    recs: Vec<Rec>,
    want: Model,
}

/// internal/windowmodel/testdata/vectors.txt: the Go model's results on
/// random inputs (its TestVectorsFile keeps the file the model's).
fn read_vectors() -> Vec<Vector> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../../internal/windowmodel/testdata/vectors.txt"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {}", path, e));
    let mut out = Vec::new();
    let mut cur: Option<Vector> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let n = |i: usize| -> i64 { f[i].parse().unwrap_or_else(|_| panic!("{:?}", line)) };
        match f[0] {
            "case" => {
                cur = Some(Vector {
                    kind: f[1].to_string(),
                    size: n(2),
                    advance: n(3),
                    grace: n(4),
                    recs: Vec::new(),
                    want: Model::default(),
                })
            }
            "end" => out.push(cur.take().expect("end without case")),
            _ => {
                let v = cur.as_mut().expect("a line outside a case");
                let win = || Win {
                    key: f[1].to_string(),
                    start: n(2),
                    end: n(3),
                    count: n(4),
                };
                match f[0] {
                    "rec" => v.recs.push(Rec {
                        key: f[1].to_string(),
                        ts: n(2),
                    }),
                    "final" => v.want.finals.push(win()),
                    "open" => v.want.open.push(win()),
                    "late" => v.want.late = n(1),
                    "dropped" => v.want.dropped = n(1),
                    "stream_time" => v.want.stream_time = n(1),
                    _ => panic!("unknown line {:?}", line),
                }
            }
        }
    }
    out
}

/// The Go model's own results, not only this file's port of it: the port
/// agrees with internal/windowmodel on its vectors, and the windows over
/// the in-memory partition emit, drop, count and keep exactly them.
#[test]
fn windows_match_the_go_models_vectors() {
    let vectors = read_vectors();
    assert_eq!(vectors.len(), 180, "the file's cases");
    for (i, v) in vectors.iter().enumerate() {
        let ctx = format!(
            "vector {} ({} {} {} {})",
            i, v.kind, v.size, v.advance, v.grace
        );
        let ms = |n: i64| Duration::from_millis(n as u64);
        let (port, size) = if v.kind == "sessions" {
            (model_sessions(&v.recs, v.size, v.grace), None)
        } else {
            (model(&v.recs, v.size, v.advance, v.grace), Some(v.size))
        };
        assert_eq!(
            (
                &port.finals,
                &port.open,
                port.late,
                port.dropped,
                port.stream_time
            ),
            (
                &v.want.finals,
                &v.want.open,
                v.want.late,
                v.want.dropped,
                v.want.stream_time
            ),
            "the port of the model: {}",
            ctx
        );
        if v.kind == "sessions" {
            let w = window::sessions(ms(v.size), with_grace(v.grace)).unwrap();
            run_windows(&w, &v.recs).matches(&w, &v.want, size, &ctx);
        } else {
            let w = window::hopping(ms(v.size), ms(v.advance), with_grace(v.grace)).unwrap();
            run_windows(&w, &v.recs).matches(&w, &v.want, size, &ctx);
        }
    }
}

/// An in-memory [`window::Host`] that counts its scans.
#[derive(Default)]
struct CountingHost {
    st: i64,
    state: std::collections::BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
    scans: usize,
}

impl window::Host for CountingHost {
    fn stream_time(&mut self) -> Result<i64, Errno> {
        Ok(self.st)
    }
    fn get(&mut self, key: &[u8], sub: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        Ok(self.state.get(&(key.to_vec(), sub.to_vec())).cloned())
    }
    fn put(&mut self, key: &[u8], sub: &[u8], value: &[u8]) -> Result<(), Errno> {
        self.state
            .insert((key.to_vec(), sub.to_vec()), value.to_vec());
        Ok(())
    }
    fn delete(&mut self, key: &[u8], sub: &[u8]) -> Result<(), Errno> {
        self.state.remove(&(key.to_vec(), sub.to_vec()));
        Ok(())
    }
    fn scan(
        &mut self,
        key: &[u8],
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Errno> {
        self.scans += 1;
        for ((k, sub), v) in &self.state {
            if k == key && sub.starts_with(prefix) && !f(sub, v) {
                break;
            }
        }
        Ok(())
    }
    fn set_timer(&mut self, _: &[u8], _: i64) -> Result<(), Errno> {
        Ok(())
    }
    fn delete_timer(&mut self, _: &[u8], _: i64) -> Result<(), Errno> {
        Ok(())
    }
}

/// Outputs kept, for [`CountingHost`]'s tests.
#[derive(Default)]
struct Kept(Vec<Vec<u8>>);

impl window::Emit for Kept {
    fn emit(&mut self, o: &Output<'_>) -> Result<(), Errno> {
        self.0.push(o.value.unwrap_or(&[]).to_vec());
        Ok(())
    }
}

/// A firing reads the window its timer was set for alone, without a scan
/// (a scan costs the host a store read of its own); a timer of no window
/// scans, and finds what is due (the Go SDK's TestFireReadsItsWindowAlone).
#[test]
fn fire_reads_its_window_alone() {
    let w = window::tumbling(Duration::from_secs(60), with_grace(10_000)).unwrap();
    let mut h = CountingHost {
        st: -1,
        ..CountingHost::default()
    };
    let mut out = Kept::default();
    for ts in [1_000, 2_000, 61_000] {
        // windows [0, 60s) and [60s, 120s)
        h.st = h.st.max(ts - 1);
        let r = Record {
            topic: "in",
            partition: 0,
            offset: 0,
            timestamp_ms: ts,
            attempt: 1,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: Headers::default(),
        };
        w.add(&mut h, &r, &mut out).unwrap();
    }
    w.fire(&mut h, b"k", 70_000, &mut out).unwrap();
    assert_eq!(
        (out.0.len(), h.scans),
        (1, 0),
        "the firing of [0, 60s): outputs, scans"
    );
    assert_eq!(
        window::decode_count(&out.0[0]).unwrap(),
        2,
        "window [0, 60s)'s count"
    );
    // A timer 5 s after the second window's close: not its window; the
    // scan finds it due.
    w.fire(&mut h, b"k", 135_000, &mut out).unwrap();
    assert_eq!(
        (out.0.len(), h.scans),
        (2, 1),
        "a timer of no window: outputs, scans"
    );
    assert!(h.state.is_empty(), "state left behind: {:?}", h.state);
}
