//! A typed serde for records framed by a schema registry (feature `avro`;
//! the Confluent wire format: `0x00`, the schema's id as 4 big-endian
//! bytes, then the Avro payload): [`decode`] reads a framed value into the
//! processor's own type, [`encode`] writes one, both with the apache-avro
//! crate's schema-aware serde (no generic value, no JSON between).
//!
//! ```ignore
//! #[derive(serde::Deserialize, serde::Serialize)]
//! struct Order { id: i64, placed_at: i64, coupon: Option<String>, items: Vec<String> }
//!
//! fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
//!     let o: Order = sr::decode(r.value)?;
//!     let v = sr::encode("orders-out-value", &o)?;
//!     out.emit(&Output { key: r.key, value: Some(&v), ..Output::default() })?;
//!     Ok(())
//! }
//! fn handle(r: &Record, out: &mut Emitter) -> Result<(), Error> { sr::run(r, out, process) }
//! wasmstream::processor!(handle);
//! ```
//!
//! Schemas come from the host's registry through the asynchronous schema
//! operations (ABI.md §7.3; the pipeline grants them with
//! `async.schema_registry.enabled`). A `decode` or `encode` whose schema the
//! instance does not hold yet fails, and [`run`] answers that: it looks the
//! schema up, compiles and keeps it, and runs the processor again on the
//! same record, whose outputs of the first run are dropped. Each schema is
//! looked up once per instance (a subject's latest again after
//! [`REFRESH_PERIOD`]); every other record decodes and encodes without
//! leaving the guest. In a continuation of the processor's own operations,
//! [`resolve`] does the same.
//!
//! A struct generated from its schema by `wasmstream gen avro --lang rust
//! SCHEMA.avsc` has a codec of its own ([`AvroCodec`]): [`decode_codec`]
//! and [`append_encode_codec`] use it, with no serde, for a record whose
//! schema is the generated one (the same Parsing Canonical Form
//! fingerprint), and the resolving path for any other, so a schema that
//! evolved is still read and written.
//!
//! Avro only: a schema of another type, or one with registry references,
//! fails the record terminally, naming the schema. The compiled schemas
//! live for the instance (the datum readers borrow them): at most
//! [`MAX_SCHEMAS`], past which a new one fails the record terminally.

use crate::{await_op, codec, schema_by_id, schema_by_subject, sys, Emitter, Error, Record};
use crate::{OpError, Schema, SchemaType, SCHEMA_LATEST};
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::writer::datum::GenericDatumWriter;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long `encode` keeps a subject's latest schema before it asks again
/// (the host's own `schema_registry.refresh_period` default). A refresh
/// the registry does not answer keeps the schema in hand.
pub const REFRESH_PERIOD: Duration = Duration::from_secs(300);

/// How many encodes with a subject's latest pass between two readings of
/// the clock (a reading is a host call).
const REFRESH_EVERY: u32 = 256;

/// The compiled schemas an instance keeps.
pub const MAX_SCHEMAS: usize = 256;

/// How often one record's processor runs at most: each run past the first
/// follows a schema lookup.
const MAX_RUNS: u32 = 8;

pub mod bin;

