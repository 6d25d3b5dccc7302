//! Reading a guidance file safely: the library's reader, and `tierkit run --guidance`'s (which
//! includes this file, `crates/tierkit-run/src/guided.rs`, so that both refuse the same files
//! with the same words; docs/guidance.md, "Reading the guidance file"). Only std and libc.

use std::io::Read;
use std::path::Path;

/// The largest guidance file the library reads, in bytes (docs/guidance.md, "Reading the
/// guidance file"). Guidance names each allocation site once, in about 100 to 1,000 bytes (a
/// frame key is 20 to 70 bytes, `context` of them): 16 MiB hold more than 15,000 sites of
/// context 64, or 200,000 of context 1, and load in 0.1 to 0.5 s of CPU. Anything larger is
/// refused before it is read, so that no file delays the program's start for longer.
pub const MAX_GUIDANCE_BYTES: u64 = 16 << 20;

/// The bytes of the guidance file at `path`, checked on the opened file (fstat, not the path):
/// a regular file of at most [`MAX_GUIDANCE_BYTES`]. The file is opened with `O_NONBLOCK`, so
/// that a FIFO without a writer or a device is refused at once instead of blocking the
/// program's start. Errors are one line, without the file's name.
pub fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path).map_err(|e| format!("cannot read it ({e})"))?;
    let m = f.metadata().map_err(|e| format!("cannot read it ({e})"))?;
    let t = m.file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(format!("not a regular file ({what})"));
    }
    let too_big = |n: u64| format!("{n} bytes, over the limit of {} MiB for a guidance file", MAX_GUIDANCE_BYTES >> 20);
    if m.len() > MAX_GUIDANCE_BYTES {
        return Err(too_big(m.len()));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    // a file that grows while it is read stops at the limit too
    (&f).take(MAX_GUIDANCE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it ({e})"))?;
    if bytes.len() as u64 > MAX_GUIDANCE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}
