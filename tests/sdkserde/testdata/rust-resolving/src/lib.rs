//! rust-resolving is plugins/examples/rust-avro-serde with serde structs
//! of its own instead of the generated ones: every record decodes and
//! encodes through sr's resolving path (apache-avro's serde), as a record
//! whose schema differs from the generated one does. BenchmarkSDKSerde
//! sets it beside the example.

use serde::{Deserialize, Serialize};
use wasmstream::{sr, Emitter, Error, Output, Record};

#[derive(Deserialize, Serialize)]
#[allow(dead_code)]
struct Order {
    id: i64,
    customer: String,
    amount: f64,
    placed_at: i64,
    items: Vec<String>,
    coupon: Option<String>,
    priority: i32,
}

#[derive(Deserialize, Serialize)]
struct OrderTotal {
    id: i64,
    customer: String,
    items: i32,
    total: f64,
    placed_at: i64,
    coupon: Option<String>,
}

fn total(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let o: Order = sr::decode(r.value)?;
    let total = if o.coupon.is_some() { o.amount * 0.9 } else { o.amount };
    let t = OrderTotal {
        id: o.id,
        customer: o.customer,
        items: o.items.len() as i32,
        total,
        placed_at: o.placed_at,
        coupon: o.coupon,
    };
    let v = sr::encode("order-totals-value", &t)?;
    out.emit(&Output {
        key: r.key,
        value: Some(&v),
        ..Output::default()
    })?;
    Ok(())
}

fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    sr::run(r, out, total)
}

wasmstream::processor!(process);
