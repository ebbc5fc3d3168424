//! `.npy` arrays in and out: the file format of the `bilstm` command line.
//!
//! Reading accepts exactly what the stack runs on: little-endian float32 (dtype `'<f4'`), C
//! order, rank 3 `[batch, frames, width]` with the width the model expects. Anything else is
//! refused with an [`NpyError`] naming what the file holds (its dtype descriptor, shape or
//! order) and the file's path. The header is parsed by the `npyz` crate; the data is read as
//! raw little-endian bytes after the file's length has been checked against the header, so a
//! truncated file is reported as such and a lying header cannot make the reader allocate more
//! than the file holds.
//!
//! Writing produces `'<f4'`, C order, rank 3 (numpy's `np.load` reads it).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("x.npy");
//! let values: Vec<f32> = (0..2 * 3 * 4).map(|i| i as f32).collect();
//! bilstm::npy::write_f32_3d(&path, [2, 3, 4], &values)?;
//! let back = bilstm::npy::read_f32_3d(&path, 4)?;
//! assert_eq!(back.shape, [2, 3, 4]);
//! assert_eq!(back.data, values);
//! assert!(bilstm::npy::read_f32_3d(&path, 60).is_err()); // wrong width
//! # Ok(()) }
//! ```

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use npyz::{DType, Order, WriterBuilder};

/// The only dtype read and written: little-endian IEEE float32.
pub const F32_LE: &str = "<f4";

/// Bytes read per step when converting the data (the conversion buffer's size).
const CHUNK_BYTES: usize = 64 * 1024;

/// A rank-3 f32 array, row-major (C order).
#[derive(Debug, Clone, PartialEq)]
pub struct Array3 {
    /// `[batch, frames, width]`.
    pub shape: [usize; 3],
    /// `shape[0] * shape[1] * shape[2]` values, row-major.
    pub data: Vec<f32>,
}

/// Why an `.npy` file could not be read or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpyError {
    /// The file could not be opened or read (missing, a directory, no permission, ...).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The file does not start with a valid `.npy` header.
    #[error("{} is not a valid .npy file: {source}", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// What the header parser found.
        source: io::Error,
    },
    /// The array's dtype is not little-endian float32.
    #[error(
        "{}: dtype {found} is not little-endian float32 ('<f4'); convert with x.astype('<f4')",
        path.display()
    )]
    Dtype {
        /// The file.
        path: PathBuf,
        /// The dtype descriptor in the file, quoted as numpy writes it (`'<f8'`, `'>f4'`, a
        /// record list, ...).
        found: String,
    },
    /// The array is stored in Fortran (column-major) order.
    #[error(
        "{}: array of shape {shape:?} is in Fortran order (fortran_order: True); save a C-order \
         array (np.ascontiguousarray(x))",
        path.display()
    )]
    FortranOrder {
        /// The file.
        path: PathBuf,
        /// The array's shape.
        shape: Vec<u64>,
    },
    /// The array is not rank 3.
    #[error(
        "{}: array of shape {shape:?} has rank {}, expected rank 3 [batch, frames, {width}]",
        path.display(),
        shape.len()
    )]
    Rank {
        /// The file.
        path: PathBuf,
        /// The array's shape.
        shape: Vec<u64>,
        /// The width (last dimension) expected.
        width: usize,
    },
    /// The last dimension is not the expected width.
    #[error(
        "{}: array of shape {shape:?} has {} values per frame, the model takes {width}",
        path.display(),
        shape.last().copied().unwrap_or(0)
    )]
    Width {
        /// The file.
        path: PathBuf,
        /// The array's shape.
        shape: Vec<u64>,
        /// The width expected.
        width: usize,
    },
    /// The shape's element count does not fit this machine's address space.
    #[error("{}: array of shape {shape:?} is too large", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The array's shape.
        shape: Vec<u64>,
    },
    /// The file holds fewer data bytes than its header announces.
    #[error(
        "{}: truncated: the header announces shape {shape:?} ({expected_bytes} data bytes), \
         the file holds {found_bytes}",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The array's shape.
        shape: Vec<u64>,
        /// Data bytes the shape needs.
        expected_bytes: u64,
        /// Data bytes present.
        found_bytes: u64,
    },
    /// The values do not match the shape given to [`write_f32_3d`].
    #[error(
        "{}: {len} values do not fill shape {shape:?}",
        path.display()
    )]
    Length {
        /// The file.
        path: PathBuf,
        /// The shape asked for.
        shape: [usize; 3],
        /// Values given.
        len: usize,
    },
    /// The file could not be created or written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

