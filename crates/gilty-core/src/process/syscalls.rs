//! x86-64 syscall numbers gilty names in reports (arch/x86/entry/syscalls/syscall_64.tbl).

pub const FUTEX: i64 = 202;

const NAMES: &[(i64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (2, "open"),
    (3, "close"),
    (7, "poll"),
    (9, "mmap"),
    (11, "munmap"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (24, "sched_yield"),
    (34, "pause"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (56, "clone"),
    (59, "execve"),
    (61, "wait4"),
    (62, "kill"),
    (72, "fcntl"),
    (74, "fsync"),
    (75, "fdatasync"),
    (128, "rt_sigtimedwait"),
    (130, "rt_sigsuspend"),
    (202, "futex"),
    (213, "epoll_create"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (257, "openat"),
    (270, "pselect6"),
    (271, "ppoll"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (299, "recvmmsg"),
    (307, "sendmmsg"),
    (425, "io_uring_enter"),
    (441, "epoll_pwait2"),
];

pub fn name(nr: i64) -> String {
    NAMES
        .iter()
        .find(|(n, _)| *n == nr)
        .map(|(_, s)| (*s).to_owned())
        .unwrap_or_else(|| format!("syscall_{nr}"))
}
