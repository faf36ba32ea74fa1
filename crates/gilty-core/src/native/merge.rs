//! Interleaving a thread's native frames with its Python frames.
//!
//! Each call of the interpreter's evaluation loop (`_PyEval_EvalFrameDefault`) on the native stack
//! runs one or more Python frames: on 3.10 exactly one; on 3.11+ every frame pushed without leaving
//! the loop, up to the frame entered from C (3.11 `is_entry`; 3.12+ the frame just above a shim
//! frame owned by the C stack, `FRAME_OWNED_BY_CSTACK`, which each evaluation-loop call pushes
//! first). The Python stack is cut into those calls (`call_ends`) and each call takes the place of
//! its evaluation-loop frame, innermost with innermost. The counts must agree: if they do not, the
//! two stacks do not describe the same moment (or the unwind stopped early) and nothing is merged.
//!
//! Frames of the interpreter's own binary are left out where Python frames stand for them (the call
//! machinery between a Python line and the C function it calls), but kept at the top of the stack,
//! where they say what the interpreter itself is doing (waiting for the GIL, collecting garbage).

use super::unwind::NativeFrame;
use crate::interp::frames::Frame;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MixedFrame {
    Python(Frame),
    Native(NativeFrame),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    /// Evaluation-loop frames on the native stack vs. evaluation-loop calls in the Python stack.
    Mismatch {
        native_calls: usize,
        python_calls: usize,
    },
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeError::Mismatch { native_calls, python_calls } => write!(
                f,
                "native stack has {native_calls} evaluation-loop frames, the Python stack {python_calls} calls: not the same moment"
            ),
        }
    }
}

pub fn is_eval_frame(f: &NativeFrame) -> bool {
    f.function.as_deref().is_some_and(|n| {
        n == "_PyEval_EvalFrameDefault" || n.starts_with("_PyEval_EvalFrameDefault.")
    })
}

/// The C library and loader: kept at the top of a stack (where the thread waits), left out at its
/// root.
pub fn is_system_library(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    [
        "libc.so",
        "libc-",
        "libpthread",
        "ld-linux",
        "ld-musl",
        "libc.musl",
        "linux-vdso",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Python frames (innermost first) grouped into evaluation-loop calls: `call_ends[i]` is true where
/// frame i is the outermost frame of its call.
pub fn python_calls<'a>(frames: &'a [Frame], call_ends: &[bool]) -> Vec<&'a [Frame]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in frames.iter().enumerate() {
        if call_ends.get(i).copied().unwrap_or(true) || i + 1 == frames.len() {
            out.push(&frames[start..=i]);
            start = i + 1;
        }
    }
    out
}

/// The mixed stack, innermost first. `interpreter`: the paths of the files holding the interpreter
/// (libpython and the executable, or the executable alone).
pub fn merge(
    native: &[NativeFrame],
    python: &[Frame],
    call_ends: &[bool],
    interpreter: &[&str],
) -> Result<Vec<MixedFrame>, MergeError> {
    let calls = python_calls(python, call_ends);
    let evals = native.iter().filter(|f| is_eval_frame(f)).count();
    if evals != calls.len() {
        return Err(MergeError::Mismatch {
            native_calls: evals,
            python_calls: calls.len(),
        });
    }
    let in_interp = |f: &NativeFrame| {
        f.library
            .as_deref()
            .is_some_and(|l| interpreter.contains(&l))
    };
    let in_system = |f: &NativeFrame| f.library.as_deref().is_some_and(is_system_library);
    let mut out = Vec::with_capacity(native.len() + python.len());
    let mut calls = calls.into_iter();
    let mut at_top = true;
    let mut seen_eval = 0;
    for f in native {
        if is_eval_frame(f) {
            at_top = false;
            seen_eval += 1;
            out.extend(
                calls
                    .next()
                    .unwrap()
                    .iter()
                    .cloned()
                    .map(MixedFrame::Python),
            );
            continue;
        }
        if at_top && (in_interp(f) || in_system(f)) {
            out.push(MixedFrame::Native(f.clone()));
            continue;
        }
        at_top = false;
        let at_root = seen_eval == evals && evals > 0;
        if in_interp(f) || (at_root && in_system(f)) {
            continue;
        }
        out.push(MixedFrame::Native(f.clone()));
    }
    Ok(out)
}

