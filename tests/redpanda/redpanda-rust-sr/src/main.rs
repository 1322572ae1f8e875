//! A Redpanda Data Transform reading the schema registry through Redpanda's
//! published Rust crates (redpanda-transform-sdk-sr 1.1.0), unmodified by
//! wasmstream. Each record's value says what to do, as for the Go transform
//! beside it (../redpanda-go-sr/main.go); the output's value is the answer,
//! or "error: " and the SDK's error:
//!
//!   a framed value (0, a 4-byte schema id, the payload)
//!                                  the schema's text, its format in header
//!                                  "type" (0 Avro, 1 Protobuf, 2 JSON), the
//!                                  key "id:<id>"
//!   subject:<subject>:<version>    "id=<id> version=<v> <schema text>"
//!   create:<subject>:<avro schema> "id=<id>": the schema registered
use redpanda_transform_sdk::*;
use redpanda_transform_sdk_sr::*;
use std::cell::RefCell;
use std::error::Error;

fn main() {
    // create_schema takes the client mutably; the callback is an Fn.
    let client = RefCell::new(SchemaRegistryClient::new());
    on_record_written(move |event, writer| my_transform(&mut client.borrow_mut(), event, writer));
}

fn format_number(f: &SchemaFormat) -> &'static str {
    match f {
        SchemaFormat::Avro => "0",
        SchemaFormat::Protobuf => "1",
        SchemaFormat::Json => "2",
    }
}

fn my_transform(
    client: &mut SchemaRegistryClient,
    event: WriteEvent,
    writer: &mut RecordWriter,
) -> std::result::Result<(), Box<dyn Error>> {
    let rec = event.record;
    let value = rec.value().unwrap_or(&[]);
    let text = String::from_utf8_lossy(value).into_owned();
    let mut key: Option<Vec<u8>> = rec.key().map(|k| k.to_vec());
    let mut headers = Vec::new();
    let answer = if let Some(rest) = text.strip_prefix("subject:") {
        let mut parts = rest.splitn(2, ':');
        let subject = parts.next().unwrap_or("");
        let version: i32 = parts.next().unwrap_or("0").parse().unwrap_or(0);
        match client.lookup_schema_by_version(subject, SchemaVersion(version)) {
            Ok(s) => format!("id={} version={} {}", s.id().0, s.version().0, s.schema().schema()),
            Err(e) => format!("error: {e}"),
        }
    } else if let Some(rest) = text.strip_prefix("create:") {
        let mut parts = rest.splitn(2, ':');
        let subject = parts.next().unwrap_or("").to_string();
        let schema = parts.next().unwrap_or("").to_string();
        match client.create_schema(subject, Schema::new_avro(schema, vec![])) {
            Ok(s) => format!("id={}", s.id().0),
            Err(e) => format!("error: {e}"),
        }
    } else {
        match decode_schema_id(value) {
            Err(e) => format!("error: {e}"),
            Ok((id, _)) => match client.lookup_schema_by_id(id) {
                Ok(s) => {
                    key = Some(format!("id:{}", id.0).into_bytes());
                    headers.push(RecordHeader::new(b"type".to_vec(), Some(format_number(s.format()).as_bytes().to_vec())));
                    s.schema().to_string()
                }
                Err(e) => format!("error: {e}"),
            },
        }
    };
    let out = Record::new_with_headers(key, Some(answer.into_bytes()), headers);
    writer.write(&out)?;
    Ok(())
}
