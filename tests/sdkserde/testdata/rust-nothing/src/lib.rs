//! rust-nothing is the baseline of BenchmarkSDKSerde: the rust-avro-serde
//! example's processor without its decode and encode — the same SDK path
//! (sr::run, its held outputs), the value emitted as it came.

use wasmstream::{sr, Emitter, Error, Output, Record};

fn nothing(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    out.emit(&Output {
        key: r.key,
        value: r.value,
        ..Output::default()
    })?;
    Ok(())
}

pub fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    sr::run(r, out, nothing)
}

wasmstream::processor!(process);
