//! Files written under a user's name are whole or absent (docs/limits.md).
//!
//! Every writer of a user-named file (the native trace writer behind `trace convert`, `synth`
//! and `record`, and the exporters) opens it through [`PartialFile`]: the bytes go to
//! `<name>.partial` beside the target and are renamed over it by [`PartialFile::commit`], after
//! they are on disk. Dropping the guard without committing (an error, a full disk, an
//! interrupt) removes the temporary file, so no 0-byte or half file is left under the user's
//! name. The Python writers (`python/tierkit/output.py`) use the same `.partial` name.
//!
//! Errors name the user's file, not the temporary one. A symbolic link is written through (the
//! link stays); an existing special file (`/dev/null`, a FIFO) is written in place, since a
//! rename would replace the device node.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The suffix of the temporary file beside the target.
pub const PARTIAL_SUFFIX: &str = ".partial";
/// The longest file name most file systems take, in bytes.
const NAME_MAX_BYTES: usize = 255;

/// The temporary file of one output, removed on drop unless committed.
#[derive(Debug)]
pub struct PartialFile {
    /// The name the user gave (what errors name).
    path: PathBuf,
    /// Where the bytes go: `<target>.partial`, or the target itself when written in place.
    tmp: PathBuf,
    /// The file renamed over (the link's target for a symbolic link).
    target: PathBuf,
    in_place: bool,
    done: bool,
}

/// `<name>.partial` beside `path`, the name shortened if the suffix would make it too long.
pub fn partial_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|s| s.to_os_string()).unwrap_or_default();
    let mut tmp: OsString = if name.len() + PARTIAL_SUFFIX.len() <= NAME_MAX_BYTES {
        name
    } else {
        let mut s = name.to_string_lossy().into_owned();
        while s.len() + PARTIAL_SUFFIX.len() > NAME_MAX_BYTES {
            s.pop();
        }
        s.into()
    };
    tmp.push(PARTIAL_SUFFIX);
    path.with_file_name(tmp)
}

impl PartialFile {
    /// Open the temporary file for `path`; [`Error::Exists`] if `path` exists and `force` is
    /// false.
    pub fn create(path: &Path, force: bool) -> Result<(PartialFile, File)> {
        let meta = std::fs::metadata(path).ok();
        if !force && (meta.is_some() || path.is_symlink()) {
            return Err(Error::Exists { path: path.display().to_string() });
        }
        let io = |e| Error::io(path, e);
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(io(std::io::Error::other("is a directory")));
        }
        let in_place = meta.as_ref().is_some_and(|m| !m.is_file());
        let target = if path.is_symlink() { std::fs::canonicalize(path).map_err(io)? } else { path.to_path_buf() };
        let tmp = if in_place { target.clone() } else { partial_path(&target) };
        let file = File::create(&tmp).map_err(io)?;
        Ok((PartialFile { path: path.to_path_buf(), tmp, target, in_place, done: false }, file))
    }

    /// The name the user gave.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An I/O error while writing, naming the user's file.
    pub fn err(&self, e: std::io::Error) -> Error {
        Error::io(&self.path, e)
    }

    /// Put the complete file in place: its data to disk (a full disk may only show here),
    /// then the rename. `file` is the one [`PartialFile::create`] returned, flushed.
    pub fn commit(&mut self, file: &File) -> Result<()> {
        if !self.in_place {
            file.sync_data().map_err(|e| self.err(e))?;
            std::fs::rename(&self.tmp, &self.target).map_err(|e| self.err(e))?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.done && !self.in_place {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn dropped_without_commit_leaves_nothing_and_keeps_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.tkt");
        let (g, mut f) = PartialFile::create(&p, false).unwrap();
        f.write_all(b"half").unwrap();
        drop(g);
        assert!(!p.exists() && !partial_path(&p).exists());
        std::fs::write(&p, b"precious").unwrap();
        assert!(matches!(PartialFile::create(&p, false), Err(Error::Exists { .. })));
        let (g, mut f) = PartialFile::create(&p, true).unwrap();
        f.write_all(b"half").unwrap();
        drop((g, f));
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        let (mut g, mut f) = PartialFile::create(&p, true).unwrap();
        f.write_all(b"new").unwrap();
        g.commit(&f).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(!partial_path(&p).exists());
    }

    #[test]
    fn special_files_are_written_in_place_and_links_through() {
        let d = tempfile::tempdir().unwrap();
        // /dev/null stays a device: written in place, not replaced by a rename
        let (mut g, mut f) = PartialFile::create(Path::new("/dev/null"), true).unwrap();
        f.write_all(b"x").unwrap();
        g.commit(&f).unwrap();
        assert!(!Path::new("/dev/null").metadata().unwrap().is_file());
        let real = d.path().join("real.txt");
        std::fs::write(&real, b"old").unwrap();
        let link = d.path().join("link.txt");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (mut g, mut f) = PartialFile::create(&link, true).unwrap();
        f.write_all(b"new").unwrap();
        g.commit(&f).unwrap();
        assert!(link.is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        let e = PartialFile::create(d.path(), true).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn a_long_name_gets_a_temporary_name_that_fits() {
        let p = Path::new("/tmp").join("é".repeat(127) + "x");
        let t = partial_path(&p);
        assert!(t.file_name().unwrap().len() <= NAME_MAX_BYTES);
        assert!(t.to_string_lossy().ends_with(PARTIAL_SUFFIX));
    }
}
