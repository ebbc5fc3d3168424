//! `.npy` arrays in and out: the file format of the `bilstm` command line.
//!
//! Reading accepts exactly what the stack runs on: little-endian float32 (dtype `'<f4'`), C
//! order, rank 3 `[batch, frames, width]` with the width the model expects. Anything else is
//! refused with an [`NpyError`] naming what the file holds (its dtype descriptor, shape or
//! order) and the file's path. The header is parsed here, in one pass over at most
//! [`MAX_HEADER_BYTES`] (numpy's own limit), whatever it holds; the data is read as raw
//! little-endian bytes after the file's length has been checked against the header, so a
//! truncated file is reported as such and a lying header cannot make the reader allocate more
//! than the file holds. Only regular files are read (a FIFO or `/dev/zero` is refused at once).
//!
//! Writing produces `'<f4'`, C order, rank 3 (numpy's `np.load` reads it), through a temporary
//! file renamed into place when complete.
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

use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

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

/// The longest header text read, in bytes: numpy's own limit (`np.load`'s default
/// `max_header_size`). A longer header is refused before it is read.
pub const MAX_HEADER_BYTES: u64 = 10_000;

/// The most characters of file content an error message quotes.
const QUOTE_CHARS: usize = 64;

/// The header's fields, as parsed.
struct Header {
    /// The `descr` value: a quoted string's contents, or `None` when it is not a string
    /// (a record list), with its text as found (quoted, shortened) for messages.
    descr: (Option<String>, String),
    /// `fortran_order`.
    fortran: bool,
    /// The dimensions (their non-zero product fits 64 bits).
    shape: Vec<u64>,
}

/// Reads a little-endian f32 rank-3 array `[batch, frames, width]` from the `.npy` file at
/// `path`.
///
/// The file must be a regular file (a FIFO or a device is refused without blocking); the
/// header is parsed in time linear in its length and is at most [`MAX_HEADER_BYTES`]; the
/// data is allocated only after the file's length has been checked against the shape, so the
/// memory used is bounded by what the file holds.
///
/// # Errors
/// [`NpyError::Read`] when the file cannot be opened or read or is not a regular file;
/// [`NpyError::Header`] when it is not an `.npy` file; [`NpyError::Dtype`],
/// [`NpyError::FortranOrder`], [`NpyError::Rank`], [`NpyError::Width`] for an array of another
/// kind (checked in that order); [`NpyError::TooLarge`]; [`NpyError::Truncated`] when the data
/// is shorter than the header says.
pub fn read_f32_3d(path: &Path, width: usize) -> Result<Array3, NpyError> {
    let mut windows = open_f32_3d(path, width)?;
    let shape = windows.shape();
    let mut data = Vec::new();
    windows.read_windows(shape[0], &mut data)?;
    Ok(Array3 { shape, data })
}

/// An `.npy` input read a few windows at a time ([`open_f32_3d`]), so that memory is bounded
/// by the windows in flight rather than by the file.
pub struct WindowReader {
    path: PathBuf,
    reader: BufReader<std::fs::File>,
    shape: [usize; 3],
    dims: Vec<u64>,
    /// Windows read so far.
    read: usize,
}

impl std::fmt::Debug for WindowReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowReader")
            .field("path", &self.path)
            .field("shape", &self.shape)
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

/// Opens the `.npy` file at `path` for reading its `[batch, frames, width]` f32 array a few
/// windows at a time: the header is checked as [`read_f32_3d`] checks it, and the file's length
/// against the shape, before anything else is read.
///
/// # Errors
/// As [`read_f32_3d`] (a truncated file is [`NpyError::Truncated`] here already).
pub fn open_f32_3d(path: &Path, width: usize) -> Result<WindowReader, NpyError> {
    let read_err = |source| NpyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let (file, file_bytes) = crate::fsio::open_regular(path).map_err(read_err)?;
    let mut reader = BufReader::new(file);
    let (header, header_bytes) = read_header(path, &mut reader, file_bytes)?;
    let shape = check_header(path, &header, width)?;
    let data_bytes = file_bytes.saturating_sub(header_bytes);
    check_data_len(path, shape, data_bytes, &header.shape)?;
    Ok(WindowReader {
        path: path.to_path_buf(),
        reader,
        shape,
        dims: header.shape,
        read: 0,
    })
}

