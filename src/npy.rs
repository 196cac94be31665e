//! A reader of NumPy `.npy` files (format versions 1, 2 and 3): the header first
//! ([`NpyHeader::read`]: element type, order, shape), so that a caller can refuse a file before
//! allocating for its data, then the data as f64 ([`NpyHeader::read_values`]). Only what wall
//! geometries need: little-endian (or one-byte) numbers and booleans, C order.

use std::io::Read;

/// The element types read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyType {
    F32,
    F64,
    U8,
    I8,
    Bool,
}

impl NpyType {
    /// The descr string of NumPy (`<f4`, `|u1`, ...) as a type; None for any other.
    fn parse(descr: &str) -> Option<NpyType> {
        Some(match descr {
            "<f4" => NpyType::F32,
            "<f8" => NpyType::F64,
            "|u1" | "<u1" => NpyType::U8,
            "|i1" | "<i1" => NpyType::I8,
            "|b1" => NpyType::Bool,
            _ => return None,
        })
    }

    pub fn bytes(self) -> usize {
        match self {
            NpyType::F32 => 4,
            NpyType::F64 => 8,
            NpyType::U8 | NpyType::I8 | NpyType::Bool => 1,
        }
    }

    /// NumPy's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            NpyType::F32 => "float32",
            NpyType::F64 => "float64",
            NpyType::U8 => "uint8",
            NpyType::I8 => "int8",
            NpyType::Bool => "bool",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, NpyType::F32 | NpyType::F64)
    }
}

/// The header of an `.npy` file, the reader left at the start of the data.
#[derive(Debug)]
pub struct NpyHeader {
    pub dtype: NpyType,
    pub shape: Vec<usize>,
}

const MAGIC: &[u8] = b"\x93NUMPY";

impl NpyHeader {
    /// Parse the header of `r`. Errors say what is wrong in words (not .npy, big-endian or
    /// unknown element type, Fortran order, a header that does not parse).
    pub fn read(r: &mut impl Read) -> Result<NpyHeader, String> {
        let mut lead = [0u8; 8];
        r.read_exact(&mut lead)
            .map_err(|_| "not a .npy file (shorter than its magic string)".to_string())?;
        if &lead[..6] != MAGIC {
            return Err("not a .npy file (no \\x93NUMPY magic string)".into());
        }
        let len = match lead[6] {
            1 => {
                let mut b = [0u8; 2];
                r.read_exact(&mut b)
                    .map_err(|e| format!("truncated header: {e}"))?;
                u16::from_le_bytes(b) as usize
            }
            2 | 3 => {
                let mut b = [0u8; 4];
                r.read_exact(&mut b)
                    .map_err(|e| format!("truncated header: {e}"))?;
                u32::from_le_bytes(b) as usize
            }
            v => {
                return Err(format!(
                    ".npy format version {v} is not read (1, 2 or 3 are)"
                ))
            }
        };
        if len > 1 << 20 {
            return Err(format!("a header of {len} bytes is not a .npy header"));
        }
        let mut text = vec![0u8; len];
        r.read_exact(&mut text)
            .map_err(|e| format!("truncated header: {e}"))?;
        let text = String::from_utf8_lossy(&text);
        let descr = dict_value(&text, "descr").ok_or("the header has no 'descr'")?;
        let descr = quoted(descr).ok_or("the header's descr is not a string")?;
        let dtype = NpyType::parse(descr).ok_or_else(|| {
            format!(
                "element type '{descr}' is not read (little-endian float32 or float64, uint8, \
                 int8 or bool are)"
            )
        })?;
        let fortran =
            dict_value(&text, "fortran_order").ok_or("the header has no 'fortran_order'")?;
        if fortran.starts_with("True") {
            return Err(
                "the array is in Fortran order; save it in C order (numpy.ascontiguousarray)"
                    .into(),
            );
        }
        let shape = dict_value(&text, "shape").ok_or("the header has no 'shape'")?;
        let inner = shape
            .strip_prefix('(')
            .and_then(|s| s.find(')').map(|end| &s[..end]))
            .ok_or("the header's shape is not a tuple")?;
        let shape = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('L').parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("the header's shape ({inner}) is not a tuple of sizes"))?;
        Ok(NpyHeader { dtype, shape })
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// The data (after [`NpyHeader::read`] on the same reader) as f64, booleans as 0 and 1.
    pub fn read_values(&self, r: &mut impl Read) -> Result<Vec<f64>, String> {
        let n = self.elements();
        let size = self.dtype.bytes();
        let mut raw = vec![0u8; n * size];
        r.read_exact(&mut raw).map_err(|_| {
            format!(
                "the data is shorter than the header's shape {:?} needs ({} bytes)",
                self.shape,
                n * size
            )
        })?;
        Ok(raw
            .chunks_exact(size)
            .map(|b| match self.dtype {
                NpyType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                NpyType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
                NpyType::U8 | NpyType::Bool => b[0] as f64,
                NpyType::I8 => b[0] as i8 as f64,
            })
            .collect())
    }
}

/// The string in quotes at the start of `text`.
fn quoted(text: &str) -> Option<&str> {
    let q = text.chars().next().filter(|&c| c == '\'' || c == '"')?;
    let rest = &text[1..];
    rest.find(q).map(|end| &rest[..end])
}

/// The text after `'key':` in the header's dict, up to the end of the dict.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text
        .find(&format!("'{key}'"))
        .or_else(|| text.find(&format!("\"{key}\"")))?;
    let rest = &text[at + key.len() + 2..];
    let colon = rest.find(':')?;
    Some(rest[colon + 1..].trim_start())
}

/// The bytes of an `.npy` file (version 1, C order) holding `values` as little-endian f64
/// (`descr` "<f8"), f32 ("<f4") or one byte ("|u1", "|b1") per value, of `shape`: for tests
/// and examples that make geometries.
pub fn write_bytes(descr: &str, shape: &[usize], values: &[f64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    let tuple = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    // magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in values {
        match descr {
            "<f8" => out.extend_from_slice(&v.to_le_bytes()),
            "<f4" => out.extend_from_slice(&(v as f32).to_le_bytes()),
            _ => out.push(v as u8),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes` with the first `from` replaced by `to` (of the same length).
    fn replaced(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
        bytes[at..at + to.len()].copy_from_slice(to);
        bytes
    }

    #[test]
    fn a_written_array_reads_back() {
        for descr in ["<f8", "<f4", "|u1", "|b1"] {
            let values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.0];
            let bytes = write_bytes(descr, &[1, 2, 3], &values);
            let mut r = &bytes[..];
            let h = NpyHeader::read(&mut r).unwrap();
            assert_eq!(h.shape, vec![1, 2, 3]);
            assert_eq!(h.read_values(&mut r).unwrap(), values);
        }
    }

    #[test]
    fn what_is_refused() {
        let bad = |bytes: Vec<u8>| NpyHeader::read(&mut &bytes[..]).unwrap_err();
        assert!(bad(b"P6 not numpy".to_vec()).contains("not a .npy file"));
        let f8 = write_bytes("<f8", &[2], &[0.0, 1.0]);
        assert!(bad(replaced(f8, b"<f8", b">f8")).contains("'>f8' is not read"));
        let f4 = write_bytes("<f4", &[2, 2], &[0.0; 4]);
        assert!(bad(replaced(f4, b"False", b"True ")).contains("Fortran order"));
        let bytes = write_bytes("<f8", &[4], &[0.0; 2]);
        let mut r = &bytes[..];
        let h = NpyHeader::read(&mut r).unwrap();
        assert!(h.read_values(&mut r).unwrap_err().contains("shorter"));
    }
}
