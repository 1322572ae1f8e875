//! Session windows: a key's bursts of activity (the Go SDK's
//! SessionWindows, with the same state layout).

use super::{append_start, ms, read_start, Base, Emit, Host, Options, Stats, WindowResult};
use crate::{Error, Record};
use std::time::Duration;

/// A key's bursts of activity: records less than `gap` apart (ts within
/// `gap` of a session's `[start, end]`, bounds included) join one session,
/// and a record that bridges two sessions merges them (with the
/// aggregator's [`super::Aggregator::merge`]). Keep them in a
/// `thread_local!`, like [`super::TimeWindows`].
///
/// A session's state entry is `(key, name | 0 | start)` → `end` (8 bytes
/// big endian) | aggregate; its timer is `(key, end + gap + grace + 1)`. A
/// merge moves a session's end and so its close time: the old timer is
/// left to fire and finds nothing due (it may be another windows' timer
/// too, since timers are one per (key, at)).
pub struct SessionWindows {
    b: Base,
    gap: i64,
}

/// Session windows of inactivity `gap` (> 0, whole milliseconds).
pub fn sessions(gap: Duration, opt: Options) -> Result<SessionWindows, String> {
    let b = Base::new(opt)?;
    let g = ms(gap, "gap")?;
    if g == 0 {
        return Err("window: a session's gap must be > 0".into());
    }
    if g.checked_add(b.grace)
        .and_then(|n| n.checked_add(1))
        .is_none()
    {
        return Err("window: gap + grace overflows".into());
    }
    Ok(SessionWindows { b, gap: g })
}

struct Session {
    start: i64,
    end: i64,
    agg: Vec<u8>,
}

impl SessionWindows {
    /// The counts so far (`dropped` stays 0: a session record is late or
    /// not).
    pub fn stats(&self) -> Stats {
        self.b.stats()
    }

    /// The stream time at which a session ending at `end` closes: Kafka
    /// Streams keeps it while end >= stream time - gap - grace.
    fn close_at(&self, end: i64) -> i64 {
        end + self.gap + self.b.grace + 1
    }

    /// Calls f with key's sessions in start order until it returns false.
    fn each(
        &self,
        h: &mut dyn Host,
        key: &[u8],
        f: &mut dyn FnMut(Session) -> bool,
    ) -> Result<(), Error> {
        let plen = self.b.prefix.len();
        let mut bad: Option<Vec<u8>> = None;
        h.scan(key, &self.b.prefix, &mut |sub, v| {
            let start = match read_start(sub, plen) {
                Some(s) if v.len() >= 8 => s,
                _ => {
                    bad = Some(sub.to_vec());
                    return false;
                }
            };
            let mut e = [0u8; 8];
            e.copy_from_slice(&v[..8]);
            f(Session {
                start,
                end: i64::from_be_bytes(e),
                agg: v[8..].to_vec(),
            })
        })
        .map_err(|e| self.b.errno(e))?;
        match bad {
            Some(sub) => Err(Error::terminal(format!(
                "window: sessions {:?}: malformed entry {:02x?}",
                self.b.name, sub
            ))),
            None => Ok(()),
        }
    }

    /// Adds the record to its key's session: a new one `[ts, ts]`, merged
    /// with every open session it touches. A record that would only make a
    /// closed session (a new one past its grace) is late.
    pub fn add(&self, h: &mut dyn Host, r: &Record<'_>, out: &mut dyn Emit) -> Result<(), Error> {
        let ts = self.b.record_time(r, self.gap + self.b.grace + 1)?;
        let st = h.stream_time().map_err(|e| self.b.errno(e))?.max(ts);
        let key = r.key.unwrap_or(&[]);
        let gap = self.gap;
        let mut found: Vec<Session> = Vec::new();
        self.each(h, key, &mut |s| {
            if s.start > ts + gap {
                return false; // sorted by start: no later one touches ts
            }
            if s.end >= ts - gap {
                found.push(s);
            }
            true
        })?;
        let (mut start, mut end) = (ts, ts);
        let mut agg: Option<Vec<u8>> = None;
        for s in &found {
            start = start.min(s.start);
            end = end.max(s.end);
            agg = Some(match agg {
                None => s.agg.clone(),
                Some(a) => self.b.agg.merge(&a, &s.agg)?,
            });
        }
        if self.close_at(end) <= st {
            // Only a record that joins no session lands here: a session
            // still in the state is open, and the merge ends at or after it.
            return self.b.late(r, out);
        }
        let agg = self.b.agg.add(agg.as_deref(), r.value)?;
        let mut old_close = -1;
        for s in &found {
            if s.start != start {
                h.delete(key, &self.sub(s.start))
                    .map_err(|e| self.b.errno(e))?;
            } else {
                old_close = self.close_at(s.end);
            }
        }
        let mut val = Vec::with_capacity(8 + agg.len());
        val.extend_from_slice(&end.to_be_bytes());
        val.extend_from_slice(&agg);
        h.put(key, &self.sub(start), &val)
            .map_err(|e| self.b.errno(e))?;
        self.b.count(|s| s.records += 1);
        let close = self.close_at(end);
        if close != old_close {
            h.set_timer(key, close).map_err(|e| self.b.errno(e))?;
        }
        Ok(())
    }

    fn sub(&self, start: i64) -> Vec<u8> {
        let mut sub = self.b.prefix.clone();
        append_start(&mut sub, start);
        sub
    }

    /// Closes `key`'s sessions whose close time is at or before `at`,
    /// emitting their results (`end` is the session's last timestamp,
    /// inclusive) in start order and deleting them.
    pub fn fire(
        &self,
        h: &mut dyn Host,
        key: &[u8],
        at: i64,
        out: &mut dyn Emit,
    ) -> Result<(), Error> {
        let mut due: Vec<WindowResult> = Vec::new();
        self.each(h, key, &mut |s| {
            if self.close_at(s.end) <= at {
                due.push(WindowResult {
                    key: key.to_vec(),
                    start: s.start,
                    end: s.end,
                    agg: s.agg,
                });
            }
            true
        })?;
        for res in &due {
            h.delete(key, &self.sub(res.start))
                .map_err(|e| self.b.errno(e))?;
            self.b.emit(res, out)?;
        }
        Ok(())
    }
}