impl WindowReader {
    /// The array's shape `[batch, frames, width]`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Windows not read yet.
    pub fn remaining(&self) -> usize {
        self.shape[0] - self.read
    }

    /// Reads the next `n` windows (at most [`WindowReader::remaining`]) into `out`, replacing
    /// its contents: `n * frames * width` values.
    ///
    /// # Errors
    /// [`NpyError::TooLarge`] for more windows than remain or a size beyond memory;
    /// [`NpyError::Read`] / [`NpyError::Truncated`] when the file ends early or cannot be read.
    pub fn read_windows(&mut self, n: usize, out: &mut Vec<f32>) -> Result<(), NpyError> {
        let too_large = || NpyError::TooLarge {
            path: self.path.clone(),
            shape: self.dims.clone(),
        };
        if n > self.remaining() {
            return Err(too_large());
        }
        let len = n
            .checked_mul(self.shape[1])
            .and_then(|v| v.checked_mul(self.shape[2]))
            .ok_or_else(too_large)?;
        out.clear();
        out.try_reserve_exact(len).map_err(|_| too_large())?;
        read_values(&self.path, &mut self.reader, len, out)?;
        self.read += n;
        Ok(())
    }
}

/// A header error naming `path`.
fn header_err(path: &Path, what: impl Into<String>) -> NpyError {
    NpyError::Header {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, what.into()),
    }
}

/// Reads and parses the header; returns it and the data's offset in the file.
fn read_header(
    path: &Path,
    reader: &mut impl Read,
    file_bytes: u64,
) -> Result<(Header, u64), NpyError> {
    let mut prefix = [0u8; 12];
    let short = |_| header_err(path, "the file is shorter than an .npy preamble");
    reader.read_exact(&mut prefix[..10]).map_err(short)?;
    if &prefix[..6] != b"\x93NUMPY" {
        return Err(header_err(path, "no .npy magic (\\x93NUMPY) at the start"));
    }
    let (text_start, text_len) = match prefix[6] {
        1 => (10u64, u64::from(u16::from_le_bytes([prefix[8], prefix[9]]))),
        2 | 3 => {
            reader.read_exact(&mut prefix[10..12]).map_err(short)?;
            let [a, b, c, d] = [prefix[8], prefix[9], prefix[10], prefix[11]];
            (12u64, u64::from(u32::from_le_bytes([a, b, c, d])))
        }
        v => {
            return Err(header_err(
                path,
                format!("format version {v} is not 1, 2 or 3"),
            ));
        }
    };
    if text_start + text_len > file_bytes {
        return Err(header_err(
            path,
            format!("the header announces {text_len} bytes, the file holds {file_bytes}"),
        ));
    }
    if text_len > MAX_HEADER_BYTES {
        return Err(header_err(
            path,
            format!(
                "the header announces {text_len} bytes, more than the {MAX_HEADER_BYTES} \
                 numpy itself reads"
            ),
        ));
    }
    // At most MAX_HEADER_BYTES (checked above).
    let mut text = vec![0u8; text_len as usize];
    reader
        .read_exact(&mut text)
        .map_err(|source| NpyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let header = parse_header(&text).map_err(|what| header_err(path, what))?;
    Ok((header, text_start + text_len))
}

/// Shortens `s` to [`QUOTE_CHARS`] characters (marking the cut) and escapes control
/// characters, for quoting file content in a message.
pub(crate) fn shorten(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == QUOTE_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits the header dictionary's text into `(key, value text)` pairs, in one pass: each value
/// runs to the next comma or closing brace outside brackets and quotes.
fn split_dict(text: &str) -> Result<Vec<(String, &str)>, String> {
    let body = text
        .trim_end_matches(['\n', ' ', '\0', '\r', '\t'])
        .trim_start();
    let inner = body
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .ok_or_else(|| format!("the header {:?} is not a dictionary", shorten(body)))?;
    let bytes = inner.as_bytes();
    let mut entries = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            return Ok(entries);
        }
        // A quoted key.
        let quote = bytes[i];
        if quote != b'\'' && quote != b'"' {
            return Err(format!(
                "the header's keys are not quoted strings at {:?}",
                shorten(&inner[i..])
            ));
        }
        let key_end = inner[i + 1..]
            .find(quote as char)
            .map(|k| i + 1 + k)
            .ok_or("the header has an unterminated key")?;
        let key = inner[i + 1..key_end].to_owned();
        i = key_end + 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes.get(i) != Some(&b':') {
            return Err(format!("no ':' after the header key {:?}", shorten(&key)));
        }
        i += 1;
        let start = i;
        let mut depth = 0usize;
        let mut in_quote: Option<u8> = None;
        while i < bytes.len() {
            let b = bytes[i];
            match in_quote {
                Some(q) if b == q => in_quote = None,
                Some(_) => {}
                None => match b {
                    b'\'' | b'"' => in_quote = Some(b),
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => {
                        depth = depth
                            .checked_sub(1)
                            .ok_or("the header's brackets do not match")?;
                    }
                    b',' if depth == 0 => break,
                    _ => {}
                },
            }
            i += 1;
        }
        if in_quote.is_some() || depth != 0 {
            return Err("the header's quotes or brackets do not close".into());
        }
        entries.push((key, inner[start..i].trim()));
        i += 1; // the comma (or past the end)
    }
}

