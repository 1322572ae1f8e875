//! The schema registry (ABI.md §7.3, kinds 5–7): the host's registry, for a
//! processor that decodes or encodes records itself. The pipeline must
//! grant it (`async.schema_registry.enabled`; a registration also its
//! subject in `register_subjects`): otherwise the operation fails with an
//! [`OpError`](crate::OpError) that is `refused`. A registry that did not
//! answer is an `OpError` that is not refused: the record may be retried.
//!
//! ```ignore
//! wasmstream::await_op(wasmstream::schema_by_id(id), move |r, out, s| {
//!     let s = s.map_err(|e| if e.refused { Error::terminal(e.msg) } else { Error::retry(e.msg) })?;
//!     // compile s.schema (s.schema_type says which kind), keep it by id
//!     Ok(())
//! })
//! ```
//!
//! The host keeps schemas by id, but each lookup is still an operation (a
//! call back into the guest): keep what you compiled by id. With the `avro`
//! feature, [`crate::sr`] does that, and decodes into the processor's types.

use crate::codec::{put_str, put_u32, DecodeError, Decoder};
use crate::{Op, OP_SCHEMA_BY_ID, OP_SCHEMA_BY_SUBJECT, OP_SCHEMA_REGISTER};

/// The type of a registry schema, as the schema definition encodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
    /// A type this SDK does not know, by its number.
    Other(i32),
}

impl SchemaType {
    fn from_i32(t: i32) -> SchemaType {
        match t {
            0 => SchemaType::Avro,
            1 => SchemaType::Protobuf,
            2 => SchemaType::Json,
            n => SchemaType::Other(n),
        }
    }
    fn to_i32(self) -> i32 {
        match self {
            SchemaType::Avro => 0,
            SchemaType::Protobuf => 1,
            SchemaType::Json => 2,
            SchemaType::Other(n) => n,
        }
    }
}

impl std::fmt::Display for SchemaType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaType::Avro => f.write_str("AVRO"),
            SchemaType::Protobuf => f.write_str("PROTOBUF"),
            SchemaType::Json => f.write_str("JSON"),
            SchemaType::Other(n) => write!(f, "unknown ({})", n),
        }
    }
}

/// A schema a schema refers to: by its name in the referring schema (an
/// import, a type name), and the subject and version it is registered
/// under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A schema definition: its type, its text and the schemas it refers to
/// directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<SchemaReference>,
}

/// A schema as a subject holds it: its id, its version under the subject,
/// and its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectSchema {
    pub id: i32,
    pub version: i32,
    pub schema: Schema,
}

/// The result of [`register_schema`]: the schema's id, and its version
/// under the subject (0 when the registry did not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub id: i32,
    pub version: i32,
}

/// The version of [`schema_by_subject`] that asks for the subject's latest.
pub const SCHEMA_LATEST: i32 = -1;

/// The references one schema definition may have (abi.MaxSchemaReferences).
pub const MAX_SCHEMA_REFERENCES: usize = 1024;

/// Looks up the schema of `id`: its type, text and direct references.
pub fn schema_by_id(id: i32) -> Op<Schema> {
    let mut req = Vec::with_capacity(4);
    put_u32(&mut req, id as u32);
    Op {
        kind: OP_SCHEMA_BY_ID,
        req,
        decode: |b| decode_schema(&b[1..]).map_err(|e| e.to_string()),
    }
}

/// Looks up the schema `subject` holds at `version` ([`SCHEMA_LATEST`]: its
/// latest), with its id and the version it is.
pub fn schema_by_subject(subject: &str, version: i32) -> Op<SubjectSchema> {
    let mut req = Vec::with_capacity(8 + subject.len());
    put_str(&mut req, subject.as_bytes());
    put_u32(&mut req, version as u32);
    Op {
        kind: OP_SCHEMA_BY_SUBJECT,
        req,
        decode: |b| decode_subject_schema(&b[1..]).map_err(|e| e.to_string()),
    }
}

/// Registers `s` under `subject` (the registry's compatibility rules decide
/// whether it may join the subject; its refusal is an `OpError` that is
/// `refused`, with the registry's reason). A schema the subject holds
/// already is answered with its id and version.
pub fn register_schema(subject: &str, s: &Schema) -> Op<Registered> {
    let mut req = Vec::with_capacity(16 + subject.len() + s.schema.len());
    put_str(&mut req, subject.as_bytes());
    append_schema(&mut req, s);
    Op {
        kind: OP_SCHEMA_REGISTER,
        req,
        decode: |b| {
            let mut d = Decoder::new(&b[1..], "schema registered result");
            let r = (|| {
                let id = varint32(&mut d)?;
                let version = varint32(&mut d)?;
                d.finish()?;
                Ok::<_, DecodeError>(Registered { id, version })
            })();
            r.map_err(|e| e.to_string())
        },
    }
}

