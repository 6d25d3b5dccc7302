//! A binary trace file's bytes as one stream, for the binary importers: plain, gzip or xz
//! (told by the file's first bytes, not its name), with the file's bytes counted (progress) and
//! hashed (the digest) as the decompressor reads them.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Xz,
}

impl Compression {
    /// The compression of a file that starts with `head` (gzip: `1f 8b`; xz: `fd 37 7a 58 5a 00`).
    pub fn of(head: &[u8]) -> Compression {
        if super::input::is_gzip(head) {
            Compression::Gzip
        } else if is_xz(head) {
            Compression::Xz
        } else {
            Compression::None
        }
    }

    /// What error messages call the decompressed data's offsets.
    pub fn offset_note(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => " (of the gunzipped data)",
            Compression::Xz => " (of the unxz'd data)",
        }
    }
}

/// Is the file xz-compressed?
pub fn is_xz(head: &[u8]) -> bool {
    head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00])
}

/// A decompressor over `inner` (which yields the compressed bytes). Concatenated gzip members
/// and xz streams are read as one stream, as `gzip -dc` and `xz -dc` read them.
pub fn decoder<R: Read + Send + 'static>(inner: R, c: Compression) -> Box<dyn Read + Send> {
    match c {
        Compression::None => Box::new(inner),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(inner)),
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(inner)),
    }
}

/// Counts and hashes the bytes read from the file, whichever decompressor reads them (the
/// binary importers' [`Stream`] and the text importers' reader).
pub(crate) struct Tap<R> {
    pub(crate) inner: R,
    pub(crate) pos: Arc<AtomicU64>,
    pub(crate) hasher: Arc<Mutex<blake3::Hasher>>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.lock().unwrap().update(&buf[..n]);
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// An open binary trace file: its decompressed bytes, and what has been read of the file.
pub struct Stream {
    pub reader: Box<dyn Read + Send>,
    pub compression: Compression,
    /// The file's size in bytes.
    pub total: u64,
    pos: Arc<AtomicU64>,
    hasher: Arc<Mutex<blake3::Hasher>>,
}

impl Stream {
    pub fn open(path: &Path) -> Result<Stream> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let total = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut magic = [0u8; 6];
        let mut n = 0;
        while n < magic.len() {
            match file.read(&mut magic[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        let compression = Compression::of(&magic[..n]);
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let pos = Arc::new(AtomicU64::new(0));
        let hasher = Arc::new(Mutex::new(blake3::Hasher::new()));
        let tap = Tap { inner: file, pos: pos.clone(), hasher: hasher.clone() };
        let reader = decoder(BufReader::with_capacity(1 << 20, tap), compression);
        Ok(Stream { reader, compression, total, pos, hasher })
    }

    /// Bytes of the file read so far.
    pub fn bytes_read(&self) -> u64 {
        self.pos.load(Ordering::Relaxed)
    }

    /// BLAKE3 (hex) of the file's bytes read so far: of the whole file once read to its end.
    pub fn digest(&self) -> String {
        self.hasher.lock().unwrap().clone().finalize().to_hex().to_string()
    }
}

/// Read until `buf` is full or the input ends; the number of bytes read (short only at the end).
pub fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The error for a failed read at `offset` of the decompressed data: a decompressor's error is
/// corrupt input (at that offset), anything else the file's I/O error.
pub fn read_error(path: &str, c: Compression, offset: u64, e: std::io::Error) -> Error {
    match c {
        Compression::None => Error::io(path, e),
        Compression::Gzip => Error::at_offset(path, offset, format!("corrupt gzip data{}: {e}", c.offset_note())),
        Compression::Xz => Error::at_offset(path, offset, format!("corrupt xz data{}: {e}", c.offset_note())),
    }
}