/// Parses the header text: a dictionary of exactly `descr`, `fortran_order` and `shape`, as
/// numpy writes it (numpy refuses other keys too). Linear in the text's length.
fn parse_header(text: &[u8]) -> Result<Header, String> {
    let text = std::str::from_utf8(text).map_err(|_| "the header is not text".to_owned())?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (key, value) in split_dict(text)? {
        let seen = match key.as_str() {
            "descr" => {
                let quoted = (value.len() >= 2
                    && (value.starts_with('\'') && value.ends_with('\'')
                        || value.starts_with('"') && value.ends_with('"')))
                .then(|| value[1..value.len() - 1].to_owned());
                descr.replace((quoted, shorten(value))).is_some()
            }
            "fortran_order" => {
                let v = match value {
                    "True" => true,
                    "False" => false,
                    other => {
                        return Err(format!(
                            "fortran_order is {:?}, not True or False",
                            shorten(other)
                        ));
                    }
                };
                fortran.replace(v).is_some()
            }
            "shape" => shape.replace(parse_shape(value)?).is_some(),
            other => {
                return Err(format!(
                    "the header has the key {:?}; an .npy header holds only descr, \
                     fortran_order and shape",
                    shorten(other)
                ));
            }
        };
        if seen {
            return Err(format!("the header repeats the key {:?}", shorten(&key)));
        }
    }
    match (descr, fortran, shape) {
        (Some(descr), Some(fortran), Some(shape)) => Ok(Header {
            descr,
            fortran,
            shape,
        }),
        _ => Err("the header lacks one of descr, fortran_order, shape".into()),
    }
}

/// Parses a shape tuple `(a, b, c)` (trailing comma and Python 2's `L` suffix allowed),
/// refusing one whose element count overflows 64 bits.
fn parse_shape(value: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("shape {:?} is not a tuple of whole numbers", shorten(value));
    let inner = value
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(bad)?;
    let mut dims = Vec::new();
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    for (k, part) in parts.iter().enumerate() {
        if part.is_empty() && k + 1 == parts.len() && k > 0 {
            break; // a trailing comma: `(5,)`
        }
        if part.is_empty() && parts.len() == 1 {
            break; // `()`: a scalar
        }
        let digits = part.strip_suffix('L').unwrap_or(part);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        dims.push(
            digits
                .parse::<u64>()
                .map_err(|_| "a shape dimension overflows 64 bits".to_owned())?,
        );
    }
    // Zero dimensions aside, the element count must fit 64 bits.
    let mut product = 1u64;
    for &d in dims.iter().filter(|&&d| d != 0) {
        product = product
            .checked_mul(d)
            .ok_or("the shape's element count overflows 64 bits")?;
    }
    Ok(dims)
}

