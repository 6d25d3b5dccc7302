//! Frame keys of return addresses in this process (docs/guidance.md, "Site keys"):
//! `<object>+0x<offset>`, the object named by its GNU build-id (read from its PT_NOTE in
//! memory) or else its file's basename, the offset `(return address - 1) - load bias`.

use std::ffi::CStr;

use libc::{c_int, c_void, dl_phdr_info, size_t};

struct Find {
    addr: usize,
    key: Option<String>,
}

const NT_GNU_BUILD_ID: u32 = 3;

/// The GNU build-id of a loaded object, from its PT_NOTE segments, as lowercase hex.
unsafe fn build_id(info: &dl_phdr_info) -> Option<String> {
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    for ph in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        let mut p = (info.dlpi_addr as usize + ph.p_vaddr as usize) as *const u8;
        let end = p.add(ph.p_memsz as usize);
        let align = if ph.p_align >= 8 { 8 } else { 4 };
        while p.add(12) <= end {
            let namesz = (p as *const u32).read_unaligned() as usize;
            let descsz = (p.add(4) as *const u32).read_unaligned() as usize;
            let ty = (p.add(8) as *const u32).read_unaligned();
            let name = p.add(12);
            let desc = name.add((namesz + align - 1) & !(align - 1));
            let next = desc.add((descsz + align - 1) & !(align - 1));
            if next > end {
                break;
            }
            if ty == NT_GNU_BUILD_ID && namesz == 4 && std::slice::from_raw_parts(name, 4) == b"GNU\0" && descsz > 0 {
                let d = std::slice::from_raw_parts(desc, descsz);
                return Some(d.iter().map(|b| format!("{b:02x}")).collect());
            }
            p = next;
        }
    }
    None
}

fn exe_basename() -> String {
    std::fs::read_link("/proc/self/exe").ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).unwrap_or_else(|| "unknown".into())
}

unsafe extern "C" fn cb(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    let f = &mut *(data as *mut Find);
    let info = &*info;
    let rel = f.addr.wrapping_sub(info.dlpi_addr as usize);
    let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
    let inside = phdrs.iter().any(|p| p.p_type == libc::PT_LOAD && rel >= p.p_vaddr as usize && rel < (p.p_vaddr + p.p_memsz) as usize);
    if !inside {
        return 0;
    }
    let obj = match build_id(info) {
        Some(id) => format!("build-id:{id}"),
        None => {
            let name = if info.dlpi_name.is_null() { "" } else { CStr::from_ptr(info.dlpi_name).to_str().unwrap_or("") };
            let base = name.rsplit('/').next().unwrap_or("");
            format!("file:{}", if base.is_empty() { exe_basename() } else { base.to_string() })
        }
    };
    f.key = Some(format!("{obj}+0x{rel:x}"));
    1
}

/// The frame key of return address `ra`, or None where no loaded object holds `ra - 1`
/// (JIT code, a frame the unwinder made up).
pub fn frame_key(ra: usize) -> Option<String> {
    let mut f = Find { addr: ra.wrapping_sub(1), key: None };
    // SAFETY: the callback only reads the loader's program headers while it holds its lock
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut f as *mut Find as *mut c_void) };
    f.key
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_function_of_this_binary_has_a_key_in_it() {
        let k = super::frame_key(super::frame_key as *const () as usize + 1).unwrap();
        assert!(crate::guidance::valid_frame_key(&k), "{k}");
        assert_eq!(super::frame_key(8), None);
    }
}