/// Reads a little-endian f32 rank-3 array `[batch, frames, width]` from the `.npy` file at
/// `path`.
///
/// # Errors
/// [`NpyError::Read`] when the file cannot be opened or read; [`NpyError::Header`] when it is
/// not an `.npy` file; [`NpyError::Dtype`], [`NpyError::FortranOrder`], [`NpyError::Rank`],
/// [`NpyError::Width`] for an array of another kind (checked in that order);
/// [`NpyError::TooLarge`]; [`NpyError::Truncated`] when the data is shorter than the header says.
pub fn read_f32_3d(path: &Path, width: usize) -> Result<Array3, NpyError> {
    let read_err = |source| NpyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let file_bytes = file.metadata().map_err(read_err)?.len();
    let mut reader = BufReader::new(file);
    refuse_overflowing_shape(path, &mut reader, file_bytes)?;
    let header = npyz::NpyHeader::from_reader(&mut reader).map_err(|source| NpyError::Header {
        path: path.to_path_buf(),
        source,
    })?;
    let shape = check_header(path, &header, width)?;
    let header_bytes = reader.stream_position().map_err(read_err)?;
    let data_bytes = file_bytes.saturating_sub(header_bytes);
    read_data(path, &mut reader, shape, data_bytes, header.shape())
}

/// Bytes of the header's start [`refuse_overflowing_shape`] looks at: magic and version (8),
/// header length (at most 4), then far more header text than any real header holds.
const PRECHECK_BYTES: u64 = 64 * 1024;

/// Refuses, before `npyz` parses it, a header that announces more header bytes than the file
/// holds (`npyz` would allocate them first) or a shape whose element count overflows `u64`
/// (`npyz` multiplies the dimensions unchecked, which panics in a debug build). Reads only
/// the header length and the `shape` tuple of the header text; anything it cannot make sense
/// of is left to `npyz`. Leaves `reader` at the start of the file.
fn refuse_overflowing_shape(
    path: &Path,
    reader: &mut (impl Read + Seek),
    file_bytes: u64,
) -> Result<(), NpyError> {
    let read_err = |source| NpyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut prefix = Vec::new();
    reader
        .take(PRECHECK_BYTES)
        .read_to_end(&mut prefix)
        .map_err(read_err)?;
    reader.rewind().map_err(read_err)?;
    // Magic (6), version (2), header length: 2 bytes in format 1.x, 4 from 2.0.
    let (text_start, text_len) = match (prefix.get(6), prefix.get(8..12)) {
        (Some(1), Some(&[a, b, ..])) => (10usize, u64::from(u16::from_le_bytes([a, b]))),
        (Some(_), Some(&[a, b, c, d])) => (12usize, u64::from(u32::from_le_bytes([a, b, c, d]))),
        _ => return Ok(()),
    };
    // npyz allocates the announced header length before reading it.
    if text_start as u64 + text_len > file_bytes {
        return Err(NpyError::Header {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the header announces {text_len} bytes, the file holds {file_bytes}"),
            ),
        });
    }
    let text = String::from_utf8_lossy(prefix.get(text_start..).unwrap_or_default());
    match shape_elements(&text) {
        Some(None) => Err(NpyError::Header {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                "the shape's element count overflows 64 bits",
            ),
        }),
        _ => Ok(()),
    }
}

/// The product of the non-zero dimensions of the header text's `shape` tuple: `None` when the
/// text has no tuple this can read, `Some(None)` when the product overflows `u64`.
fn shape_elements(text: &str) -> Option<Option<u64>> {
    let rest = &text[text.find("shape")?..];
    let open = rest.find('(')?;
    let close = open + rest[open..].find(')')?;
    let mut product = 1u64;
    for dim in rest[open + 1..close].split(',') {
        let dim = dim.trim().trim_end_matches('L');
        if dim.is_empty() {
            continue;
        }
        let n = dim.parse::<u64>().ok()?;
        if n != 0 {
            match product.checked_mul(n) {
                Some(p) => product = p,
                None => return Some(None),
            }
        }
    }
    Some(Some(product))
}

/// Checks dtype, order, rank and width; returns the shape as `usize`s.
fn check_header(
    path: &Path,
    header: &npyz::NpyHeader,
    width: usize,
) -> Result<[usize; 3], NpyError> {
    let dtype = header.dtype();
    let is_f32_le = matches!(&dtype, DType::Plain(ts) if ts.to_string() == F32_LE);
    if !is_f32_le {
        return Err(NpyError::Dtype {
            path: path.to_path_buf(),
            found: dtype.descr(),
        });
    }
    let dims = header.shape();
    if header.order() == Order::Fortran && dims.len() > 1 {
        return Err(NpyError::FortranOrder {
            path: path.to_path_buf(),
            shape: dims.to_vec(),
        });
    }
    let &[batch, frames, last] = dims else {
        return Err(NpyError::Rank {
            path: path.to_path_buf(),
            shape: dims.to_vec(),
            width,
        });
    };
    if u64::try_from(width).ok() != Some(last) {
        return Err(NpyError::Width {
            path: path.to_path_buf(),
            shape: dims.to_vec(),
            width,
        });
    }
    let too_large = || NpyError::TooLarge {
        path: path.to_path_buf(),
        shape: dims.to_vec(),
    };
    let batch = usize::try_from(batch).map_err(|_| too_large())?;
    let frames = usize::try_from(frames).map_err(|_| too_large())?;
    Ok([batch, frames, width])
}

