//! The generated opcode tables agree with facts measured on the interpreters (research notes).

use gilty_layouts::opcodes_for;

fn op(t: &gilty_layouts::opcodes::OpcodeTable, name: &str) -> u8 {
    (0..=255u8).find(|&o| t.name(o) == name).unwrap_or_else(|| panic!("{name} not in {:?}", t.version))
}

#[test]
fn specialized_forms_belong_to_their_family() {
    for minor in [11, 12, 13] {
        let t = opcodes_for(3, minor).unwrap();
        let load_attr = op(t, "LOAD_ATTR");
        assert_eq!(t.family_of(op(t, "LOAD_ATTR_INSTANCE_VALUE")), Some(load_attr));
        assert_eq!(t.family_of(load_attr), Some(load_attr));
        assert_eq!(t.caches[op(t, "LOAD_ATTR_INSTANCE_VALUE") as usize], t.caches[load_attr as usize]);
        assert!(t.caches[load_attr as usize] >= 4);
        assert_eq!(t.family_of(op(t, "NOP")), None);
        assert_eq!(t.name(t.extended_arg), "EXTENDED_ARG");
    }
    // 3.12's LOAD_FAST "family" is superinstructions without a counter.
    let t12 = opcodes_for(3, 12).unwrap();
    assert_eq!(t12.family_of(op(t12, "LOAD_FAST__LOAD_FAST")), None);
    let t11 = opcodes_for(3, 11).unwrap();
    assert!(t11.adaptive[op(t11, "LOAD_ATTR_ADAPTIVE") as usize]);
    assert_eq!(t11.family_of(op(t11, "LOAD_METHOD_WITH_VALUES")), Some(op(t11, "LOAD_METHOD")));
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
}
