//! The `perf_event_attr` ABI, `perf_event_open(2)` and the perf ioctls, written out by hand from
//! the kernel uapi header `/usr/include/linux/perf_event.h` (no bindgen). The unit tests compile a
//! C probe against that header, when a C compiler is present, and compare every offset and flag
//! bit.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::error::{permission_denied, TraceError};

/// `struct perf_event_attr`, complete up to `PERF_ATTR_SIZE_VER7` (128 bytes, `sig_data` is the
/// last field in the header). Unions are flattened to the member we use; the bitfield block is one
/// `u64` (`flags`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfEventAttr {
    /// `__u32 type;` — major type; for uprobes the uprobe PMU's dynamic type from sysfs.
    pub type_: u32,
    /// `__u32 size;` — sizeof the struct as we know it, for forward/backward compatibility.
    pub size: u32,
    /// `__u64 config;` — for the uprobe PMU: bit `retprobe` (sysfs format, "config:0") and the
    /// reference-counter offset in bits 32-63 ("config:32-63").
    pub config: u64,
    /// `union { __u64 sample_period; __u64 sample_freq; };`
    pub sample_period: u64,
    /// `__u64 sample_type;` — `PERF_SAMPLE_*` bits.
    pub sample_type: u64,
    /// `__u64 read_format;`
    pub read_format: u64,
    /// The `__u64 disabled:1, inherit:1, ...` bitfield block; see the `FLAG_*` constants.
    pub flags: u64,
    /// `union { __u32 wakeup_events; __u32 wakeup_watermark; };`
    pub wakeup_events: u32,
    /// `__u32 bp_type;`
    pub bp_type: u32,
    /// `union { __u64 bp_addr; __u64 kprobe_func; __u64 uprobe_path; __u64 config1; };` — for the
    /// uprobe PMU a user pointer to the NUL-terminated path of the probed file.
    pub config1: u64,
    /// `union { __u64 bp_len; __u64 kprobe_addr; __u64 probe_offset; __u64 config2; };` — for the
    /// uprobe PMU the file offset of the probed instruction.
    pub config2: u64,
    /// `__u64 branch_sample_type;`
    pub branch_sample_type: u64,
    /// `__u64 sample_regs_user;` — mask of `enum perf_event_x86_regs` bits (asm/perf_regs.h).
    pub sample_regs_user: u64,
    /// `__u32 sample_stack_user;`
    pub sample_stack_user: u32,
    /// `__s32 clockid;` — used when `use_clockid` is set.
    pub clockid: i32,
    /// `__u64 sample_regs_intr;`
    pub sample_regs_intr: u64,
    /// `__u32 aux_watermark;`
    pub aux_watermark: u32,
    /// `__u16 sample_max_stack;`
    pub sample_max_stack: u16,
    /// `__u16 __reserved_2;`
    pub reserved_2: u16,
    /// `__u32 aux_sample_size;`
    pub aux_sample_size: u32,
    /// `__u32 __reserved_3;`
    pub reserved_3: u32,
    /// `__u64 sig_data;`
    pub sig_data: u64,
}

/// `#define PERF_ATTR_SIZE_VER7 128 /* add: sig_data */`
pub const PERF_ATTR_SIZE_VER7: u32 = 128;
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == PERF_ATTR_SIZE_VER7 as usize);

// Bit positions in the bitfield block, in declaration order of the header (first declared = bit 0
// on little-endian x86-64): disabled, inherit, pinned, exclusive, exclude_user, exclude_kernel,
// exclude_hv, exclude_idle, mmap, comm, freq, inherit_stat, enable_on_exec, task, watermark,
// precise_ip (2 bits), mmap_data, sample_id_all, exclude_host, exclude_guest,
// exclude_callchain_kernel, exclude_callchain_user, mmap2, comm_exec, use_clockid, context_switch,
// write_backward, namespaces, ksymbol, bpf_event, aux_output, cgroup, text_poke, build_id,
// inherit_thread, remove_on_exec, sigtrap, __reserved_1 (26 bits).
/// `disabled : 1` — off by default.
pub const FLAG_DISABLED: u64 = 1 << 0;
/// `inherit : 1` — children inherit it.
pub const FLAG_INHERIT: u64 = 1 << 1;
/// `exclude_kernel : 1`
pub const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
/// `exclude_hv : 1`
pub const FLAG_EXCLUDE_HV: u64 = 1 << 6;
/// `sample_id_all : 1` — sample_type fields on all records (after 15 flags and the 2-bit
/// precise_ip).
pub const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
/// `use_clockid : 1` — use `clockid` for time fields.
pub const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `inherit_thread : 1` — children only inherit if cloned with CLONE_THREAD.
pub const FLAG_INHERIT_THREAD: u64 = 1 << 35;
/// `remove_on_exec : 1`
pub const FLAG_REMOVE_ON_EXEC: u64 = 1 << 36;

