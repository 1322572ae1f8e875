//! The generated Rust codec against the SDK's resolving path (apache-avro's
//! serde): the same bytes written, the same values read, and the codec
//! used only for the schema it was generated for. tests/all.avsc is the Go
//! SDK's abi/guest/sr/testdata/all.avsc without its bytes field (bytes are
//! not generated for Rust); all_avro/mod.rs is generated from it:
//!
//!   wasmstream gen avro --lang rust --out tests/all_avro/mod.rs tests/all.avsc

mod all_avro;

use all_avro::{Address, All, Line};
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::writer::datum::GenericDatumWriter;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use wasmstream::sr::{self, bin, AvroCodec, AvroRecord};
use wasmstream::{add_test_schema, reset_test_schemas, run, Emitter, Error, Output, Record};
use wasmstream::{Schema, SchemaType, Status, TestRecord};

fn all_avsc() -> String {
    std::fs::read_to_string("tests/all.avsc").unwrap()
}

// Values of every generated type: each union's null and non-null (null
// first and second), empty and filled arrays, timestamps before the epoch,
// multi-byte strings and varints.
fn values() -> Vec<All> {
    vec![
        All {
            id: 1,
            name: "ada".into(),
            at_ms: 1700000000123,
            at_us: 1700000000123456,
            address: Address {
                street: "x".into(),
                zip: None,
            },
            ..All::default()
        },
        All {
            id: -1 << 62,
            count: -300,
            flag: true,
            ratio: 1.5,
            amount: -0.1,
            name: "Grüße 世界".into(),
            ref_id: "2c7b3f54-8b55-4a1e-9d5f-2f1c3c1b6d6e".into(),
            at_ms: -1500,
            at_us: -1,
            coupon: Some("SPRING".into()),
            score: Some(1 << 40),
            tags: vec!["a".into(), "".into(), "z".repeat(200)],
            address: Address {
                street: "Main".into(),
                zip: Some(12345),
            },
            previous: Some(Address {
                street: "Old".into(),
                zip: None,
            }),
            lines: vec![
                Line {
                    sku: "tea".into(),
                    qty: 2,
                    at: Some(1700000000123),
                },
                Line {
                    sku: "cake".into(),
                    qty: 1,
                    at: None,
                },
            ],
            maybe_tags: Some(vec![Some("x".into()), None]),
        },
    ]
}

#[test]
fn codec_matches_resolving_path() {
    let schema = apache_avro::Schema::parse_str(&all_avsc()).unwrap();
    let writer = GenericDatumWriter::builder(&schema).build().unwrap();
    let reader = GenericDatumReader::builder(&schema).build().unwrap();
    for (i, v) in values().into_iter().enumerate() {
        let want = writer.write_ser_to_vec(&v).unwrap();
        let mut got = Vec::new();
        v.append_avro(&mut got);
        assert_eq!(got, want, "value {}: the codec's bytes, the resolving path's", i);
        let mut r = bin::Reader { b: &want };
        let via_codec = All::read_avro(&mut r).unwrap();
        assert!(r.b.is_empty());
        let mut rest = &want[..];
        let via_resolving: All = reader.read_deser(&mut rest).unwrap();
        assert_eq!(via_codec, via_resolving, "value {}", i);
        assert_eq!(via_codec, v, "value {}", i);
        // Cut anywhere, the payload is an error, never a panic.
        for n in 0..want.len() {
            let mut r = bin::Reader { b: &want[..n] };
            assert!(All::read_avro(&mut r).is_err(), "value {}: {} of {} bytes", i, n, want.len());
        }
    }
}

thread_local! {
    static READS: Cell<u32> = const { Cell::new(0) };
    static WRITES: Cell<u32> = const { Cell::new(0) };
    static SUBJECT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

// All with its codec's calls counted; serde sees All itself.
#[derive(Debug, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
struct Counting(All);

impl AvroRecord for Counting {
    fn append_avro(&self, b: &mut Vec<u8>) {
        WRITES.with(|w| w.set(w.get() + 1));
        self.0.append_avro(b)
    }
    fn read_avro(r: &mut bin::Reader<'_>) -> Result<Self, bin::Error> {
        READS.with(|c| c.set(c.get() + 1));
        All::read_avro(r).map(Counting)
    }
}

impl AvroCodec for Counting {
    const FINGERPRINT: u64 = All::FINGERPRINT;
}

fn reencode(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let v: Counting = sr::decode_codec(r.value)?;
    let b = SUBJECT.with(|s| sr::encode_codec(&s.borrow(), &v))?;
    out.emit(&Output {
        value: Some(&b),
        ..Output::default()
    })?;
    Ok(())
}

fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    sr::run(r, out, reencode)
}

// all.avsc with its first two fields swapped: another canonical form.
fn reordered() -> String {
    let s = all_avsc();
    let id = r#"{"name": "id", "type": "long"},"#;
    let count = r#"{"name": "count", "type": "int"},"#;
    s.replacen(id, "@ID@", 1)
        .replacen(count, id, 1)
        .replacen("@ID@", count, 1)
}

// Through sr: a record framed with the generated schema decodes and
// encodes with the codec; one framed with a schema that differs decodes
// and encodes through the resolving path. Both write the writer schema's
// bytes (apache-avro's).
#[test]
fn codec_only_for_its_schema() {
    reset_test_schemas();
    sr::reset();
    let avro = |text: &str| Schema {
        schema_type: SchemaType::Avro,
        schema: text.to_string(),
        references: vec![],
    };
    let same = add_test_schema("all-value", &avro(&all_avsc())).0;
    let other_text = reordered();
    assert_ne!(other_text, all_avsc());
    let other = add_test_schema("all2-value", &avro(&other_text)).0;
    for (id, subject, text, codec) in [
        (same, "all-value", all_avsc(), true),
        (other, "all2-value", other_text, false),
    ] {
        let schema = apache_avro::Schema::parse_str(&text).unwrap();
        let writer = GenericDatumWriter::builder(&schema).build().unwrap();
        for (i, v) in values().into_iter().enumerate() {
            let mut value = vec![0];
            value.extend_from_slice(&id.to_be_bytes());
            value.extend_from_slice(&writer.write_ser_to_vec(&v).unwrap());
            READS.with(|c| c.set(0));
            WRITES.with(|c| c.set(0));
            SUBJECT.with(|s| *s.borrow_mut() = subject.to_string());
            let res = run(
                process,
                &TestRecord {
                    value: Some(value.clone()),
                    ..TestRecord::new("t")
                },
            );
            assert_eq!(res.status, Status::Ok, "{:?}", res.error);
            // The last run of the processor is the one with the schemas in
            // hand: it reads and writes once.
            let (reads, writes) = (READS.with(|c| c.get()), WRITES.with(|c| c.get()));
            assert_eq!(
                (reads > 0, writes > 0),
                (codec, codec),
                "schema {} value {}: {} codec reads, {} writes",
                id,
                i,
                reads,
                writes
            );
            assert_eq!(res.outputs[0].value.as_deref(), Some(&value[..]), "schema {} value {}", id, i);
        }
    }
    reset_test_schemas();
}
