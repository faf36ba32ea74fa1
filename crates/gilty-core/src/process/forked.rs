//! Test set-up shared by the copy-on-write tests: an anonymous mapping of this test process, and a
//! forked child that shares it, does one step when told and exits when let go.

/// A private anonymous mapping of `pages` pages, unmapped on drop.
pub struct Mapping {
    pub base: *mut u8,
    pub pages: usize,
    pub page_size: usize,
}

impl Mapping {
    /// Maps `pages` pages and writes `fill` to the first byte of each, so that every page is
    /// present.
    pub fn new(pages: usize, fill: u8) -> Mapping {
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: a fresh private anonymous mapping this process owns.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page_size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        assert!(!base.is_null() && base as isize != -1);
        let m = Mapping {
            base,
            pages,
            page_size,
        };
        m.fill(0..pages, fill);
        m
    }

    pub fn start(&self) -> u64 {
        self.base as u64
    }

    pub fn len(&self) -> usize {
        self.pages * self.page_size
    }

    /// Writes `value` to the first byte of each page in `pages` (makes a forked child copy them).
    pub fn fill(&self, pages: std::ops::Range<usize>, value: u8) {
        for i in pages {
            assert!(i < self.pages);
            // SAFETY: inside the mapping.
            unsafe { *self.base.add(i * self.page_size) = value };
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len()) };
    }
}

/// A forked child of this test process. It waits to be told, runs its step, says so, and exits once
/// let go (on drop, which also reaps it).
pub struct Forked {
    pub pid: i32,
    go: i32,
    done: i32,
}

impl Forked {
    /// Forks a child that will run `step` when `step()` is called. `step` runs in the child of a
    /// multi-threaded process: raw syscalls and writes to memory only, no allocation.
    pub fn spawn(step: impl FnOnce()) -> Forked {
        let (mut go, mut done) = ([0i32; 2], [0i32; 2]);
        // SAFETY: plain pipe/fork; the child uses raw syscalls, runs `step` and _exits.
        unsafe {
            assert_eq!(libc::pipe(go.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(done.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                // The child's own copy of the write end closed, so that the parent closing its one
                // reads as end of file here.
                libc::close(go[1]);
                libc::close(done[0]);
                let mut b = [0u8; 1];
                if libc::read(go[0], b.as_mut_ptr() as *mut libc::c_void, 1) == 1 {
                    step();
                    libc::write(done[1], b.as_ptr() as *const libc::c_void, 1);
                    libc::read(go[0], b.as_mut_ptr() as *mut libc::c_void, 1);
                }
                libc::_exit(0);
            }
            libc::close(go[0]);
            libc::close(done[1]);
            Forked {
                pid,
                go: go[1],
                done: done[0],
            }
        }
    }

    /// Has the child run its step, and waits until it has.
    pub fn step(&self) {
        let mut b = [0u8; 1];
        // SAFETY: writes and reads one byte on pipes this value owns.
        unsafe {
            assert_eq!(
                libc::write(self.go, b.as_ptr() as *const libc::c_void, 1),
                1
            );
            assert_eq!(
                libc::read(self.done, b.as_mut_ptr() as *mut libc::c_void, 1),
                1
            );
        }
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        // SAFETY: closing our pipe ends lets the child exit; waitpid reaps our own child.
        unsafe {
            libc::close(self.go);
            libc::close(self.done);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}
