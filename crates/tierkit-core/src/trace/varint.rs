//! LEB128 variable-length integers and zig-zag signed deltas, used by the native format.

#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A cursor over a byte column. Reads past the end return `None` (the caller reports the
/// corruption with the file offset it knows).
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }
    #[inline(always)]
    pub fn get(&mut self) -> Option<u64> {
        // fast path: one byte
        let b0 = *self.buf.get(self.pos)?;
        if b0 < 0x80 {
            self.pos += 1;
            return Some(b0 as u64);
        }
        // fast path: a whole varint fits in what is left, so no per-byte bounds checks
        if let Some(w) = self.buf.get(self.pos..self.pos + 10) {
            let w: &[u8; 10] = w.try_into().unwrap();
            let mut v = 0u64;
            for (k, &b) in w.iter().enumerate() {
                v |= ((b & 0x7f) as u64) << (7 * k);
                if b < 0x80 {
                    if k == 9 && b > 1 {
                        return None; // overflow
                    }
                    self.pos += k + 1;
                    return Some(v);
                }
            }
            return None; // more than 10 bytes
        }
        let mut v = (b0 & 0x7f) as u64;
        let mut shift = 7;
        let mut i = self.pos + 1;
        loop {
            let b = *self.buf.get(i)?;
            i += 1;
            if shift == 63 && b > 1 {
                return None; // overflow
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        self.pos = i;
        Some(v)
    }
    #[inline(always)]
    pub fn get_i(&mut self) -> Option<i64> {
        self.get().map(unzigzag)
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    pub fn is_done(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        let vals = [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX];
        let mut buf = Vec::new();
        for &v in &vals {
            put(&mut buf, v);
        }
        let mut c = Cursor::new(&buf);
        for &v in &vals {
            assert_eq!(c.get(), Some(v));
        }
        assert!(c.is_done());
        assert_eq!(c.get(), None);
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -123456789] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
    #[test]
    fn truncated_varint_is_none() {
        let mut c = Cursor::new(&[0x80, 0x80]);
        assert_eq!(c.get(), None);
    }
}
