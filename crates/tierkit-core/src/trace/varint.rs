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

/// True if `col` holds exactly `n` well-formed varints (each at most ten bytes, a tenth byte
/// at most 1), checked without decoding them: readers validate the columns a consumer did not
/// ask for with it, so that what is accepted never depends on what is decoded.
pub fn check_column(col: &[u8], n: usize) -> bool {
    match col.last() {
        None => return n == 0,
        Some(&b) if b >= 0x80 => return false, // the last varint runs past the column
        _ => {}
    }
    // Eight bytes at a time: count the terminating bytes (high bit clear) and track runs of
    // continuation bytes. Only a run of nine or more can make a varint of ten bytes or more
    // (legal only when its tenth byte is 1); such a column, which no writer produces for
    // real deltas, is checked byte by byte.
    let mut words = col.chunks_exact(8);
    let mut count = 0usize;
    let mut run = 0u32; // continuation bytes ending the previous word
    for w in &mut words {
        let x = u64::from_le_bytes(w.try_into().unwrap());
        // one bit per byte, byte 0 lowest: its high bit
        let hb = (((x & 0x8080_8080_8080_8080) >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
        count += 8 - hb.count_ones() as usize;
        if hb == 0xFF {
            run += 8;
        } else {
            if run + hb.trailing_ones() >= 9 {
                return check_column_exact(col, n);
            }
            run = hb.leading_ones();
        }
        if run >= 9 {
            return check_column_exact(col, n);
        }
    }
    for &b in words.remainder() {
        if b < 0x80 {
            count += 1;
            run = 0;
        } else {
            run += 1;
            if run >= 9 {
                return check_column_exact(col, n);
            }
        }
    }
    count == n
}

/// [`check_column`] byte by byte, with the ten-byte rules.
fn check_column_exact(col: &[u8], n: usize) -> bool {
    let mut count = 0usize;
    let mut run = 0u32; // continuation bytes since the last terminator
    for &b in col {
        if b < 0x80 {
            if run == 9 && b > 1 {
                return false; // a tenth byte above 1: overflow
            }
            count += 1;
            run = 0;
        } else {
            run += 1;
            if run >= 10 {
                return false; // an eleventh byte
            }
        }
    }
    count == n
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

    #[test]
    fn check_column_agrees_with_the_cursor() {
        let mut col = Vec::new();
        for v in [0u64, 127, 128, 300, 1 << 40, u64::MAX] {
            put(&mut col, v);
        }
        assert!(check_column(&col, 6));
        assert!(!check_column(&col, 5) && !check_column(&col, 7));
        assert!(!check_column(&col[..col.len() - 1], 6)); // cut inside the last varint
        assert!(check_column(&[], 0) && !check_column(&[], 1));
        // an eleventh byte, and a tenth byte above 1, are rejected as the cursor rejects them
        for bad in [vec![0xFFu8; 10].into_iter().chain([0x01]).collect::<Vec<_>>(), [vec![0xFF; 9], vec![0x02]].concat()] {
            assert!(Cursor::new(&bad).get().is_none());
            assert!(!check_column(&bad, 1) && !check_column(&bad, 2));
        }
        assert!(check_column(&[vec![0xFF; 9], vec![0x01]].concat(), 1));
        // the word-wise pass and the exact one agree wherever a long run falls
        for pad in 0..17 {
            for (tail, ok) in [(vec![0x01u8], true), (vec![0x02], false), (vec![0x80, 0x01], false)] {
                let col = [vec![0x05u8; pad], vec![0xFF; 9], tail].concat();
                assert_eq!(check_column(&col, pad + 1), ok, "pad {pad}: {col:?}");
                assert_eq!(check_column_exact(&col, pad + 1), ok);
            }
            let col = [vec![0x05u8; pad], vec![0x81; 8], vec![0x00], vec![0x7f; 9]].concat();
            assert!(check_column(&col, pad + 10), "pad {pad}");
        }
    }
}