// enum perf_event_sample_format
/// `PERF_SAMPLE_IP = 1U << 0`
pub const PERF_SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID = 1U << 1` — `{ u32 pid, tid; }`
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME = 1U << 2` — `{ u64 time; }`
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_REGS_USER = 1U << 12` — `{ u64 abi; u64 regs[weight(mask)]; }`
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
/// `PERF_SAMPLE_IDENTIFIER = 1U << 16` — `{ u64 id; }` first in a sample, last in sample_id.
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;

// enum perf_event_type (record types in the ring buffer)
/// `PERF_RECORD_LOST = 2` — `{ header; u64 id; u64 lost; sample_id; }`
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE = 9`
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_LOST_SAMPLES = 13` — `{ header; u64 lost; sample_id; }`
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;

// enum perf_sample_regs_abi
/// `PERF_SAMPLE_REGS_ABI_NONE = 0` — no registers follow (e.g. the sample was taken in a kernel
/// thread).
pub const PERF_SAMPLE_REGS_ABI_NONE: u64 = 0;

// enum perf_type_id
/// `PERF_TYPE_SOFTWARE = 1`
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_DUMMY = 9` (enum perf_sw_ids)
pub const PERF_COUNT_SW_DUMMY: u64 = 9;

/// `#define PERF_FLAG_FD_CLOEXEC (1UL << 3)` — flags argument of perf_event_open.
pub const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

// Ioctls: _IO(type, nr) = type << 8 | nr; _IOR(type, nr, T) = 2 << 30 | sizeof(T) << 16 | type << 8 | nr
// (asm-generic/ioctl.h: _IOC_READ = 2, dir shift 30, size shift 16, type shift 8).
const IOC_MAGIC: libc::c_ulong = b'$' as libc::c_ulong;
/// `#define PERF_EVENT_IOC_ENABLE _IO ('$', 0)`
pub const PERF_EVENT_IOC_ENABLE: libc::c_ulong = IOC_MAGIC << 8;
/// `#define PERF_EVENT_IOC_DISABLE _IO ('$', 1)`
pub const PERF_EVENT_IOC_DISABLE: libc::c_ulong = (IOC_MAGIC << 8) | 1;
/// `#define PERF_EVENT_IOC_SET_OUTPUT _IO ('$', 5)`
pub const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = (IOC_MAGIC << 8) | 5;
/// `#define PERF_EVENT_IOC_ID _IOR('$', 7, __u64 *)` — the size is that of a pointer (8 on x86-64).
pub const PERF_EVENT_IOC_ID: libc::c_ulong = (2 << 30) | (8 << 16) | (IOC_MAGIC << 8) | 7;

/// The uprobe PMU as sysfs describes it.
#[derive(Debug, Clone, Copy)]
pub struct UprobePmu {
    /// `/sys/bus/event_source/devices/uprobe/type`
    pub type_: u32,
    /// Bit of `config` that makes a return probe (`format/retprobe` reads "config:N").
    pub retprobe_bit: u32,
}

const UPROBE_SYSFS: &str = "/sys/bus/event_source/devices/uprobe";

impl UprobePmu {
    pub fn from_sysfs() -> Result<UprobePmu, TraceError> {
        let missing = || {
            TraceError::NoUprobePmu(format!(
                "this kernel has no uprobe PMU ({UPROBE_SYSFS} missing; needs Linux 4.17+ with CONFIG_UPROBE_EVENTS)"
            ))
        };
        let type_ =
            std::fs::read_to_string(format!("{UPROBE_SYSFS}/type")).map_err(|_| missing())?;
        let type_: u32 = type_.trim().parse().map_err(|_| missing())?;
        // "config:0" on every kernel so far; parse it anyway, it is what the format file is for.
        let retprobe_bit = std::fs::read_to_string(format!("{UPROBE_SYSFS}/format/retprobe"))
            .ok()
            .and_then(|s| {
                s.trim()
                    .strip_prefix("config:")
                    .and_then(|b| b.parse().ok())
            })
            .unwrap_or(0);
        if retprobe_bit >= 64 {
            return Err(missing());
        }
        Ok(UprobePmu {
            type_,
            retprobe_bit,
        })
    }
}

