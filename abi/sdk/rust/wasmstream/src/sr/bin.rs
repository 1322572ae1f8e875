//! The Avro binary encoding's primitives, for the codecs
//! `wasmstream gen avro --lang rust` writes (they call nothing else):
//! zig-zag varints, IEEE floats little-endian, length-prefixed strings and
//! array blocks. Every length and block count is checked against the bytes
//! left before anything is allocated: a hostile payload cannot make a
//! decoder allocate more than its own size.

use std::fmt;

/// A payload that does not decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn short() -> Error {
    Error("the payload ends inside a value".to_string())
}

/// Appends `v` as a zig-zag varint (Avro's int and long).
#[inline]
pub fn put_long(b: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    while u >= 0x80 {
        b.push(u as u8 | 0x80);
        u >>= 7;
    }
    b.push(u as u8);
}

/// Appends `s`, length-prefixed.
#[inline]
pub fn put_str(b: &mut Vec<u8>, s: &str) {
    put_long(b, s.len() as i64);
    b.extend_from_slice(s.as_bytes());
}

/// Reads Avro binary values from the front of a slice.
pub struct Reader<'a> {
    pub b: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads a zig-zag varint of at most 10 bytes.
    #[inline]
    pub fn long(&mut self) -> Result<i64, Error> {
        let mut u: u64 = 0;
        for (i, &c) in self.b.iter().enumerate().take(10) {
            if i == 9 && c > 1 {
                // the tenth byte holds the 64th bit only
                return Err(Error("a varint overflows 64 bits".to_string()));
            }
            u |= ((c & 0x7f) as u64) << (7 * i);
            if c < 0x80 {
                self.b = &self.b[i + 1..];
                return Ok((u >> 1) as i64 ^ -((u & 1) as i64));
            }
        }
        Err(short()) // the bytes end inside the varint
    }

    /// Reads a zig-zag varint of at most 5 bytes and 32 bits (Avro's int;
    /// a longer encoding of a small number is refused, as the Go SDK's
    /// resolving path refuses it).
    pub fn int(&mut self) -> Result<i32, Error> {
        let mut u: u32 = 0;
        for (i, &c) in self.b.iter().enumerate().take(5) {
            if i == 4 && c > 0x0f {
                // the fifth byte holds bits 28 to 31 only
                return Err(Error("an int varint overflows 32 bits".to_string()));
            }
            u |= ((c & 0x7f) as u32) << (7 * i);
            if c < 0x80 {
                self.b = &self.b[i + 1..];
                return Ok((u >> 1) as i32 ^ -((u & 1) as i32));
            }
        }
        Err(short()) // the bytes end inside the varint
    }

    /// Reads one byte, 0 or 1.
    pub fn boolean(&mut self) -> Result<bool, Error> {
        match self.b.first() {
            Some(&c) if c <= 1 => {
                self.b = &self.b[1..];
                Ok(c == 1)
            }
            Some(&c) => Err(Error(format!("boolean byte 0x{:02x}", c))),
            None => Err(short()),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        if self.b.len() < N {
            return Err(short());
        }
        let mut a = [0u8; N];
        a.copy_from_slice(&self.b[..N]);
        self.b = &self.b[N..];
        Ok(a)
    }

    /// Reads 4 bytes, little-endian.
    pub fn float(&mut self) -> Result<f32, Error> {
        Ok(f32::from_le_bytes(self.take::<4>()?))
    }

    /// Reads 8 bytes, little-endian.
    pub fn double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_le_bytes(self.take::<8>()?))
    }

    /// Reads a length-prefixed string, which must be UTF-8.
    pub fn string(&mut self) -> Result<String, Error> {
        let n = self.long()?;
        if n < 0 || n as u64 > self.b.len() as u64 {
            return Err(if n < 0 {
                Error(format!("negative length {}", n))
            } else {
                short()
            });
        }
        let (s, rest) = self.b.split_at(n as usize);
        self.b = rest;
        match std::str::from_utf8(s) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => Err(Error(format!("a string is not UTF-8: {}", e))),
        }
    }

    /// Reads an array block's item count: 0 ends the array. A count larger
    /// than the bytes left (every item the generated codecs read takes at
    /// least one) is an error, so no block allocates more than the payload.
    pub fn block(&mut self) -> Result<usize, Error> {
        let mut n = self.long()?;
        if n < 0 {
            // a negative count is followed by the block's size in bytes
            n = n
                .checked_neg()
                .ok_or_else(|| Error("block count overflows".to_string()))?;
            self.long()?;
        }
        if n as u64 > self.b.len() as u64 {
            return Err(Error(format!(
                "array block of {} items in {} bytes",
                n,
                self.b.len()
            )));
        }
        Ok(n as usize)
    }

    /// Reads a union's branch index, which must be below `n`.
    pub fn union(&mut self, n: i64) -> Result<i64, Error> {
        let i = self.int()? as i64;
        if i < 0 || i >= n {
            return Err(Error(format!("union branch {} of {}", i, n)));
        }
        Ok(i)
    }
}
