//! Regression guards: the generated tables must keep matching the offsets measured in
//! /work/shared/research/cpython-internals.md (pyenv builds 3.10.13, 3.11.7, 3.12.1, 3.13.0,
//! x86-64). A failure here means the generator or the headers it read changed.

use gilty_layouts::{layout_for, Layout, SUPPORTED};

fn l(minor: u8) -> &'static Layout {
    layout_for(3, minor).unwrap_or_else(|| panic!("no table for 3.{minor}"))
}

#[test]
fn every_supported_version_has_its_table() {
    for &(major, minor) in SUPPORTED {
        assert_eq!(layout_for(major, minor).unwrap().version, (major, minor));
    }
    assert!(layout_for(3, 9).is_none());
    assert!(layout_for(3, 16).is_none());
    assert!(layout_for(2, 7).is_none());
}

#[test]
fn runtime() {
    let want = [
        (10, 672, 32),
        (11, 166688, 40),
        (12, 459944, 40),
        (13, 283320, 632),
    ];
    for (minor, size, head) in want {
        assert_eq!(l(minor).runtime_size, size, "3.{minor} runtime_size");
        assert_eq!(
            l(minor).runtime_interpreters_head,
            head,
            "3.{minor} interpreters.head"
        );
    }
}

#[test]
fn interpreter() {
    // (minor, next, id, threads.head, gc)
    for (minor, next, id, head, gc) in [
        (10, 0, 24, 8, 616),
        (11, 0, 48, 16, 648),
        (12, 0, 8, 72, 112),
        (13, 7264, 7272, 7344, 7400),
    ] {
        let t = l(minor);
        assert_eq!(
            (
                t.interp_next,
                t.interp_id,
                t.interp_threads_head,
                t.interp_gc
            ),
            (next, id, head, gc),
            "3.{minor}"
        );
    }
}

#[test]
fn gil_location_and_fields() {
    assert_eq!((l(10).runtime_gil, l(10).interp_gil_ptr), (Some(352), None));
    assert_eq!((l(11).runtime_gil, l(11).interp_gil_ptr), (Some(360), None));
    assert_eq!((l(12).runtime_gil, l(12).interp_gil_ptr), (None, Some(384)));
    assert_eq!((l(13).runtime_gil, l(13).interp_gil_ptr), (None, Some(16)));
    for &(_, minor) in SUPPORTED {
        let t = l(minor);
        let got = (
            t.gil_interval,
            t.gil_last_holder,
            t.gil_locked,
            t.gil_switch_number,
            t.gil_cond,
            t.gil_mutex,
            t.gil_switch_cond,
            t.gil_switch_mutex,
            t.gil_size,
        );
        assert_eq!(got, (0, 8, 16, 24, 32, 80, 120, 168, 208), "3.{minor}");
    }
}

#[test]
fn gc() {
    for (minor, gc) in [(10, 616), (11, 648), (12, 112), (13, 7400)] {
        let t = l(minor);
        assert_eq!(t.interp_gc, gc);
        assert_eq!(t.gc_collecting, 200, "3.{minor}");
        assert_eq!(t.gc_generation_size, 24, "3.{minor}");
        // gen[0].threshold / count measured at interp+40 / +44 past gc.
        assert_eq!(
            t.gc_generations + t.gc_generation_threshold,
            40,
            "3.{minor}"
        );
        assert_eq!(t.gc_generations + t.gc_generation_count, 44, "3.{minor}");
    }
}

#[test]
fn thread_state() {
    for &(_, minor) in SUPPORTED {
        let t = l(minor);
        assert_eq!(
            (t.tstate_prev, t.tstate_next, t.tstate_interp),
            (0, 8, 16),
            "3.{minor}"
        );
    }
    assert_eq!(
        (l(10).tstate_thread_id, l(10).tstate_native_thread_id),
        (176, None)
    );
    assert_eq!(
        (l(11).tstate_thread_id, l(11).tstate_native_thread_id),
        (152, Some(160))
    );
    assert_eq!(
        (l(12).tstate_thread_id, l(12).tstate_native_thread_id),
        (136, Some(144))
    );
    assert_eq!(
        (l(13).tstate_thread_id, l(13).tstate_native_thread_id),
        (152, Some(160))
    );
    let frame = |t: &Layout| {
        (
            t.tstate_frame,
            t.tstate_cframe,
            t.cframe_current_frame,
            t.tstate_current_frame,
        )
    };
    assert_eq!(frame(l(10)), (Some(24), None, None, None));
    assert_eq!(frame(l(11)), (None, Some(56), Some(8), None));
    assert_eq!(frame(l(12)), (None, Some(56), Some(0), None));
    assert_eq!(frame(l(13)), (None, None, None, Some(72)));
    assert_eq!(l(13).tstate_state, Some(40));
    assert!(SUPPORTED[..3]
        .iter()
        .all(|&(_, m)| l(m).tstate_state.is_none()));
}

#[test]
fn frames() {
    let f = |t: &Layout| (t.frame_code, t.frame_previous, t.frame_instr, t.frame_owner);
    assert_eq!(f(l(10)), (32, 24, 96, None));
    assert_eq!(f(l(11)), (32, 48, 56, Some(69)));
    assert_eq!(f(l(12)), (0, 8, 56, Some(70)));
    assert_eq!(f(l(13)), (0, 8, 56, Some(70)));
}

#[test]
fn code_objects() {
    let c = |t: &Layout| {
        (
            t.code_filename,
            t.code_name,
            t.code_qualname,
            t.code_firstlineno,
            t.code_linetable,
        )
    };
    assert_eq!(c(l(10)), (104, 112, None, 40, 120));
    assert_eq!(c(l(11)), (112, 120, Some(128), 72, 136));
    assert_eq!(c(l(12)), (112, 120, Some(128), 68, 136));
    assert_eq!(c(l(13)), (112, 120, Some(128), 68, 136));
    let b = |t: &Layout| (t.code_code, t.code_code_adaptive);
    assert_eq!(b(l(10)), (Some(48), None));
    assert_eq!(b(l(11)), (None, Some(184)));
    assert_eq!(b(l(12)), (None, Some(192)));
    assert_eq!(b(l(13)), (None, Some(200)));
}

#[test]
fn objects() {
    // Compact ASCII data at +48 (3.10/3.11) or +40 (3.12+); bytes data at +32.
    for (minor, ascii) in [(10, 48), (11, 48), (12, 40), (13, 40)] {
        let t = l(minor);
        assert_eq!(t.unicode_ascii_size, ascii, "3.{minor}");
        assert_eq!(t.bytes_sval, 32, "3.{minor}");
        assert_eq!(t.object_type, 8, "3.{minor}");
        assert_eq!(t.module_dict, 16, "3.{minor}");
    }
    assert_eq!(l(10).dictkeys_size, 8); // Py_ssize_t dk_size (reproduced struct)
    assert_eq!((l(10).dictkeys_nentries, l(10).dictkeys_indices), (32, 40));
    for minor in [11, 12, 13] {
        let t = l(minor);
        let got = (
            t.dictkeys_size,
            t.dictkeys_log2_index_bytes,
            t.dictkeys_kind,
            t.dictkeys_nentries,
            t.dictkeys_indices,
        );
        assert_eq!(got, (8, Some(9), Some(10), 24, 32), "3.{minor}");
    }
}
