//! Kernel settings the kernel policies change, and putting them back.
//!
//! They are machine-wide, so `tierkit run` changes them only where that is meant to happen:
//! inside the tierkit testbed VM, or where the user says so with
//! `TIERKIT_ALLOW_KERNEL_SETTINGS=1` (a machine set aside for it). Each one is read before it
//! is written and written back when the [`Settings`] guard goes (end of run, error, signal).

use std::path::{Path, PathBuf};

use tierkit_core::{Error, Result};

pub const ALLOW_ENV: &str = "TIERKIT_ALLOW_KERNEL_SETTINGS";

/// True inside the testbed VM: its init and agent (testbed/init.sh, testbed/agent.sh) are in
/// place and the host name is the one init.sh gives.
pub fn in_testbed(root: &Path) -> bool {
    root.join("etc/testbed-agent.sh").is_file()
        && std::fs::read_to_string(root.join("proc/sys/kernel/hostname")).map(|h| h.trim() == "tierkit-vm").unwrap_or(false)
}

/// Ok when machine-wide kernel state (sysctls, DAMON) may be changed here; else the reason.
pub fn check_allowed(root: &Path, what: &str) -> Result<()> {
    if std::env::var(ALLOW_ENV).as_deref() == Ok("1") || in_testbed(root) {
        return Ok(());
    }
    Err(Error::config(
        "--policy",
        format!("{what} changes machine-wide kernel state; tierkit does that only inside the testbed VM (make test-vm) or with {ALLOW_ENV}=1 on a machine set aside for it"),
    ))
}

/// One setting: what it was, what tierkit set, what it is after the restore.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SettingReport {
    pub path: String,
    pub before: String,
    pub set: String,
    pub after_restore: Option<String>,
    pub restored: bool,
}

#[derive(Default)]
pub struct Settings {
    changed: Vec<(PathBuf, String, String)>,
    /// debugfs mounted by us, unmounted on restore
    mounted: Option<PathBuf>,
    done: Option<Vec<SettingReport>>,
}

impl Settings {
    /// Write `value` to `path`, remembering what was there.
    pub fn set(&mut self, path: &Path, value: &str) -> Result<()> {
        let before = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?.trim().to_string();
        std::fs::write(path, value).map_err(|e| Error::config(path.display().to_string(), format!("writing '{value}': {e}")))?;
        self.changed.push((path.to_path_buf(), before, value.to_string()));
        Ok(())
    }

    /// Mount debugfs at `at` unless it is there already (NUMA balancing's hot threshold lives
    /// in it); unmounted again on restore.
    pub fn ensure_debugfs(&mut self, at: &Path) -> bool {
        if at.join("sched").is_dir() {
            return true;
        }
        let (src, dst, fs) = (c"debugfs", std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap(), c"debugfs");
        // SAFETY: valid C strings, no data
        let r = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
        if r == 0 {
            self.mounted = Some(at.to_path_buf());
        }
        at.join("sched").is_dir()
    }