/// `perf_event_open(attr, pid, cpu, group_fd = -1, PERF_FLAG_FD_CLOEXEC)`.
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: attr points to a fully initialised struct whose `size` field tells the kernel how
    // much to read.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this fd and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub fn ioctl_enable(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain ioctl on a perf fd with an integer argument.
    check(unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) })
}

pub fn ioctl_disable(fd: RawFd) -> io::Result<()> {
    // SAFETY: as above.
    check(unsafe { libc::ioctl(fd, PERF_EVENT_IOC_DISABLE as _, 0) })
}

/// Sends `fd`'s records into the ring buffer mmap'd on `target`.
pub fn ioctl_set_output(fd: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: PERF_EVENT_IOC_SET_OUTPUT takes the target fd as its integer argument.
    check(unsafe { libc::ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT as _, target as libc::c_ulong) })
}

/// The event's id, as PERF_SAMPLE_IDENTIFIER reports it.
pub fn ioctl_id(fd: RawFd) -> io::Result<u64> {
    let mut id: u64 = 0;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer.
    check(unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ID as _, &mut id as *mut u64) })?;
    Ok(id)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Maps a perf_event_open / mmap errno to a user-facing error. `what` names the probe.
pub fn open_error(err: &io::Error, what: &str) -> TraceError {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => permission_denied("open perf events"),
        Some(libc::ESRCH) => TraceError::TargetGone(format!("the target thread exited while attaching {what}")),
        Some(libc::ENOENT) => TraceError::TargetGone(format!("cannot attach {what}: the probed file is gone (ENOENT)")),
        Some(libc::EMFILE) | Some(libc::ENFILE) => TraceError::Io(format!(
            "cannot attach {what}: out of file descriptors (one per probe per thread; raise `ulimit -n`)"
        )),
        Some(libc::EINVAL) => TraceError::Io(format!(
            "the kernel rejected the uprobe {what} (EINVAL: offset not at an instruction of an executable mapping?)"
        )),
        _ => TraceError::Io(format!("perf_event_open for {what} failed: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn ioctl_numbers() {
        assert_eq!(PERF_EVENT_IOC_ENABLE, 0x2400);
        assert_eq!(PERF_EVENT_IOC_SET_OUTPUT, 0x2405);
        assert_eq!(PERF_EVENT_IOC_ID, 0x8008_2407);
    }

    /// Compiles a C program against the installed uapi header that prints every offset, every
    /// bitfield bit we use and the ioctl numbers, and compares with this file. Skipped without a C
    /// compiler or header.
    #[test]
    #[allow(clippy::unnecessary_cast)] // c_ulong is u64 only on 64-bit targets
    fn layout_matches_uapi_header() {
        let header = std::path::Path::new("/usr/include/linux/perf_event.h");
        if !header.exists() {
            eprintln!("SKIP layout check: {} missing", header.display());
            return;
        }
        let dir = std::env::temp_dir().join(format!("gilty-trace-attr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("probe.c");
        let exe = dir.join("probe");
        std::fs::write(
            &src,
            r#"
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <linux/perf_event.h>
#define OFF(f) printf(#f " %zu\n", offsetof(struct perf_event_attr, f))
#define BIT(f) do { struct perf_event_attr a; unsigned long long v; memset(&a, 0, sizeof a); a.f = 1; \
    memcpy(&v, (char *)&a + offsetof(struct perf_event_attr, read_format) + 8, 8); printf(#f " %llu\n", v); } while (0)
#define MOFF(f) printf("mmap." #f " %zu\n", offsetof(struct perf_event_mmap_page, f))
int main(void) {
    printf("sizeof %zu\n", sizeof(struct perf_event_attr));
    OFF(type); OFF(size); OFF(config); OFF(sample_period); OFF(sample_type); OFF(read_format);
    OFF(wakeup_events); OFF(bp_type); OFF(config1); OFF(config2); OFF(branch_sample_type);
    OFF(sample_regs_user); OFF(sample_stack_user); OFF(clockid); OFF(sample_regs_intr);
    OFF(aux_watermark); OFF(sample_max_stack); OFF(aux_sample_size); OFF(sig_data);
    BIT(disabled); BIT(inherit); BIT(exclude_kernel); BIT(exclude_hv); BIT(sample_id_all);
    BIT(use_clockid); BIT(inherit_thread); BIT(remove_on_exec);
    MOFF(data_head); MOFF(data_tail); MOFF(data_offset); MOFF(data_size);
    printf("ioc.enable %lu\nioc.disable %lu\nioc.set_output %lu\nioc.id %lu\n",
        (unsigned long)PERF_EVENT_IOC_ENABLE, (unsigned long)PERF_EVENT_IOC_DISABLE,
        (unsigned long)PERF_EVENT_IOC_SET_OUTPUT, (unsigned long)PERF_EVENT_IOC_ID);
    printf("sample.tid %d\nsample.time %d\nsample.regs_user %d\nsample.identifier %d\n",
        PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_IDENTIFIER);
    printf("record.lost %d\nrecord.sample %d\nrecord.lost_samples %d\n",
        PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PERF_RECORD_LOST_SAMPLES);
    return 0;
}
"#,
        )
        .unwrap();
        let cc = std::process::Command::new("cc")
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .output();
        let ok = matches!(&cc, Ok(o) if o.status.success());
        if !ok {
            eprintln!("SKIP layout check: no working C compiler");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        let out = std::process::Command::new(&exe).output().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8(out.stdout).unwrap();
        let got = |k: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix(' ')))
                .unwrap_or_else(|| panic!("{k} missing in probe output:\n{text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(got("sizeof"), std::mem::size_of::<PerfEventAttr>() as u64);
        macro_rules! off {
            ($c:literal, $r:ident) => {
                assert_eq!(
                    got($c),
                    offset_of!(PerfEventAttr, $r) as u64,
                    "offset of {}",
                    $c
                )
            };
        }
        off!("type", type_);
        off!("size", size);
        off!("config", config);
        off!("sample_period", sample_period);
        off!("sample_type", sample_type);
        off!("read_format", read_format);
        off!("wakeup_events", wakeup_events);
        off!("bp_type", bp_type);
        off!("config1", config1);
        off!("config2", config2);
        off!("branch_sample_type", branch_sample_type);
        off!("sample_regs_user", sample_regs_user);
        off!("sample_stack_user", sample_stack_user);
        off!("clockid", clockid);
        off!("sample_regs_intr", sample_regs_intr);
        off!("aux_watermark", aux_watermark);
        off!("sample_max_stack", sample_max_stack);
        off!("aux_sample_size", aux_sample_size);
        off!("sig_data", sig_data);
        // The bitfield block sits right after read_format, where `flags` is.
        assert_eq!(
            offset_of!(PerfEventAttr, flags),
            offset_of!(PerfEventAttr, read_format) + 8
        );
        assert_eq!(got("disabled"), FLAG_DISABLED);
        assert_eq!(got("inherit"), FLAG_INHERIT);
        assert_eq!(got("exclude_kernel"), FLAG_EXCLUDE_KERNEL);
        assert_eq!(got("exclude_hv"), FLAG_EXCLUDE_HV);
        assert_eq!(got("sample_id_all"), FLAG_SAMPLE_ID_ALL);
        assert_eq!(got("use_clockid"), FLAG_USE_CLOCKID);
        assert_eq!(got("inherit_thread"), FLAG_INHERIT_THREAD);
        assert_eq!(got("remove_on_exec"), FLAG_REMOVE_ON_EXEC);
        assert_eq!(got("mmap.data_head"), crate::ring::OFF_DATA_HEAD as u64);
        assert_eq!(got("mmap.data_tail"), crate::ring::OFF_DATA_TAIL as u64);
        assert_eq!(got("mmap.data_offset"), crate::ring::OFF_DATA_OFFSET as u64);
        assert_eq!(got("mmap.data_size"), crate::ring::OFF_DATA_SIZE as u64);
        assert_eq!(got("ioc.enable"), PERF_EVENT_IOC_ENABLE as u64);
        assert_eq!(got("ioc.disable"), PERF_EVENT_IOC_DISABLE as u64);
        assert_eq!(got("ioc.set_output"), PERF_EVENT_IOC_SET_OUTPUT as u64);
        assert_eq!(got("ioc.id"), PERF_EVENT_IOC_ID as u64);
        assert_eq!(got("sample.tid"), PERF_SAMPLE_TID);
        assert_eq!(got("sample.time"), PERF_SAMPLE_TIME);
        assert_eq!(got("sample.regs_user"), PERF_SAMPLE_REGS_USER);
        assert_eq!(got("sample.identifier"), PERF_SAMPLE_IDENTIFIER);
        assert_eq!(got("record.lost"), PERF_RECORD_LOST as u64);
        assert_eq!(got("record.sample"), PERF_RECORD_SAMPLE as u64);
        assert_eq!(got("record.lost_samples"), PERF_RECORD_LOST_SAMPLES as u64);
    }
}