/// A record type with an Avro codec of its own, generated from its schema
/// by `wasmstream gen avro --lang rust` (field by field, no serde, no
/// values in between).
pub trait AvroRecord: Sized {
    /// Appends the value's Avro binary encoding to `b`.
    fn append_avro(&self, b: &mut Vec<u8>);
    /// Reads a value from the front of `r`.
    fn read_avro(r: &mut bin::Reader<'_>) -> Result<Self, bin::Error>;
}

/// The top-level record of a generated codec: [`decode_codec`] and
/// [`append_encode_codec`] use its codec when the record's schema (the
/// frame's, the subject's latest) has `FINGERPRINT`, and the resolving
/// path (serde) otherwise: a schema that evolved past the generated one is
/// still read and written, only slower.
pub trait AvroCodec: AvroRecord {
    /// CRC-64-AVRO of the Parsing Canonical Form of the schema the codec
    /// was generated from.
    const FINGERPRINT: u64;
}

/// A compiled schema: its reader and writer borrow it for the instance's
/// life; its fingerprint is what a generated codec is compared with
/// (computed once per schema, so a record pays one comparison).
struct Compiled {
    reader: GenericDatumReader<'static>,
    writer: GenericDatumWriter<'static>,
    fingerprint: u64,
}

struct Latest {
    id: i32,
    compiled: &'static Compiled,
    fetched: Instant,
    uses: u32,
}

/// What a `decode` or `encode` missed: a schema id, or a subject's latest
/// (stale: due for a refresh, still usable).
#[derive(Clone)]
enum Missing {
    Id(i32),
    Subject(String, bool),
}

#[derive(Default)]
struct Cache {
    by_id: HashMap<i32, &'static Compiled>,
    by_subject: HashMap<String, Latest>,
    compiled: usize,
    missing: Option<Missing>,
    held: Vec<u8>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Forgets the schemas looked up by id and subject (a processor's tests
/// call it with [`crate::reset_test_schemas`]; what was compiled stays
/// allocated).
pub fn reset() {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.by_id.clear();
        c.by_subject.clear();
        c.missing = None;
    })
}

/// The schema id of a framed value, and its payload.
pub fn schema_id(value: Option<&[u8]>) -> Result<(i32, &[u8]), Error> {
    const FRAME: &str = "sr: not framed (a Confluent frame is 0x00, a 4-byte big-endian schema id, then the payload)";
    match value {
        None => Err(Error::terminal(format!("{}: the value is null", FRAME))),
        Some(v) if v.len() < 5 => Err(Error::terminal(format!(
            "{}: the value has {} bytes",
            FRAME,
            v.len()
        ))),
        Some(v) if v[0] != 0 => Err(Error::terminal(format!(
            "{}: the value starts with 0x{:02x}",
            FRAME, v[0]
        ))),
        Some(v) => Ok((i32::from_be_bytes([v[1], v[2], v[3], v[4]]), &v[5..])),
    }
}

/// How the error of a miss ends.
const MISSING_SUFFIX: &str = "is not looked up yet (sr::run or sr::resolve looks it up)";

fn missing(m: Missing) -> Error {
    let msg = match &m {
        Missing::Id(id) => format!("sr: schema {} {}", id, MISSING_SUFFIX),
        Missing::Subject(s, _) => format!(
            "sr: the latest schema of subject {:?} {}",
            s, MISSING_SUFFIX
        ),
    };
    CACHE.with(|c| c.borrow_mut().missing = Some(m));
    Error::retry(msg)
}

/// Decodes the framed `value` into a `T` with the schema the frame names
/// (serde: a record into a struct by field names; a `["null", T]` union
/// into an `Option`; a timestamp-millis into an `i64`). A value that is
/// not framed, or does not decode, is a terminal error.
pub fn decode<T: DeserializeOwned>(value: Option<&[u8]>) -> Result<T, Error> {
    let (id, payload, c) = by_frame(value)?;
    let mut rest = payload;
    let v = c
        .reader
        .read_deser(&mut rest)
        .map_err(|e| Error::terminal(format!("sr: decode with schema {}: {}", id, e)))?;
    all_read(id, rest)?;
    Ok(v)
}

/// Decodes the framed `value` as [`decode`] does, with `T`'s generated
/// codec when the frame's schema is the one it was generated for.
pub fn decode_codec<T: AvroCodec + DeserializeOwned>(value: Option<&[u8]>) -> Result<T, Error> {
    let (id, payload, c) = by_frame(value)?;
    if c.fingerprint != T::FINGERPRINT {
        return decode(value);
    }
    let mut r = bin::Reader { b: payload };
    let v = T::read_avro(&mut r)
        .map_err(|e| Error::terminal(format!("sr: decode with schema {}: {}", id, e)))?;
    all_read(id, r.b)?;
    Ok(v)
}

/// The schema id, payload and compiled schema of a framed value.
fn by_frame(value: Option<&[u8]>) -> Result<(i32, &[u8], &'static Compiled), Error> {
    let (id, payload) = schema_id(value)?;
    let c = CACHE.with(|c| c.borrow().by_id.get(&id).copied());
    let c = c.ok_or_else(|| missing(Missing::Id(id)))?;
    Ok((id, payload, c))
}

/// Fails a decode that left bytes after the value.
fn all_read(id: i32, rest: &[u8]) -> Result<(), Error> {
    if !rest.is_empty() {
        return Err(Error::terminal(format!(
            "sr: decode with schema {}: {} bytes after the value",
            id,
            rest.len()
        )));
    }
    Ok(())
}

/// Returns `v` encoded with the latest schema of `subject`, framed.
pub fn encode<T: Serialize>(subject: &str, v: &T) -> Result<Vec<u8>, Error> {
    let mut b = Vec::new();
    append_encode(&mut b, subject, v)?;
    Ok(b)
}

/// Appends `v` encoded with the latest schema of `subject`, framed, to `b`
/// (reuse `b` from record to record). A `v` that does not fit the schema
/// is a terminal error.
pub fn append_encode<T: Serialize>(b: &mut Vec<u8>, subject: &str, v: &T) -> Result<(), Error> {
    let (id, c) = latest(subject)?;
    append_with(b, id, c, v)
}

/// Returns `v` encoded with the latest schema of `subject`, framed, as
/// [`encode`] does, with `T`'s generated codec when that schema is the one
/// it was generated for.
pub fn encode_codec<T: AvroCodec + Serialize>(subject: &str, v: &T) -> Result<Vec<u8>, Error> {
    let mut b = Vec::new();
    append_encode_codec(&mut b, subject, v)?;
    Ok(b)
}

/// Appends `v` encoded with the latest schema of `subject`, framed, to `b`,
/// as [`append_encode`] does, with `T`'s generated codec when that schema
/// is the one it was generated for.
pub fn append_encode_codec<T: AvroCodec + Serialize>(
    b: &mut Vec<u8>,
    subject: &str,
    v: &T,
) -> Result<(), Error> {
    let (id, c) = latest(subject)?;
    if c.fingerprint != T::FINGERPRINT {
        return append_with(b, id, c, v);
    }
    b.push(0);
    b.extend_from_slice(&id.to_be_bytes());
    v.append_avro(b);
    Ok(())
}

/// The id and compiled schema of the latest schema of `subject`.
fn latest(subject: &str) -> Result<(i32, &'static Compiled), Error> {
    let found = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let l = c.by_subject.get_mut(subject)?;
        l.uses += 1;
        if l.uses >= REFRESH_EVERY {
            l.uses = 0;
            if l.fetched.elapsed() >= REFRESH_PERIOD {
                return Some(Err(()));
            }
        }
        Some(Ok((l.id, l.compiled)))
    });
    match found {
        None => Err(missing(Missing::Subject(subject.to_string(), false))),
        Some(Err(())) => Err(missing(Missing::Subject(subject.to_string(), true))),
        Some(Ok(found)) => Ok(found),
    }
}