/// Checks dtype, order, rank and width; returns the shape as `usize`s.
fn check_header(path: &Path, header: &Header, width: usize) -> Result<[usize; 3], NpyError> {
    if header.descr.0.as_deref() != Some(F32_LE) {
        return Err(NpyError::Dtype {
            path: path.to_path_buf(),
            found: header.descr.1.clone(),
        });
    }
    let dims = header.shape.as_slice();
    if header.fortran && dims.len() > 1 {
        return Err(NpyError::FortranOrder {
            path: path.to_path_buf(),
            shape: dims.to_vec(),
        });
    }
    let &[batch, frames, last] = dims else {
        return Err(NpyError::Rank {
            path: path.to_path_buf(),
            shape: dims.iter().take(8).copied().collect(),
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

/// Checks that `data_bytes` hold the values of `shape` (`dims` as the header gave them, for
/// messages).
fn check_data_len(
    path: &Path,
    shape: [usize; 3],
    data_bytes: u64,
    dims: &[u64],
) -> Result<(), NpyError> {
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
    Ok(())
}

/// Reads `len` little-endian f32 values from `reader` onto the end of `out`.
fn read_values(
    path: &Path,
    reader: &mut impl Read,
    len: usize,
    out: &mut Vec<f32>,
) -> Result<(), NpyError> {
    if cfg!(target_endian = "little") {
        // The file's bytes are the values' ('<f4'): read straight into them.
        let at = out.len();
        out.resize(at + len, 0.0);
        return reader
            .read_exact(bytemuck::cast_slice_mut(&mut out[at..]))
            .map_err(|source| NpyError::Read {
                path: path.to_path_buf(),
                source,
            });
    }
    let byte_len = len.saturating_mul(4);
    let mut chunk = vec![0u8; CHUNK_BYTES.min(byte_len)];
    let mut left = byte_len;
    while left > 0 {
        let n = left.min(chunk.len());
        let buf = &mut chunk[..n];
        reader.read_exact(buf).map_err(|source| NpyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        out.extend(
            buf.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        left -= n;
    }
    Ok(())
}

/// Writes `data` as a little-endian f32 (`'<f4'`), C-order array of `shape` to `path`,
/// replacing any file there.
///
/// The array is written to a temporary file in `path`'s directory and renamed over `path`
/// only when complete: a failed or interrupted write leaves the previous file whole.
/// `path` must name a regular file or nothing (a link to a regular file is followed and
/// stays): `/dev/stdout`, a FIFO or a device is refused before anything is written.
///
/// # Errors
/// [`NpyError::Length`] when `data` does not hold `shape`'s element count (nothing is
/// written); [`NpyError::Write`] when `path` is not a regular file or its directory is
/// missing, or the file cannot be created, written or renamed (no partial file remains).
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
    write_f32_3d_with(path, shape, |sink| sink.write(data))
}

/// Where [`write_f32_3d_with`]'s producer puts the values, in order.
pub struct ValueSink<'a> {
    out: &'a mut (dyn Write + Send),
    buf: Vec<u8>,
    left: usize,
}

impl std::fmt::Debug for ValueSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueSink")
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

impl ValueSink<'_> {
    /// Appends `values` (little-endian f32) to the array.
    ///
    /// # Errors
    /// The write's error; [`io::ErrorKind::InvalidInput`] for more values than the shape holds.
    pub fn write(&mut self, values: &[f32]) -> io::Result<()> {
        if values.len() > self.left {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "more values than the shape holds",
            ));
        }
        if cfg!(target_endian = "little") {
            // The values' bytes are already the file's ('<f4'): no conversion.
            self.out.write_all(bytemuck::cast_slice(values))?;
        } else {
            for chunk in values.chunks(CHUNK_BYTES / 4) {
                self.buf.clear();
                for v in chunk {
                    self.buf.extend_from_slice(&v.to_le_bytes());
                }
                self.out.write_all(&self.buf)?;
            }
        }
        self.left -= values.len();
        Ok(())
    }
}

/// Writes a little-endian f32, C-order array of `shape` to `path` as [`write_f32_3d`] does
/// (temporary file, renamed into place only when complete), with the values coming from
/// `produce` a few at a time through a [`ValueSink`]: memory stays bounded by what the
/// producer holds. A producer that fails, or gives fewer or more values than `shape` holds,
/// leaves no file behind and the previous one whole.
///
/// # Errors
/// [`NpyError::Write`] with the producer's error, a short or long producer, or what creating,
/// writing or renaming the file met.
pub fn write_f32_3d_with(
    path: &Path,
    shape: [usize; 3],
    produce: impl FnOnce(&mut ValueSink<'_>) -> io::Result<()>,
) -> Result<(), NpyError> {
    let write_err = |source| NpyError::Write {
        path: path.to_path_buf(),
        source,
    };
    let total = shape[0]
        .checked_mul(shape[1])
        .and_then(|n| n.checked_mul(shape[2]))
        .ok_or_else(|| write_err(io::Error::other("the shape's value count overflows")))?;
    let target = crate::fsio::check_output(path).map_err(write_err)?;
    crate::fsio::write_atomic(&target, |out| {
        write_header(out, shape)?;
        let mut sink = ValueSink {
            out,
            buf: Vec::with_capacity(CHUNK_BYTES),
            left: total,
        };
        produce(&mut sink)?;
        if sink.left != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} values missing", sink.left),
            ));
        }
        Ok(())
    })
    .map_err(write_err)
}