    /// Put everything back, newest first; what happened to each setting.
    pub fn restore(&mut self) -> Vec<SettingReport> {
        if let Some(d) = &self.done {
            return d.clone();
        }
        let mut out = Vec::new();
        for (path, before, set) in self.changed.iter().rev() {
            let _ = std::fs::write(path, before);
            let after = std::fs::read_to_string(path).ok().map(|s| s.trim().to_string());
            out.push(SettingReport {
                path: path.display().to_string(),
                before: before.clone(),
                set: set.clone(),
                restored: after.as_deref() == Some(before.as_str()),
                after_restore: after,
            });
        }
        out.reverse();
        if let Some(m) = self.mounted.take() {
            let c = std::ffi::CString::new(m.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a path we mounted
            unsafe { libc::umount(c.as_ptr()) };
        }
        self.done = Some(out.clone());
        out
    }
}

impl Drop for Settings {
    fn drop(&mut self) {
        self.restore();
    }
}

/// `autonuma-tiering`'s parameters, as set in the kernel (from the simulator's names:
/// [`crate::kernel_params`]); `None` leaves the kernel's value as it is.
#[derive(Clone, Debug)]
pub struct AutonumaParams {
    pub hot_threshold_ms: Option<u64>,
    /// sysctl numa_balancing_promote_rate_limit_MBps (MiB/s)
    pub rate_limit_mbps: u64,
    pub scan_period_min_ms: Option<u64>,
    pub scan_period_max_ms: Option<u64>,
    pub scan_delay_ms: Option<u64>,
    pub scan_size_mb: Option<u64>,
}

/// NUMA balancing in memory-tiering mode (`numa_balancing` = 2: hint faults promote hot pages
/// of a slow node to the fast one, within the rate limit and the hot threshold), and
/// demotion to the slow node by reclaim (`demotion_enabled`).
pub fn autonuma_tiering(root: &Path, p: &AutonumaParams, s: &mut Settings) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    s.set(&root.join("proc/sys/kernel/numa_balancing"), "2")?;
    s.set(&root.join("sys/kernel/mm/numa/demotion_enabled"), "true")?;
    let rl = root.join("proc/sys/kernel/numa_balancing_promote_rate_limit_MBps");
    if rl.exists() {
        s.set(&rl, &p.rate_limit_mbps.to_string())?;
    } else {
        notes.push("no numa_balancing_promote_rate_limit_MBps in this kernel (Linux 6.1+)".into());
    }
    // NUMA balancing's other knobs are in debugfs (since Linux 5.13)
    let knobs = [
        ("hot_threshold_ms", p.hot_threshold_ms),
        ("scan_period_min_ms", p.scan_period_min_ms),
        ("scan_period_max_ms", p.scan_period_max_ms),
        ("scan_delay_ms", p.scan_delay_ms),
        ("scan_size_mb", p.scan_size_mb),
    ];
    if knobs.iter().any(|(_, v)| v.is_some()) {
        let dbg = root.join("sys/kernel/debug");
        let mounted = s.ensure_debugfs(&dbg);
        for (name, v) in knobs {
            let Some(v) = v else { continue };
            let f = dbg.join("sched/numa_balancing").join(name);
            if !mounted {
                notes.push(format!("debugfs not available: {name} left as it is"));
            } else if f.exists() {
                s.set(&f, &v.to_string())?;
            } else {
                notes.push(format!("{} missing: {name} left as it is", f.display()));
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_put_back_on_drop_and_reported() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("numa_balancing");
        let b = d.path().join("demotion_enabled");
        std::fs::write(&a, "1\n").unwrap();
        std::fs::write(&b, "false\n").unwrap();
        let mut s = Settings::default();
        s.set(&a, "2").unwrap();
        s.set(&b, "true").unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "2");
        let r = s.restore();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| x.restored));
        assert_eq!((r[0].before.as_str(), r[0].set.as_str()), ("1", "2"));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "1");
        // a guard dropped on an error path restores too
        {
            let mut s = Settings::default();
            s.set(&b, "true").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "false");
        // a missing file is an error naming it, nothing changed
        let mut s = Settings::default();
        let e = s.set(&d.path().join("nope"), "1").unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
    }

    #[test]
    fn kernel_settings_are_refused_outside_the_testbed() {
        let d = tempfile::tempdir().unwrap();
        if std::env::var(ALLOW_ENV).as_deref() == Ok("1") {
            return;
        }
        let e = check_allowed(d.path(), "autonuma-tiering").unwrap_err().to_string();
        assert!(e.contains("only inside the testbed VM") && e.contains(ALLOW_ENV), "{e}");
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(d.path().join("etc/testbed-agent.sh"), "").unwrap();
        std::fs::write(d.path().join("proc/sys/kernel/hostname"), "somehost\n").unwrap();
        assert!(check_allowed(d.path(), "x").is_err());
        std::fs::write(d.path().join("proc/sys/kernel/hostname"), "tierkit-vm\n").unwrap();
        assert!(check_allowed(d.path(), "x").is_ok());
    }
}