/// `merge` for a native stack whose unwind stopped early (a frame in an anonymous executable
/// mapping, or in a library unloaded since): the frames it reached, one `[unknown]` frame for what
/// it could not reach, then the Python calls the native stack did not reach. Only when it reached
/// no more evaluation-loop frames than the Python stack has calls; else `Mismatch`.
pub fn merge_truncated(
    native: &[NativeFrame],
    python: &[Frame],
    call_ends: &[bool],
    interpreter: &[&str],
) -> Result<Vec<MixedFrame>, MergeError> {
    let calls = python_calls(python, call_ends);
    let evals = native.iter().filter(|f| is_eval_frame(f)).count();
    if evals > calls.len() {
        return Err(MergeError::Mismatch {
            native_calls: evals,
            python_calls: calls.len(),
        });
    }
    let reached: usize = calls[..evals].iter().map(|c| c.len()).sum();
    let mut out = merge(
        native,
        &python[..reached],
        &call_ends[..reached.min(call_ends.len())],
        interpreter,
    )?;
    out.push(MixedFrame::Native(NativeFrame {
        function: None,
        library: None,
        offset: 0,
        ..Default::default()
    }));
    out.extend(python[reached..].iter().cloned().map(MixedFrame::Python));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(f: &str, lib: &str) -> NativeFrame {
        NativeFrame {
            function: Some(f.into()),
            library: Some(lib.into()),
            offset: 0,
            ..Default::default()
        }
    }
    fn p(f: &str) -> Frame {
        Frame {
            function: f.into(),
            file: "t.py".into(),
            line: 1,
        }
    }
    const PY: &str = "/usr/bin/python3.11";
    const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
    const EXT: &str = "/tmp/ext.so";

    fn labels(m: &[MixedFrame]) -> Vec<String> {
        m.iter()
            .map(|f| match f {
                MixedFrame::Python(p) => format!("py:{}", p.function),
                MixedFrame::Native(n) => n.label(),
            })
            .collect()
    }

    #[test]
    fn c_chain_under_python_line() {
        let native = [
            n("inner_spin", EXT),
            n("middle", EXT),
            n("outer", EXT),
            n("cfunction_vectorcall_NOARGS", PY),
            n("_PyEval_EvalFrameDefault", PY),
            n("_PyEval_Vector", PY),
            n("_PyEval_EvalFrameDefault", PY),
            n("Py_RunMain", PY),
            n("__libc_start_call_main", LIBC),
        ];
        let python = [p("work"), p("helper"), p("<module>")];
        // work and helper run in one loop call (helper called work from Python); <module> in
        // another.
        let m = merge(&native, &python, &[false, true, true], &[PY]).unwrap();
        assert_eq!(
            labels(&m),
            [
                "inner_spin",
                "middle",
                "outer",
                "py:work",
                "py:helper",
                "py:<module>"
            ]
        );
    }

    #[test]
    fn waiting_thread_keeps_interpreter_top() {
        let native = [
            n("pthread_cond_timedwait", LIBC),
            n("take_gil", PY),
            n("PyEval_RestoreThread", PY),
            n("_PyEval_EvalFrameDefault", PY),
            n("start_thread", LIBC),
        ];
        let m = merge(&native, &[p("run")], &[true], &[PY]).unwrap();
        assert_eq!(
            labels(&m),
            [
                "pthread_cond_timedwait",
                "take_gil",
                "PyEval_RestoreThread",
                "py:run"
            ]
        );
    }

    #[test]
    fn count_mismatch_is_an_error() {
        let native = [n("inner", EXT), n("_PyEval_EvalFrameDefault", PY)];
        let err = merge(&native, &[p("a"), p("b")], &[true, true], &[PY]).unwrap_err();
        assert_eq!(
            err,
            MergeError::Mismatch {
                native_calls: 1,
                python_calls: 2
            }
        );
        assert!(merge(&native, &[], &[], &[PY]).is_err());
    }

    #[test]
    fn cold_part_counts_as_eval() {
        assert!(is_eval_frame(&n("_PyEval_EvalFrameDefault.cold", PY)));
        assert!(!is_eval_frame(&n("_PyEval_EvalFrame", PY)));
        let unnamed = NativeFrame {
            function: None,
            library: Some(PY.into()),
            offset: 5,
            ..Default::default()
        };
        assert_eq!(unnamed.label(), "python3.11+0x5");
    }

    #[test]
    fn truncated_unwind_keeps_python_below_unknown() {
        let native = [NativeFrame {
            function: None,
            library: None,
            offset: 0x7f00,
            ..Default::default()
        }];
        let m = merge_truncated(&native, &[p("anon"), p("run")], &[true, true], &[PY]).unwrap();
        assert_eq!(labels(&m), ["[unknown]", "[unknown]", "py:anon", "py:run"]);
        let deeper = [
            n("inner", EXT),
            n("_PyEval_EvalFrameDefault", PY),
            n("_PyEval_EvalFrameDefault", PY),
        ];
        assert!(merge_truncated(&deeper, &[p("a")], &[true], &[PY]).is_err());
    }

    #[test]
    fn groups_python_frames_by_call() {
        let py = [p("a"), p("b"), p("c"), p("d")];
        let g = python_calls(&py, &[false, true, false, true]);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].len(), 2);
        assert_eq!(python_calls(&py, &[true; 4]).len(), 4);
    }
}
