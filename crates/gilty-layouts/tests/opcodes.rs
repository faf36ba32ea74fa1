//! The generated opcode tables agree with facts measured on the interpreters (research notes).

use gilty_layouts::opcodes_for;

fn op(t: &gilty_layouts::opcodes::OpcodeTable, name: &str) -> u8 {
    (0..=255u8)
        .find(|&o| t.name(o) == name)
        .unwrap_or_else(|| panic!("{name} not in {:?}", t.version))
}

#[test]
fn specialized_forms_belong_to_their_family() {
    for minor in [11, 12, 13, 14, 15] {
        let t = opcodes_for(3, minor).unwrap();
        let load_attr = op(t, "LOAD_ATTR");
        assert_eq!(
            t.family_of(op(t, "LOAD_ATTR_INSTANCE_VALUE")),
            Some(load_attr)
        );
        assert_eq!(t.family_of(load_attr), Some(load_attr));
        assert_eq!(
            t.caches[op(t, "LOAD_ATTR_INSTANCE_VALUE") as usize],
            t.caches[load_attr as usize]
        );
        assert!(t.caches[load_attr as usize] >= 4);
        assert_eq!(t.family_of(op(t, "NOP")), None);
        assert_eq!(t.name(t.extended_arg), "EXTENDED_ARG");
    }
    // 3.12's LOAD_FAST "family" is superinstructions without a counter.
    let t12 = opcodes_for(3, 12).unwrap();
    assert_eq!(t12.family_of(op(t12, "LOAD_FAST__LOAD_FAST")), None);
    let t11 = opcodes_for(3, 11).unwrap();
    assert!(t11.adaptive[op(t11, "LOAD_ATTR_ADAPTIVE") as usize]);
    assert_eq!(
        t11.family_of(op(t11, "LOAD_METHOD_WITH_VALUES")),
        Some(op(t11, "LOAD_METHOD"))
    );
}

#[test]
fn counter_rules_match_the_headers() {
    let t11 = opcodes_for(3, 11).unwrap().counter;
    assert_eq!((t11.specialized_start, t11.specialized_shift), (53, 0));
    assert_eq!(t11.adaptive_start, Some((31 << 4) | 5));
    for minor in [12, 13] {
        let c = opcodes_for(3, minor).unwrap().counter;
        assert_eq!(c.warmup, Some((1 << 4) | 1));
        assert_eq!(c.specialized_start, 52 << 4);
        assert_eq!(c.specialized_shift, 4);
    }
    // 3.14: a plain u16 (value << 4 | backoff), restarts at 2^backoff - 1 up to backoff 12.
    let c14 = opcodes_for(3, 14).unwrap().counter;
    assert_eq!(
        (c14.value_shift, c14.max_backoff, c14.warmup),
        (4, 12, Some((1 << 4) | 1))
    );
    assert_eq!((c14.specialized_start, c14.specialized_shift), (52 << 4, 4));
    assert_eq!(c14.first_backoff, (3 << 4) | 2);
    // 3.15: a 3-bit backoff; a failed first attempt restarts at value 6 (7 is prime), backoff 2.
    let c15 = opcodes_for(3, 15).unwrap().counter;
    assert_eq!(
        (c15.value_shift, c15.max_backoff, c15.warmup),
        (3, 6, Some((1 << 3) | 1))
    );
    assert_eq!((c15.specialized_start, c15.specialized_shift), (52 << 3, 3));
    assert_eq!(
        (c15.first_backoff, c15.unreachable),
        ((6 << 3) | 2, Some(7))
    );
}

#[test]
fn jit_warm_up_counters_are_not_specialization_sites() {
    // 3.14+: JUMP_BACKWARD's cache (and 3.15's RESUME's) counts toward a tier-2 trace; its forms
    // (*_JIT, *_NO_JIT) follow the build and never miss, so a loop is no site to report.
    for minor in [14, 15] {
        let t = opcodes_for(3, minor).unwrap();
        let jb = op(t, "JUMP_BACKWARD");
        assert_eq!(t.caches[jb as usize], 1, "3.{minor}");
        assert_eq!(t.family_of(jb), None, "3.{minor}");
        assert_eq!(
            t.deopt[op(t, "JUMP_BACKWARD_NO_JIT") as usize],
            jb,
            "3.{minor}"
        );
        assert_eq!(t.family_of(op(t, "RESUME")), None, "3.{minor}");
    }
    let t15 = opcodes_for(3, 15).unwrap();
    assert_eq!(
        t15.family_of(op(t15, "CALL_EX_PY")),
        Some(op(t15, "CALL_FUNCTION_EX"))
    );
    assert_eq!(t15.caches[op(t15, "RESUME") as usize], 1);
}