/// Writes the header (format 1.0, padded to a multiple of 64 bytes as numpy does) to `out`.
fn write_header(out: &mut dyn Write, shape: [usize; 3]) -> io::Result<()> {
    let dict = format!(
        "{{'descr': '{F32_LE}', 'fortran_order': False, 'shape': ({}, {}, {}), }}",
        shape[0], shape[1], shape[2]
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    // Three usize dims print in at most 3 * 20 digits: the header is far below 64 KiB.
    let len = u16::try_from(header.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "header too long"))?;
    out.write_all(b"\x93NUMPY\x01\x00")?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&header)
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
    fn header_parsing_reads_numpy_headers() {
        let h = parse_header(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }  \n")
            .unwrap();
        assert_eq!(h.shape, [2, 3, 4]);
        assert_eq!(h.descr.0.as_deref(), Some("<f4"));
        assert!(!h.fortran);
        assert_eq!(parse_shape("()").unwrap(), Vec::<u64>::new());
        assert_eq!(parse_shape("(5,)").unwrap(), [5]);
        assert_eq!(parse_shape("(0, 7L)").unwrap(), [0, 7]);
        let e = parse_shape("(4294967296, 4294967296, 0)").unwrap_err();
        assert!(e.contains("overflows 64 bits"), "{e}");
        assert!(parse_shape("'x'").is_err());
        assert!(parse_shape("(1,,2)").is_err());
        let rec = parse_header(
            b"{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (3,)}",
        )
        .unwrap();
        assert_eq!(rec.descr.0, None);
        assert!(rec.descr.1.starts_with("[('a', '<f4')"), "{}", rec.descr.1);
        for bad in [
            &b"no header"[..],
            b"{'descr': '<f4', 'fortran_order': False}",
            b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
            b"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': ((1,)}",
            b"{descr: '<f4'}",
            b"\xff\xfe",
        ] {
            assert!(
                parse_header(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A header whose extra key holds nested brackets took exponential time in npyz's parser
    /// (672 bytes ran past 60 s; depth 20 took 4.7 s): the parser is linear now.
    #[test]
    fn nested_brackets_parse_in_linear_time() {
        for depth in [20usize, 300, 4000] {
            let nest = format!("{}{}", "[(".repeat(depth), ")]".repeat(depth));
            let text = format!(
                "{{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), 'x': {nest}}}"
            );
            let started = std::time::Instant::now();
            let e = read_bytes(&npy_bytes_raw(&text, &[0; 4]), 1).unwrap_err();
            // Linear: well under a millisecond here. The bound is for a busy 2-core CI machine
            // (a debug build there once took 312 ms at depth 20 under load, 2026-12-03) and
            // still far below the exponential parser (4.7 s at depth 20, astronomic at 4000).
            assert!(
                started.elapsed().as_millis() < 2000,
                "depth {depth}: {:?}",
                started.elapsed()
            );
            let m = e.to_string();
            assert!(
                m.contains("the key \"x\"") || m.contains("numpy itself reads"),
                "{m}"
            );
            assert!(m.len() < 400, "a whole header echoed: {m}");
        }
        // The nested value in descr: refused as a dtype, quoted short.
        let nest = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let text = format!("{{'descr': {nest}, 'fortran_order': False, 'shape': (1, 1, 1), }}");
        let m = read_bytes(&npy_bytes_raw(&text, &[0; 4]), 1)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("dtype [[[") && m.contains("...") && m.len() < 400,
            "{m}"
        );
    }

    /// Control characters in quoted header content are escaped, never printed raw.
    #[test]
    fn quoted_content_is_escaped() {
        let text = "{'descr': '<f4\x1b[31m\n', 'fortran_order': False, 'shape': (1, 1, 1), }";
        let m = read_bytes(&npy_bytes_raw(text, &[0; 4]), 1)
            .unwrap_err()
            .to_string();
        assert!(!m.contains('\x1b') && !m.contains('\n'), "{m:?}");
        assert!(m.contains("\\u{1b}"), "{m}");
    }

    /// An `.npy` file with exactly `text` as its header dictionary (padded).
    fn npy_bytes_raw(text: &str, data: &[u8]) -> Vec<u8> {
        let mut header = text.as_bytes().to_vec();
        while !(12 + header.len() + 1).is_multiple_of(64) {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut out = b"\x93NUMPY\x02\x00".to_vec();
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(data);
        out
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

    #[test]
    fn windows_are_read_in_chunks_and_written_by_a_producer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npy");
        let values: Vec<f32> = (0..5 * 2 * 3).map(|i| i as f32 * 0.5).collect();
        write_f32_3d(&path, [5, 2, 3], &values).unwrap();
        let mut r = open_f32_3d(&path, 3).unwrap();
        assert_eq!((r.shape(), r.remaining()), ([5, 2, 3], 5));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        r.read_windows(2, &mut a).unwrap();
        r.read_windows(3, &mut b).unwrap();
        assert_eq!([a, b].concat(), values);
        assert!(matches!(
            r.read_windows(1, &mut Vec::new()),
            Err(NpyError::TooLarge { .. })
        ));
        // A producer in pieces writes the same file; a short or failing one leaves the old file.
        let out = dir.path().join("y.npy");
        write_f32_3d_with(&out, [5, 2, 3], |sink| {
            sink.write(&values[..7])?;
            sink.write(&values[7..])
        })
        .unwrap();
        assert_eq!(read_f32_3d(&out, 3).unwrap().data, values);
        let short = write_f32_3d_with(&out, [5, 2, 3], |sink| sink.write(&values[..29]));
        assert!(matches!(short, Err(NpyError::Write { .. })), "{short:?}");
        let failing = write_f32_3d_with(&out, [5, 2, 3], |_| Err(io::Error::other("no")));
        assert!(failing.is_err());
        let long = write_f32_3d_with(&out, [1, 1, 3], |sink| sink.write(&values[..4]));
        assert!(long.is_err());
        assert_eq!(
            read_f32_3d(&out, 3).unwrap().data,
            values,
            "the old file stays whole"
        );
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file remains");
    }
}