/// Appends `v` encoded with schema `id`, framed, to `b`.
pub fn append_encode_id<T: Serialize>(b: &mut Vec<u8>, id: i32, v: &T) -> Result<(), Error> {
    let c = CACHE.with(|c| c.borrow().by_id.get(&id).copied());
    let c = c.ok_or_else(|| missing(Missing::Id(id)))?;
    append_with(b, id, c, v)
}

fn append_with<T: Serialize>(b: &mut Vec<u8>, id: i32, c: &Compiled, v: &T) -> Result<(), Error> {
    let n = b.len();
    b.push(0);
    b.extend_from_slice(&id.to_be_bytes());
    if let Err(e) = c.writer.write_ser(b, v) {
        b.truncate(n);
        return Err(Error::terminal(format!(
            "sr: encode with schema {}: {}",
            id, e
        )));
    }
    Ok(())
}

/// Compiles the schema registered as `id`, for the instance's life.
fn compile(id: i32, s: &Schema) -> Result<&'static Compiled, Error> {
    if s.schema_type != SchemaType::Avro {
        return Err(Error::terminal(format!(
            "sr: schema {} is {}: sr reads Avro only",
            id, s.schema_type
        )));
    }
    if let Some(r) = s.references.first() {
        return Err(Error::terminal(format!(
            "sr: schema {} has {} registry references (the first {:?}, subject {:?}): sr does not resolve references",
            id,
            s.references.len(),
            r.name,
            r.subject
        )));
    }
    if CACHE.with(|c| c.borrow().compiled) >= MAX_SCHEMAS {
        return Err(Error::terminal(format!(
            "sr: schema {}: the instance holds {} compiled schemas already (sr::MAX_SCHEMAS)",
            id, MAX_SCHEMAS
        )));
    }
    let schema = apache_avro::Schema::parse_str(&s.schema)
        .map_err(|e| Error::terminal(format!("sr: schema {} does not compile: {}", id, e)))?;
    // The reader and writer borrow the schema: both live as long as the
    // instance, counted against MAX_SCHEMAS.
    let schema: &'static apache_avro::Schema = Box::leak(Box::new(schema));
    let bad = |e: apache_avro::Error| {
        Error::terminal(format!("sr: schema {} does not compile: {}", id, e))
    };
    let reader = GenericDatumReader::builder(schema).build().map_err(bad)?;
    let writer = GenericDatumWriter::builder(schema).build().map_err(bad)?;
    CACHE.with(|c| c.borrow_mut().compiled += 1);
    Ok(Box::leak(Box::new(Compiled {
        reader,
        writer,
        fingerprint: fingerprint(schema),
    })))
}