/// Appends the schema-definition encoding of `s` (ABI.md §7.3: zig-zag
/// varints and sized strings, as Redpanda's transform SDK has it).
pub fn append_schema(b: &mut Vec<u8>, s: &Schema) {
    put_varint(b, s.schema_type.to_i32() as i64);
    put_sized(b, &s.schema);
    put_varint(b, s.references.len() as i64);
    for r in &s.references {
        put_sized(b, &r.name);
        put_sized(b, &r.subject);
        put_varint(b, r.version as i64);
    }
}

/// Appends the subject-schema encoding of `s`: id, version, definition.
pub fn append_subject_schema(b: &mut Vec<u8>, s: &SubjectSchema) {
    put_varint(b, s.id as i64);
    put_varint(b, s.version as i64);
    append_schema(b, &s.schema);
}

/// Appends the payload of a completed registration: id and version.
pub fn append_registered(b: &mut Vec<u8>, id: i32, version: i32) {
    put_varint(b, id as i64);
    put_varint(b, version as i64);
}

/// Decodes a schema definition, the whole of `b`.
pub fn decode_schema(b: &[u8]) -> Result<Schema, DecodeError> {
    let mut d = Decoder::new(b, "schema definition");
    let s = schema_def(&mut d)?;
    d.finish()?;
    Ok(s)
}

/// Decodes a subject schema, the whole of `b`.
pub fn decode_subject_schema(b: &[u8]) -> Result<SubjectSchema, DecodeError> {
    let mut d = Decoder::new(b, "subject schema");
    let id = varint32(&mut d)?;
    let version = varint32(&mut d)?;
    let schema = schema_def(&mut d)?;
    d.finish()?;
    Ok(SubjectSchema {
        id,
        version,
        schema,
    })
}

fn schema_def(d: &mut Decoder<'_>) -> Result<Schema, DecodeError> {
    let schema_type = SchemaType::from_i32(varint32(d)?);
    let schema = sized(d)?;
    let n = varint32(d)?;
    if n < 0 || n as usize > MAX_SCHEMA_REFERENCES {
        return Err(d.error(format!(
            "{} references (at most {})",
            n, MAX_SCHEMA_REFERENCES
        )));
    }
    // Each reference takes at least 3 bytes: the count cannot reserve more
    // than the input holds.
    let mut references = Vec::with_capacity((n as usize).min((d.b.len() - d.off) / 3));
    for _ in 0..n {
        references.push(SchemaReference {
            name: sized(d)?,
            subject: sized(d)?,
            version: varint32(d)?,
        });
    }
    Ok(Schema {
        schema_type,
        schema,
        references,
    })
}

/// Reads a zig-zag varint that fits an i32.
fn varint32(d: &mut Decoder<'_>) -> Result<i32, DecodeError> {
    let mut ux: u64 = 0;
    let mut shift = 0u32;
    for i in 0..10 {
        let byte = match d.b.get(d.off + i) {
            Some(&b) => b,
            None => return Err(d.error(format!("need a varint, have {} bytes", d.b.len() - d.off))),
        };
        if i == 9 && byte > 1 {
            break;
        }
        ux |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            d.off += i + 1;
            let x = ((ux >> 1) as i64) ^ -((ux & 1) as i64);
            return i32::try_from(x).map_err(|_| d.error("varint out of range".to_string()));
        }
        shift += 7;
    }
    Err(d.error("varint out of range".to_string()))
}

/// Reads a sized string: its length as a varint, then its bytes (UTF-8).
fn sized(d: &mut Decoder<'_>) -> Result<String, DecodeError> {
    let n = varint32(d)?;
    if n < 0 || n as usize > d.b.len() - d.off {
        return Err(d.error(format!(
            "string length {}, have {} bytes",
            n,
            d.b.len() - d.off
        )));
    }
    let s = &d.b[d.off..d.off + n as usize];
    let s = std::str::from_utf8(s)
        .map_err(|_| d.error("string is not UTF-8".to_string()))?
        .to_string();
    d.off += n as usize;
    Ok(s)
}

fn put_varint(b: &mut Vec<u8>, v: i64) {
    let mut ux = ((v << 1) ^ (v >> 63)) as u64;
    while ux >= 0x80 {
        b.push(ux as u8 | 0x80);
        ux >>= 7;
    }
    b.push(ux as u8);
}