/// Reads `shape`'s values from `reader`, positioned at the data, which holds `data_bytes`.
fn read_data(
    path: &Path,
    reader: &mut impl Read,
    shape: [usize; 3],
    data_bytes: u64,
    dims: &[u64],
) -> Result<Array3, NpyError> {
    let too_large = || NpyError::TooLarge {
        path: path.to_path_buf(),
        shape: dims.to_vec(),
    };
    let len = shape[0]
        .checked_mul(shape[1])
        .and_then(|n| n.checked_mul(shape[2]))
        .ok_or_else(too_large)?;
    let byte_len = len.checked_mul(4).ok_or_else(too_large)?;
    let expected_bytes = u64::try_from(byte_len).map_err(|_| too_large())?;
    if data_bytes < expected_bytes {
        return Err(NpyError::Truncated {
            path: path.to_path_buf(),
            shape: dims.to_vec(),
            expected_bytes,
            found_bytes: data_bytes,
        });
    }
    let mut data = Vec::with_capacity(len);
    let mut chunk = vec![0u8; CHUNK_BYTES.min(byte_len)];
    let mut left = byte_len;
    while left > 0 {
        let n = left.min(chunk.len());
        let buf = &mut chunk[..n];
        reader.read_exact(buf).map_err(|source| {
            if source.kind() == io::ErrorKind::UnexpectedEof {
                NpyError::Truncated {
                    path: path.to_path_buf(),
                    shape: dims.to_vec(),
                    expected_bytes,
                    found_bytes: u64::try_from(byte_len - left).unwrap_or(u64::MAX),
                }
            } else {
                NpyError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        data.extend(
            buf.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        left -= n;
    }
    Ok(Array3 { shape, data })
}

/// Writes `data` as a little-endian f32 (`'<f4'`), C-order array of `shape` to `path`,
/// replacing any file there.
///
/// # Errors
/// [`NpyError::Length`] when `data` does not hold `shape`'s element count (nothing is
/// written); [`NpyError::Write`] when the file cannot be created or written (a partial file
/// may remain).
pub fn write_f32_3d(path: &Path, shape: [usize; 3], data: &[f32]) -> Result<(), NpyError> {
    let fits = shape[0]
        .checked_mul(shape[1])
        .and_then(|n| n.checked_mul(shape[2]))
        == Some(data.len());
    if !fits {
        return Err(NpyError::Length {
            path: path.to_path_buf(),
            shape,
            len: data.len(),
        });
    }
    let write_err = |source| NpyError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(write_err)?;
    let mut out = BufWriter::new(file);
    write_to(&mut out, shape, data).map_err(write_err)?;
    out.flush().map_err(write_err)?;
    out.get_ref().sync_all().map_err(write_err)
}

/// Writes the header and the values to `out`.
fn write_to(out: &mut impl Write, shape: [usize; 3], data: &[f32]) -> io::Result<()> {
    let type_str = F32_LE
        .parse::<npyz::TypeStr>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    // usize -> u64 never loses bits on the platforms Rust supports (usize is at most 64 bits).
    let dims = shape.map(|d| d as u64);
    let mut writer = npyz::WriteOptions::<f32>::new()
        .dtype(DType::Plain(type_str))
        .shape(&dims)
        .writer(out)
        .begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.npy` file as numpy writes it: magic, version 1.0, padded header, data.
    fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let dict = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        let mut header = dict.into_bytes();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(data);
        out
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn read_bytes(bytes: &[u8], width: usize) -> Result<Array3, NpyError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        std::fs::write(&path, bytes).unwrap();
        read_f32_3d(&path, width)
    }

    #[test]
    fn round_trip_keeps_every_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.npy");
        let values = [
            0.0f32,
            -0.0,
            1.5,
            f32::NAN,
            f32::INFINITY,
            f32::MIN_POSITIVE / 2.0,
        ];
        write_f32_3d(&path, [1, 2, 3], &values).unwrap();
        let back = read_f32_3d(&path, 3).unwrap();
        assert_eq!(back.shape, [1, 2, 3]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.data), bits(&values));
        // Empty arrays too.
        write_f32_3d(&path, [0, 5, 3], &[]).unwrap();
        assert_eq!(read_f32_3d(&path, 3).unwrap().shape, [0, 5, 3]);
    }

    #[test]
    fn numpy_layout_is_read() {
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let a = read_bytes(
            &npy_bytes("<f4", false, "(2, 3, 2)", &f32_bytes(&values)),
            2,
        )
        .unwrap();
        assert_eq!(a.shape, [2, 3, 2]);
        assert_eq!(a.data, values);
    }

    #[test]
    fn other_arrays_are_refused_naming_what_was_found() {
        let data = f32_bytes(&[0.0; 12]);
        let msg = |r: Result<Array3, NpyError>| r.unwrap_err().to_string();
        let m = msg(read_bytes(
            &npy_bytes("<f8", false, "(1, 2, 3)", &[0; 48]),
            3,
        ));
        assert!(m.contains("'<f8'") && m.contains("'<f4'"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes(">f4", false, "(1, 2, 3)", &data[..24]),
            3,
        ));
        assert!(m.contains("'>f4'"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes("<i4", false, "(1, 2, 3)", &data[..24]),
            3,
        ));
        assert!(m.contains("'<i4'"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes("<f4", true, "(1, 2, 3)", &data[..24]),
            3,
        ));
        assert!(
            m.contains("Fortran order") && m.contains("[1, 2, 3]"),
            "{m}"
        );
        let m = msg(read_bytes(&npy_bytes("<f4", false, "(4, 3)", &data), 3));
        assert!(m.contains("rank 2") && m.contains("[4, 3]"), "{m}");
        let m = msg(read_bytes(&npy_bytes("<f4", false, "(2, 2, 3)", &data), 4));
        assert!(
            m.contains("has 3 values per frame, the model takes 4"),
            "{m}"
        );
        let m = msg(read_bytes(
            &npy_bytes("<f4", false, "(2, 2, 3)", &data[..40]),
            3,
        ));
        assert!(
            m.contains("truncated") && m.contains("48 data bytes"),
            "{m}"
        );
        // A header announcing more than any machine holds is refused before allocating.
        let m = msg(read_bytes(
            &npy_bytes("<f4", false, "(4611686018427387904, 4, 3)", &data),
            3,
        ));
        assert!(m.contains("overflows 64 bits"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes("<f4", false, "(0, 4611686018427387904, 8)", &data),
            8,
        ));
        assert!(m.contains("overflows 64 bits"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes("<f4", false, "(4611686018427387904, 1, 3)", &data),
            3,
        ));
        assert!(m.contains("too large") || m.contains("truncated"), "{m}");
        let m = msg(read_bytes(
            &npy_bytes("<f4", false, "(1000000000, 1000000, 3)", &data),
            3,
        ));
        assert!(m.contains("truncated"), "{m}");
        let mut lying = npy_bytes("<f4", false, "(1, 2, 3)", &data[..24]);
        lying[6] = 2; // format 2.0: a 4-byte header length, here about 2 GiB
        lying.splice(8..10, [0, 0, 0, 0x80]);
        let m = msg(read_bytes(&lying, 3));
        assert!(
            m.contains("not a valid .npy file") && m.contains("the header announces"),
            "{m}"
        );
        let m = msg(read_bytes(b"not an npy file at all", 3));
        assert!(m.contains("not a valid .npy file"), "{m}");
    }

    #[test]
    fn shape_elements_reads_the_header_tuple() {
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }";
        assert_eq!(shape_elements(h), Some(Some(24)));
        assert_eq!(shape_elements("{'shape': (), }"), Some(Some(1)));
        assert_eq!(shape_elements("{'shape': (5,), }"), Some(Some(5)));
        assert_eq!(shape_elements("{'shape': (0, 7L), }"), Some(Some(7)));
        let huge = "{'shape': (4294967296, 4294967296, 0), }";
        assert_eq!(shape_elements(huge), Some(None));
        assert_eq!(shape_elements("{'shape': 'x'}"), None);
        assert_eq!(shape_elements("no header"), None);
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = read_f32_3d(Path::new("/nonexistent/dir/x.npy"), 60).unwrap_err();
        assert!(matches!(e, NpyError::Read { .. }));
        assert!(e.to_string().contains("/nonexistent/dir/x.npy"), "{e}");
    }

    #[test]
    fn write_checks_the_length() {
        let e = write_f32_3d(Path::new("/nonexistent/y.npy"), [1, 2, 3], &[0.0; 5]).unwrap_err();
        assert!(matches!(e, NpyError::Length { len: 5, .. }));
        let e = write_f32_3d(Path::new("/nonexistent/y.npy"), [1, 1, 1], &[0.0]).unwrap_err();
        assert!(matches!(e, NpyError::Write { .. }), "{e}");
    }
}