/// The CRC-64-AVRO fingerprint of the schema's Parsing Canonical Form, as
/// the Avro specification defines it (and `wasmstream gen avro` and the Go
/// SDK compute it). apache-avro's canonical form keeps a primitive with a
/// logical type as an object (`{"type":"long"}`) where the specification
/// reduces it to its name (`"long"`): the object forms are rewritten (a
/// name cannot hold a quote or a brace, and defaults are not in the
/// form, so nothing else can look like one).
fn fingerprint(schema: &apache_avro::Schema) -> u64 {
    let mut form = schema.canonical_form();
    for p in [
        "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    ] {
        form = form.replace(
            &format!("{{\"type\":\"{}\"}}", p),
            &format!("\"{}\"", p),
        );
    }
    rabin(form.as_bytes())
}

/// CRC-64-AVRO (the specification's Rabin fingerprint).
fn rabin(b: &[u8]) -> u64 {
    const EMPTY: u64 = 0xc15d213aa4d7a795;
    let mut table = [0u64; 256];
    for (i, t) in table.iter_mut().enumerate() {
        let mut fp = i as u64;
        for _ in 0..8 {
            fp = (fp >> 1) ^ (EMPTY & (fp & 1).wrapping_neg());
        }
        *t = fp;
    }
    b.iter().fold(EMPTY, |fp, &c| {
        (fp >> 8) ^ table[((fp ^ c as u64) & 0xff) as usize]
    })
}

/// Runs `f` on the record with the schema lookups its [`decode`] and
/// [`encode`] calls need done for it: a run that misses a schema has its
/// outputs dropped, the schema is looked up, and `f` runs again once the
/// instance holds it (at most 8 runs a record). A lookup the host refuses
/// (the registry not granted, an unknown id or subject) fails the record
/// terminally; a registry that does not answer, retryably.
///
/// What `f` emits is held until it returns, and handed to the host then:
/// an output the host refuses fails the record when `f` returns. Once `f`
/// returns [`Error::pending`] (it awaits operations of its own), what it
/// emitted goes to the host, and its continuations emit directly; one
/// whose `decode` or `encode` misses a schema answers it with [`resolve`].
pub fn run(
    r: &Record<'_>,
    out: &mut Emitter,
    f: fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
) -> Result<(), Error> {
    run_n(r, out, f, 1)
}

