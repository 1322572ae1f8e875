//! Each record is written back unchanged (identity: key, value and headers,
//! null and empty kept apart), unless its value is a directive, as the Go
//! transform beside it (../go/main.go) does:
//!
//!   route:<topic>  written unchanged to <topic> and to the default output
//!   env            the value becomes the REDPANDA_ and TEST_ variables, sorted
//!   time           the value becomes the wall clock in Unix milliseconds
//!   panic          the transform panics
//!   twice          written twice
use redpanda_transform_sdk::*;
use std::error::Error;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    on_record_written(my_transform);
}

fn my_transform(event: WriteEvent, writer: &mut RecordWriter) -> Result<(), Box<dyn Error>> {
    let rec = event.record;
    let value = rec.value().unwrap_or(&[]).to_vec();
    let mut out = BorrowedRecord::new_with_headers(rec.key(), rec.value(), rec.headers().to_vec());
    let replaced: Vec<u8>;
    if let Some(topic) = value.strip_prefix(b"route:") {
        let topic = String::from_utf8(topic.to_vec())?;
        writer.write_with_options(&out, WriteOptions::to_topic(&topic))?;
    } else if value == b"env" {
        let mut env: Vec<String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("REDPANDA_") || k.starts_with("TEST_"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        env.sort();
        replaced = env.join("\n").into_bytes();
        out = BorrowedRecord::new_with_headers(rec.key(), Some(&replaced), rec.headers().to_vec());
    } else if value == b"time" {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
        replaced = ms.to_string().into_bytes();
        out = BorrowedRecord::new_with_headers(rec.key(), Some(&replaced), rec.headers().to_vec());
    } else if value == b"panic" {
        panic!("asked to panic");
    } else if value == b"twice" {
        writer.write(&out)?;
    }
    writer.write(&out)?;
    Ok(())
}
