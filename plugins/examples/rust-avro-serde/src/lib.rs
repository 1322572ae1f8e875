//! rust-avro-serde is a wasmstream processor that reads records framed by a
//! schema registry into a Rust struct and writes a struct of its own back,
//! framed — the Go example `avro-serde` in Rust, with the same output byte
//! for byte. It uses the SDK's typed serde (`wasmstream::sr`, the `avro`
//! feature), with codecs generated from the schemas (`wasmstream gen
//! avro`): no serde, no JSON between.
//!
//! Input: an `Order` (schemas/order.avsc of the Go example) framed with its
//! schema id. Output: an `OrderTotal` (schemas/order-total.avsc), encoded
//! with the latest schema of the subject `$OUTPUT_SUBJECT` (default
//! `order-totals-value`): the order's id, customer, time and coupon, the
//! number of items and the total, 10% off with a coupon. The pipeline grants the lookups with
//! `async.schema_registry.enabled: true`; the first record of an instance
//! looks its schemas up, the others decode and encode in the guest.
//!
//! A value that is not framed, a schema that is not Avro, or an order the
//! schema does not decode fails the record terminally.
//!
//! Build: cargo build --release --target wasm32-wasip1

use wasmstream::{sr, Emitter, Error, Output, Record};

// Order (schemas/order.avsc of the Go example) and OrderTotal
// (schemas/order-total.avsc) are generated with their codecs, which sr
// uses while the records' schemas are the generated ones (a schema that
// evolved is read and written by the resolving path, serde):
//
//   wasmstream gen avro --lang rust --out src/order.rs ../avro-serde/schemas/order.avsc
//   wasmstream gen avro --lang rust --out src/order_total.rs ../avro-serde/schemas/order-total.avsc
mod order;
mod order_total;
pub use order::Order;
pub use order_total::OrderTotal;

/// The subject whose latest schema the output is written with.
pub fn output_subject() -> String {
    std::env::var("OUTPUT_SUBJECT").unwrap_or_else(|_| "order-totals-value".to_string())
}

thread_local! {
    // Read once: the environment is the instance's, and a read is two
    // host calls.
    static OUTPUT_SUBJECT: String = output_subject();
}

pub fn total(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let o: Order = sr::decode_codec(r.value)?;
    let total = if o.coupon.is_some() {
        o.amount * 0.9
    } else {
        o.amount
    };
    let t = OrderTotal {
        id: o.id,
        customer: o.customer,
        items: o.items.len() as i32,
        total,
        placed_at: o.placed_at,
        coupon: o.coupon,
    };
    let v = OUTPUT_SUBJECT.with(|s| sr::encode_codec(s, &t))?;
    out.emit(&Output {
        key: r.key,
        value: Some(&v),
        ..Output::default()
    })?;
    Ok(())
}

pub fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    sr::run(r, out, total)
}

wasmstream::processor!(process);

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::writer::datum::GenericDatumWriter;
    use wasmstream::{
        add_test_schema, reset_test_schemas, run, Schema, SchemaType, Status, TestRecord,
    };

    fn avsc(name: &str) -> String {
        std::fs::read_to_string(format!("../avro-serde/schemas/{}", name)).unwrap()
    }

    fn register(subject: &str, text: &str) -> i32 {
        let s = Schema {
            schema_type: SchemaType::Avro,
            schema: text.to_string(),
            references: vec![],
        };
        add_test_schema(subject, &s).0
    }

    // An Order framed as a producer's serializer frames it (apache-avro
    // directly) becomes its OrderTotal, framed with the output subject's
    // latest schema; plain JSON fails terminally.
    #[test]
    fn totals() {
        reset_test_schemas();
        sr::reset();
        let order_avsc = avsc("order.avsc");
        let total_avsc = avsc("order-total.avsc");
        let in_id = register("orders-value", &order_avsc);
        let out_id = register("order-totals-value", &total_avsc);
        let order_schema = apache_avro::Schema::parse_str(&order_avsc).unwrap();
        let total_schema = apache_avro::Schema::parse_str(&total_avsc).unwrap();
        let cases = [
            (
                Order {
                    id: 1,
                    customer: "ada".into(),
                    amount: 20.0,
                    placed_at: 1700000000123,
                    items: vec!["tea".into(), "cake".into()],
                    coupon: Some("SPRING".into()),
                    priority: 2,
                },
                OrderTotal {
                    id: 1,
                    customer: "ada".into(),
                    items: 2,
                    total: 18.0,
                    placed_at: 1700000000123,
                    coupon: Some("SPRING".into()),
                },
            ),
            (
                Order {
                    id: 2,
                    customer: "bob".into(),
                    amount: 7.5,
                    placed_at: 1700000000123,
                    items: vec![],
                    coupon: None,
                    priority: 0,
                },
                OrderTotal {
                    id: 2,
                    customer: "bob".into(),
                    items: 0,
                    total: 7.5,
                    placed_at: 1700000000123,
                    coupon: None,
                },
            ),
        ];
        for (order, want) in cases {
            let mut value = vec![0];
            value.extend_from_slice(&in_id.to_be_bytes());
            let payload = GenericDatumWriter::builder(&order_schema)
                .build()
                .unwrap()
                .write_ser_to_vec(&order)
                .unwrap();
            value.extend_from_slice(&payload);
            let rec = TestRecord {
                key: Some(b"k".to_vec()),
                value: Some(value),
                ..TestRecord::new("orders")
            };
            let res = run(process, &rec);
            assert_eq!(res.status, Status::Ok, "{:?}", res.error);
            assert_eq!(res.outputs.len(), 1);
            let v = res.outputs[0].value.clone().unwrap();
            assert_eq!(
                &v[..5],
                &[&[0u8][..], &out_id.to_be_bytes()[..]].concat()[..]
            );
            let mut rest = &v[5..];
            let got: OrderTotal =
                apache_avro::reader::datum::GenericDatumReader::builder(&total_schema)
                    .build()
                    .unwrap()
                    .read_deser(&mut rest)
                    .unwrap();
            assert!(rest.is_empty());
            assert_eq!(got, want);
        }
        let rec = TestRecord {
            value: Some(b"{\"id\":1}".to_vec()),
            ..TestRecord::new("orders")
        };
        let res = run(process, &rec);
        assert_eq!(res.status, Status::Fail);
        assert!(res.error.unwrap().contains("not framed"));
        reset_test_schemas();
    }
}