fn run_n(
    r: &Record<'_>,
    out: &mut Emitter,
    f: fn(&Record<'_>, &mut Emitter) -> Result<(), Error>,
    n: u32,
) -> Result<(), Error> {
    let held = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.missing = None;
        std::mem::take(&mut c.held)
    });
    let mut h = Emitter {
        handle: out.handle,
        hold: Some(held),
    };
    let res = f(r, &mut h);
    let mut held = h.hold.take().unwrap_or_default();
    let m = CACHE.with(|c| c.borrow_mut().missing.take());
    let res = match res {
        Err(e) if !e.is_pending() && m.is_some() => {
            held.clear();
            CACHE.with(|c| c.borrow_mut().held = held);
            if n >= MAX_RUNS {
                return Err(Error::terminal(format!(
                    "sr: the processor ran {} times on the record, each time missing a schema: {}",
                    n,
                    e.message()
                )));
            }
            return lookup(m.unwrap(), Box::new(move |r, out| run_n(r, out, f, n + 1)));
        }
        Err(e) if !e.is_pending() => Err(e), // the host discards the outputs
        res => flush(out.handle, &held).map_err(Error::from).and(res),
    };
    held.clear();
    CACHE.with(|c| c.borrow_mut().held = held);
    res
}

/// Hands the held outputs (each a u32 length, then its encoding) to the
/// host.
fn flush(handle: u32, mut held: &[u8]) -> Result<(), crate::Errno> {
    while held.len() >= 4 {
        let n = u32::from_le_bytes([held[0], held[1], held[2], held[3]]) as usize;
        let o = codec::decode_output(&held[4..4 + n]).map_err(|_| crate::Errno::BAD_ENCODING)?;
        sys::emit_output(handle, &o)?;
        held = &held[4 + n..];
    }
    Ok(())
}