fn put_sized(b: &mut Vec<u8>, s: &str) {
    put_varint(b, s.len() as i64);
    b.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{:02x}", x)).collect()
    }

    fn sample() -> SubjectSchema {
        SubjectSchema {
            id: 4,
            version: 1,
            schema: Schema {
                schema_type: SchemaType::Protobuf,
                schema: "\"string\"".to_string(),
                references: vec![SchemaReference {
                    name: "a.proto".to_string(),
                    subject: "a-value".to_string(),
                    version: 300,
                }],
            },
        }
    }

    // The bytes abi/schema.go writes for the same values (AppendSubjectSchema,
    // AppendSchemaBySubject, AppendSchemaRegistered).
    #[test]
    fn encodings_match_go() {
        let mut b = Vec::new();
        append_subject_schema(&mut b, &sample());
        assert_eq!(
            hex(&b),
            "0802021022737472696e6722020e612e70726f746f0e612d76616c7565d804"
        );
        assert_eq!(decode_subject_schema(&b).unwrap(), sample());
        let op = schema_by_subject("orders-value", SCHEMA_LATEST);
        assert_eq!(hex(&op.req), "0c0000006f72646572732d76616c7565ffffffff");
        let mut r = vec![0];
        append_registered(&mut r, 70000, -1);
        assert_eq!(hex(&r[1..]), "e0c50801");
        let op = register_schema("s", &sample().schema);
        assert_eq!(
            (op.decode)(r).unwrap(),
            Registered {
                id: 70000,
                version: -1
            }
        );
    }

    // A decoder refuses what abi/schema.go's refuses: trailing bytes, a
    // string past the end, a reference count over the bound, a varint
    // outside i32.
    #[test]
    fn malformed_refused() {
        let mut b = Vec::new();
        append_subject_schema(&mut b, &sample());
        for n in 0..b.len() {
            assert!(decode_subject_schema(&b[..n]).is_err(), "cut at {}", n);
        }
        let mut long = b.clone();
        long.push(0);
        assert!(decode_subject_schema(&long).is_err());
        let mut many = Vec::new();
        put_varint(&mut many, 0);
        put_sized(&mut many, "x");
        put_varint(&mut many, MAX_SCHEMA_REFERENCES as i64 + 1);
        assert!(decode_schema(&many).unwrap_err().msg.contains("references"));
        let mut big = Vec::new();
        put_varint(&mut big, 1 << 40);
        assert!(decode_subject_schema(&big)
            .unwrap_err()
            .msg
            .contains("out of range"));
    }

    // On the host side the operations read the test registry: an id, a
    // subject's latest and a fixed version, a registration, and what it
    // does not hold refused.
    #[test]
    fn test_registry() {
        crate::reset_test_schemas();
        let s = Schema {
            schema_type: SchemaType::Avro,
            schema: "\"string\"".to_string(),
            references: vec![],
        };
        assert_eq!(crate::add_test_schema("a-value", &s), (1, 1));
        let process = |r: &crate::Record<'_>, _: &mut crate::Emitter| {
            let subject = String::from_utf8(r.key.unwrap_or_default().to_vec()).unwrap();
            crate::await_op(
                schema_by_subject(&subject, SCHEMA_LATEST),
                move |_, _, ss| {
                    let ss = ss.map_err(|e| {
                        crate::Error::terminal(format!("refused {}: {}", e.refused, e.msg))
                    })?;
                    let s2 = Schema {
                        schema: "\"long\"".to_string(),
                        ..ss.schema.clone()
                    };
                    crate::await_op(register_schema(&subject, &s2), move |_, _, reg| {
                        let reg = reg.map_err(|e| crate::Error::terminal(e.msg))?;
                        crate::await_op(schema_by_id(reg.id), move |_, out, got| {
                            let got = got.map_err(|e| crate::Error::terminal(e.msg))?;
                            let v = format!("{} {} {} {}", ss.id, reg.id, reg.version, got.schema);
                            out.emit(&crate::Output {
                                value: Some(v.as_bytes()),
                                ..crate::Output::default()
                            })?;
                            Ok(())
                        })
                    })
                },
            )
        };
        let rec = crate::TestRecord {
            key: Some(b"a-value".to_vec()),
            ..crate::TestRecord::default()
        };
        let res = crate::run(process, &rec);
        assert_eq!(res.status, crate::Status::Ok, "{:?}", res.error);
        assert_eq!(
            res.outputs[0].value.as_deref(),
            Some(&b"1 2 2 \"long\""[..])
        );
        let rec = crate::TestRecord {
            key: Some(b"nobody-value".to_vec()),
            ..crate::TestRecord::default()
        };
        let res = crate::run(process, &rec);
        assert_eq!(res.status, crate::Status::Fail);
        assert!(res.error.unwrap().contains(
            "refused true: schema registry: subject \"nobody-value\" version 0: not found"
        ));
        crate::reset_test_schemas();
    }
}
