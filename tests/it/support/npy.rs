//! A reader of the fixtures' `.npy` files: format 1.0, little-endian, C or Fortran order,
//! the element types `generate.py` and `generate_torch.py` write. (A reader of our own
//! keeps ndarray-npy's parser generator out of every test build.)

use std::path::Path;

use ndarray::{ArrayD, IxDyn, ShapeBuilder};

/// An element type and its NumPy `descr`.
pub trait Npy: Sized {
    /// NumPy's name of the type (`dtype.str`).
    const DESCR: &'static str;
    /// The value of its little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! npy {
    ($($t:ty => $descr:literal),*) => {$(
        impl Npy for $t {
            const DESCR: &'static str = $descr;
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("one element's bytes"))
            }
        }
    )*};
}
npy!(f32 => "<f4", f64 => "<f8", i32 => "<i4", i64 => "<i8", u8 => "|u1");

impl Npy for bool {
    const DESCR: &'static str = "|b1";
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// The array in the `.npy` file at `path`; `None` if the file is missing, is not a
/// version 1.0 `.npy` file, or holds another element type than `T`.
pub fn read_npy<T: Npy>(path: impl AsRef<Path>) -> Option<ArrayD<T>> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(b"\x93NUMPY\x01\x00")?;
    let len = u16::from_le_bytes([*rest.first()?, *rest.get(1)?]) as usize;
    // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
    let header = std::str::from_utf8(rest.get(2..2 + len)?).ok()?;
    let data = &rest[2 + len..];
    let field = |key: &str| header.split(&format!("'{key}': ")).nth(1);
    if field("descr")?.split('\'').nth(1)? != T::DESCR {
        return None;
    }
    let fortran = field("fortran_order")?.starts_with("True");
    let shape = field("shape")?.strip_prefix('(')?.split(')').next()?;
    let shape: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().ok())
        .collect::<Option<_>>()?;
    let size = size_of::<T>();
    if data.len() != shape.iter().product::<usize>() * size {
        return None;
    }
    let values = data.chunks_exact(size).map(T::from_le).collect();
    ArrayD::from_shape_vec(IxDyn(&shape).set_f(fortran), values).ok()
}