type Again = Box<dyn FnOnce(&Record<'_>, &mut Emitter) -> Result<(), Error>>;

/// Answers `err` if a [`decode`] or [`encode`] in this call missed a
/// schema: looks it up and returns what `again` returns once the instance
/// holds it (in the lookup's continuation, where the processor decodes or
/// encodes again). Any other `err` is returned as it is.
pub fn resolve<F>(err: Error, again: F) -> Result<(), Error>
where
    F: FnOnce(&Record<'_>, &mut Emitter) -> Result<(), Error> + 'static,
{
    // The miss recorded is err's only if err is a miss: another error
    // returned after an unanswered miss is not looked up.
    let m = CACHE.with(|c| c.borrow_mut().missing.take());
    match m {
        Some(m) if err.message().ends_with(MISSING_SUFFIX) => lookup(m, Box::new(again)),
        _ => Err(err),
    }
}

fn lookup_failed(what: String, e: OpError) -> Error {
    let msg = format!("sr: look up {}: {}", what, e.msg);
    if e.refused {
        Error::terminal(msg)
    } else {
        Error::retry(msg)
    }
}

fn lookup(m: Missing, then: Again) -> Result<(), Error> {
    match m {
        Missing::Id(id) => await_op(schema_by_id(id), move |r, out, res| {
            let s = res.map_err(|e| lookup_failed(format!("schema {}", id), e))?;
            let c = compile(id, &s)?;
            CACHE.with(|cc| cc.borrow_mut().by_id.insert(id, c));
            then(r, out)
        }),
        Missing::Subject(subject, stale) => {
            await_op(
                schema_by_subject(&subject, SCHEMA_LATEST),
                move |r, out, res| {
                    let ss = match res {
                        Ok(ss) => ss,
                        Err(e) => {
                            let kept = stale
                                && !e.refused
                                && CACHE.with(|c| {
                                    match c.borrow_mut().by_subject.get_mut(&subject) {
                                        Some(l) => {
                                            // The registry did not answer a refresh: the
                                            // schema in hand serves until the next one.
                                            l.fetched = Instant::now();
                                            true
                                        }
                                        None => false,
                                    }
                                });
                            if kept {
                                return then(r, out);
                            }
                            return Err(lookup_failed(
                                format!("the latest schema of subject {:?}", subject),
                                e,
                            ));
                        }
                    };
                    let known = CACHE.with(|c| c.borrow().by_id.get(&ss.id).copied());
                    let c = match known {
                        Some(c) => c,
                        None => {
                            let c = compile(ss.id, &ss.schema).map_err(|e| {
                                Error::terminal(format!(
                                    "{} (subject {:?} version {})",
                                    e.message(),
                                    subject,
                                    ss.version
                                ))
                            })?;
                            CACHE.with(|cc| cc.borrow_mut().by_id.insert(ss.id, c));
                            c
                        }
                    };
                    CACHE.with(|cc| {
                        cc.borrow_mut().by_subject.insert(
                            subject,
                            Latest {
                                id: ss.id,
                                compiled: c,
                                fetched: Instant::now(),
                                uses: 0,
                            },
                        )
                    });
                    then(r, out)
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        add_test_schema, reset_test_schemas, run as run_record, Output, Status, TestRecord,
    };
    use std::cell::Cell;

    thread_local! {
        static RUNS: Cell<u32> = const { Cell::new(0) };
    }

    fn avro(text: &str) -> Schema {
        Schema {
            schema_type: SchemaType::Avro,
            schema: text.to_string(),
            references: vec![],
        }
    }

    fn framed(id: i32, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0];
        b.extend_from_slice(&id.to_be_bytes());
        b.extend_from_slice(payload);
        b
    }

    fn fresh() {
        reset_test_schemas();
        reset();
        RUNS.with(|r| r.set(0));
    }

    // Decodes a framed string, emits a side output, and encodes the string
    // upper-cased with the subject the key names.
    fn upper(r: &Record<'_>, out: &mut Emitter) -> Result<(), Error> {
        RUNS.with(|n| n.set(n.get() + 1));
        let s: String = decode(r.value)?;
        out.emit(&Output {
            topic: "audit",
            value: Some(s.as_bytes()),
            ..Output::default()
        })?;
        let subject = std::str::from_utf8(r.key.unwrap_or_default()).unwrap();
        let v = encode(subject, &s.to_uppercase())?;
        out.emit(&Output {
            value: Some(&v),
            ..Output::default()
        })?;
        Ok(())
    }

    fn rec(subject: &str, value: Option<Vec<u8>>) -> TestRecord {
        TestRecord {
            key: Some(subject.as_bytes().to_vec()),
            value,
            ..TestRecord::default()
        }
    }

    // The first record runs the processor three times (a lookup by id, then
    // by subject, between the runs) and emits once; the next runs it once.
    #[test]
    fn lookups_then_in_hand() {
        fresh();
        let (id, _) = add_test_schema("in-value", &avro("\"string\""));
        let (out_id, _) = add_test_schema("out-value", &avro("{\"type\":\"string\",\"x\":1}"));
        for want_runs in [3, 1] {
            RUNS.with(|r| r.set(0));
            let res = run_record(
                |r, o| run(r, o, upper),
                &rec("out-value", Some(framed(id, b"\x06ada"))),
            );
            assert_eq!(res.status, Status::Ok, "{:?}", res.error);
            assert_eq!(RUNS.with(|r| r.get()), want_runs);
            assert_eq!(res.outputs.len(), 2);
            assert_eq!(res.outputs[0].topic, "audit");
            assert_eq!(res.outputs[0].value.as_deref(), Some(&b"ada"[..]));
            assert_eq!(res.outputs[1].value, Some(framed(out_id, b"\x06ADA")));
        }
        fresh();
    }

    #[test]
    fn terminal_failures() {
        fresh();
        let (id, _) = add_test_schema("in-value", &avro("\"string\""));
        let (proto, _) = add_test_schema(
            "p-value",
            &Schema {
                schema_type: SchemaType::Protobuf,
                ..avro("syntax = \"proto3\";")
            },
        );
        add_test_schema("long-value", &avro("\"long\""));
        for (subject, value, want) in [
            ("", None, "not framed (a Confluent frame is 0x00, a 4-byte big-endian schema id, then the payload): the value is null"),
            ("", Some(vec![0, 0, 1]), "the value has 3 bytes"),
            ("", Some(b"{\"a\":1}".to_vec()), "the value starts with 0x7b"),
            ("", Some(framed(12345, b"\x02a")), "sr: look up schema 12345: schema registry: schema id 12345: not found"),
            ("", Some(framed(proto, b"")), "sr: schema 2 is PROTOBUF: sr reads Avro only"),
            ("", Some(framed(id, b"\x06ab")), "sr: decode with schema 1"),
            ("", Some(framed(id, b"\x02ab")), "sr: decode with schema 1: 1 bytes after the value"),
            ("nobody-value", Some(framed(id, b"\x02a")), "sr: look up the latest schema of subject \"nobody-value\""),
            ("long-value", Some(framed(id, b"\x02a")), "sr: encode with schema 3"),
        ] {
            let res = run_record(|r, o| run(r, o, upper), &rec(subject, value));
            let err = res.error.clone().unwrap_or_default();
            assert!(
                res.status == Status::Fail && err.contains(want),
                "{:?} {}, want a terminal failure saying {:?}",
                res.status,
                err,
                want
            );
        }
        fresh();
    }

    // A processor that misses a new schema on every run stops at the bound.
    #[test]
    fn runs_bounded() {
        fresh();
        for i in 0..20 {
            add_test_schema(
                "s-value",
                &avro(&format!(
                    "{{\"type\":\"fixed\",\"name\":\"F{}\",\"size\":1}}",
                    i
                )),
            );
        }
        let res = run_record(
            |r, o| {
                run(r, o, |_, _| {
                    let n = RUNS.with(|n| {
                        n.set(n.get() + 1);
                        n.get()
                    });
                    decode::<[u8; 1]>(Some(&framed(n as i32, b"x"))).map(|_| ())
                })
            },
            &rec("", None),
        );
        assert_eq!(res.status, Status::Fail);
        assert!(res
            .error
            .unwrap()
            .contains("sr: the processor ran 8 times on the record, each time missing a schema"));
        assert_eq!(RUNS.with(|r| r.get()), 8);
        fresh();
    }

    // In a continuation, resolve answers a missing schema; what was
    // emitted before the wait is the record's.
    #[test]
    fn resolve_in_continuation() {
        fresh();
        let (id, _) = add_test_schema("s-value", &avro("\"string\""));
        fn encode_after(_: &Record<'_>, out: &mut Emitter) -> Result<(), Error> {
            match encode("s-value", &"after") {
                Ok(v) => {
                    out.emit(&Output {
                        value: Some(&v),
                        ..Output::default()
                    })?;
                    Ok(())
                }
                Err(e) => resolve(e, encode_after),
            }
        }
        let res = run_record(
            |r, o| {
                run(r, o, |_, out| {
                    out.emit(&Output {
                        value: Some(b"before"),
                        ..Output::default()
                    })?;
                    crate::await_op(crate::timer(Duration::ZERO), |r, out, _| {
                        encode_after(r, out)
                    })
                })
            },
            &rec("", None),
        );
        assert_eq!(res.status, Status::Ok, "{:?}", res.error);
        assert_eq!(res.outputs.len(), 2);
        assert_eq!(res.outputs[0].value.as_deref(), Some(&b"before"[..]));
        assert_eq!(res.outputs[1].value, Some(framed(id, b"\x0aafter")));
        fresh();
    }
}
