//! Decoding adaptive bytecode (`co_code_adaptive`, 3.11+) into instructions with their
//! specialization state, from bytes alone (so it is tested on buffers).
//!
//! Counter semantics per version (the numbers come from the generated `CounterRules`):
//! - 3.11 (Python/specialize.c, ceval.c): a code object is quickened after 8 calls or back-edges;
//!   until then sites carry their base opcode ("cold"). Quickening turns them into `*_ADAPTIVE`
//!   with counter 0: the next execution tries to specialize. A `*_ADAPTIVE` site counts down
//!   `value = word >> 4` executions to its next attempt (backoff exponent in the low 4 bits). A
//!   specialized site's counter is a plain count of misses left (53 after specializing); at 0 it
//!   goes back to `*_ADAPTIVE` (restarting at 31 with backoff 5).
//! - 3.12/3.13: every site starts with the warm-up word (value 1, backoff 1) and counts down in the
//!   base opcode, trying to specialize when the value reaches 0 (its 2nd execution). A specialized
//!   site's value starts at 52; every miss runs the base opcode, which decrements it; at 0 the next
//!   miss re-specializes (for the object it sees), keeping a specialized name while missing. A
//!   failed attempt writes the base opcode back with value `2^b - 1` and backoff b + 1.
//! - 3.14/3.15: as 3.12/3.13 (3.15 with a 3-bit backoff and a table of restart values), except that
//!   a LOAD_ATTR of an attribute neither the class nor the instance has (a `__getattr__` fallback)
//!   keeps the base opcode with the cooldown word (value 52, backoff 0): retried every 52
//!   executions.

use gilty_layouts::opcodes::{CounterRules, OpcodeTable};

/// What a site is doing, judged from its opcode and counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A specialized variant is in place.
    Specialized,
    /// Will try to specialize on one of its next executions (first attempt).
    Warming,
    /// Runs the generic path, counting down to the next attempt after failed attempt(s) or (3.11) a
    /// de-specialization.
    Backoff,
    /// Not executed yet (3.12+: warm-up word untouched) or its code object not quickened (3.11).
    Cold,
    /// 3.13: a counter that never counts (`UNREACHABLE_BACKOFF`).
    Generic,
    /// `sys.monitoring`/tracing replaced the opcode; the original form cannot be read here.
    Instrumented,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Specialized => "specialized",
            Form::Warming => "warming",
            Form::Backoff => "backoff",
            Form::Cold => "cold",
            Form::Generic => "generic",
            Form::Instrumented => "instrumented",
        }
    }
}

/// The counter word decoded for its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The raw 16-bit word in the first inline cache entry.
    pub word: u16,
    /// Specialized: misses left before de-/re-specialization; otherwise executions left before the
    /// next specialization attempt.
    pub value: u16,
    /// Backoff exponent (adaptive/generic forms; 0 for 3.11 specialized sites).
    pub backoff: u8,
    /// Specialized: misses since the site was (re)specialized, read from the counter.
    pub misses_since_specialized: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Byte offset in the code, as `dis` reports it.
    pub offset: u32,
    pub opcode: u8,
    pub name: &'static str,
    /// With EXTENDED_ARG prefixes applied.
    pub oparg: u32,
    /// The specializing family (base opcode name), if this is a site.
    pub family: Option<&'static str>,
    pub form: Option<Form>,
    pub counter: Option<Counter>,
    /// The other inline cache entries (type/keys versions, indexes): they change only when the
    /// site is (re)specialized, so they identify which specialization is in place.
    pub cache: Vec<u16>,
    /// BINARY_OP: the operator symbol of its oparg.
    pub operator: Option<&'static str>,
}

impl Instruction {
    /// Index in 16-bit code units (for line tables and frame positions).
    pub fn unit(&self) -> usize {
        self.offset as usize / 2
    }
    /// Identifies the specialization in place (opcode + cache contents); None unless specialized.
    pub fn fingerprint(&self) -> Option<u64> {
        if self.form != Some(Form::Specialized) {
            return None;
        }
        // FNV-1a: stable, no dependency.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in std::iter::once(self.opcode as u16).chain(self.cache.iter().copied()) {
            for byte in b.to_le_bytes() {
                h ^= byte as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        }
        Some(h)
    }
}

fn word_at(code: &[u8], unit: usize) -> Option<u16> {
    Some(u16::from_le_bytes([
        *code.get(2 * unit)?,
        *code.get(2 * unit + 1)?,
    ]))
}

/// Form and counter of a site with opcode `op` (whose family is known) and counter `word`.
pub fn classify(t: &OpcodeTable, op: u8, word: u16) -> (Form, Counter) {
    let r: &CounterRules = &t.counter;
    let base = t.deopt[op as usize];
    let mask = (1u16 << r.value_shift) - 1;
    let (value, backoff) = (word >> r.value_shift, (word & mask) as u8);
    let plain = Counter {
        word,
        value,
        backoff,
        misses_since_specialized: None,
    };
    if t.name(op).starts_with("INSTRUMENTED_") {
        return (Form::Instrumented, plain);
    }
    if op != base && !t.adaptive[op as usize] {
        let left = word >> r.specialized_shift;
        let start = r.specialized_start >> r.specialized_shift;
        let back = if r.specialized_shift == 0 { 0 } else { backoff };
        let c = Counter {
            word,
            value: left,
            backoff: back,
            misses_since_specialized: Some(start.saturating_sub(left)),
        };
        return (Form::Specialized, c);
    }
    if r.unreachable == Some(word) {
        return (Form::Generic, plain);
    }
    let form = match r.warmup {
        // 3.11: base opcode = not quickened; *_ADAPTIVE with backoff 0 = freshly quickened.
        None if op == base => Form::Cold,
        None if backoff == 0 => Form::Warming,
        None => Form::Backoff,
        // 3.12+: the base opcode counts down itself. Warming is the warm-up word counted down (same
        // backoff, smaller value); any other backoff, 0 included, counts down to a later attempt
        // (3.14+ writes the cooldown word, backoff 0, on the base opcode for an attribute nobody
        // has).
        Some(w) if word == w => Form::Cold,
        Some(w) if backoff as u16 == (w & mask) && value < (w >> r.value_shift) => Form::Warming,
        Some(_) => Form::Backoff,
    };
    (form, plain)
}

/// Decodes a whole `co_code_adaptive` array. Stops at a truncated trailing instruction.
pub fn decode(t: &OpcodeTable, code: &[u8]) -> Vec<Instruction> {
    let units = code.len() / 2;
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut ext: u32 = 0;
    while i < units {
        let op = code[2 * i];
        let arg = code[2 * i + 1] as u32;
        let oparg = (ext << 8) | arg;
        ext = if op == t.extended_arg { oparg } else { 0 };
        let n_caches = t.caches[op as usize] as usize;
        let family = t.family_of(op);
        let (mut form, mut counter, mut cache) = (None, None, Vec::new());
        if let (Some(_), true) = (family, n_caches > 0) {
            if let Some(word) = word_at(code, i + 1) {
                let (f, c) = classify(t, op, word);
                form = Some(f);
                counter = Some(c);
                cache = (2..=n_caches)
                    .filter_map(|k| word_at(code, i + k))
                    .collect();
            }
        }
        out.push(Instruction {
            offset: (2 * i) as u32,
            opcode: op,
            name: t.name(op),
            oparg,
            family: family.map(|b| t.name(b)),
            form,
            counter,
            cache,
            operator: (family.map(|b| t.name(b)) == Some("BINARY_OP"))
                .then(|| t.binary_ops.get(oparg as usize).copied())
                .flatten(),
        });
        i += 1 + n_caches;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gilty_layouts::opcodes_for;

    fn op(t: &OpcodeTable, name: &str) -> u8 {
        (0..=255u8).find(|&o| t.name(o) == name).unwrap()
    }

    fn unit(op: u8, arg: u8) -> [u8; 2] {
        [op, arg]
    }

    #[test]
    fn specialized_counter_reads_misses_since_specialization() {
        for minor in [11u8, 12, 13] {
            let t = opcodes_for(3, minor).unwrap();
            let r = t.counter;
            let spec = op(t, "LOAD_ATTR_INSTANCE_VALUE");
            // Five misses after specializing.
            let word = r.specialized_start - (5 << r.specialized_shift);
            let (form, c) = classify(t, spec, word);
            assert_eq!(form, Form::Specialized, "3.{minor}");
            assert_eq!(c.misses_since_specialized, Some(5), "3.{minor}");
        }
    }

    #[test]
    fn generic_forms_by_version() {
        let t12 = opcodes_for(3, 12).unwrap();
        let la = op(t12, "LOAD_ATTR");
        assert_eq!(classify(t12, la, 17).0, Form::Cold); // warm-up word: never executed
        assert_eq!(classify(t12, la, 1).0, Form::Warming); // value 0, backoff 1: executed once
        assert_eq!(
            classify(t12, la, t12.counter.first_backoff).0,
            Form::Backoff
        );
        let t11 = opcodes_for(3, 11).unwrap();
        assert_eq!(classify(t11, op(t11, "LOAD_ATTR"), 0).0, Form::Cold);
        assert_eq!(
            classify(t11, op(t11, "LOAD_ATTR_ADAPTIVE"), 0).0,
            Form::Warming
        );
        assert_eq!(
            classify(
                t11,
                op(t11, "LOAD_ATTR_ADAPTIVE"),
                t11.counter.adaptive_start.unwrap()
            )
            .0,
            Form::Backoff
        );
        let t13 = opcodes_for(3, 13).unwrap();
        assert_eq!(classify(t13, op(t13, "LOAD_ATTR"), 0xffff).0, Form::Generic);
    }

    #[test]
    fn cooldown_count_on_the_base_opcode_is_backoff_not_warming() {
        // 3.14+: an attribute neither the class nor the instance has keeps LOAD_ATTR with the
        // cooldown word (value 52, backoff 0), counting down to its next attempt.
        for minor in [14u8, 15] {
            let t = opcodes_for(3, minor).unwrap();
            let r = t.counter;
            let la = op(t, "LOAD_ATTR");
            let (form, c) = classify(t, la, r.specialized_start - (7 << r.value_shift));
            assert_eq!(
                (form, c.value, c.backoff),
                (Form::Backoff, 45, 0),
                "3.{minor}"
            );
            assert_eq!(
                classify(t, la, r.warmup.unwrap()).0,
                Form::Cold,
                "3.{minor}"
            );
            assert_eq!(
                classify(t, la, r.warmup.unwrap() - (1 << r.value_shift)).0,
                Form::Warming,
                "3.{minor}"
            );
            assert_eq!(
                classify(t, la, r.first_backoff).0,
                Form::Backoff,
                "3.{minor}"
            );
            assert_eq!(
                classify(t, la, r.unreachable.unwrap()).0,
                Form::Generic,
                "3.{minor}"
            );
            let spec = op(t, "LOAD_ATTR_INSTANCE_VALUE");
            let (form, c) = classify(t, spec, r.specialized_start - (3 << r.specialized_shift));
            assert_eq!(
                (form, c.misses_since_specialized),
                (Form::Specialized, Some(3)),
                "3.{minor}"
            );
        }
    }

    #[test]
    fn decode_applies_extended_arg_and_skips_caches() {
        let t = opcodes_for(3, 12).unwrap();
        let mut code = Vec::new();
        code.extend(unit(op(t, "RESUME"), 0));
        code.extend(unit(t.extended_arg, 1));
        code.extend(unit(op(t, "LOAD_GLOBAL"), 2));
        let n = t.caches[op(t, "LOAD_GLOBAL") as usize] as usize;
        code.extend(17u16.to_le_bytes());
        for k in 1..n {
            code.extend((k as u16).to_le_bytes());
        }
        code.extend(unit(op(t, "RETURN_VALUE"), 0));
        let ins = decode(t, &code);
        let names: Vec<_> = ins.iter().map(|i| i.name).collect();
        assert_eq!(
            names,
            ["RESUME", "EXTENDED_ARG", "LOAD_GLOBAL", "RETURN_VALUE"]
        );
        assert_eq!(ins[2].oparg, 0x102);
        assert_eq!(ins[2].offset, 4);
        assert_eq!(ins[2].form, Some(Form::Cold));
        assert_eq!(ins[2].cache.len(), n - 1);
        assert_eq!(ins[3].offset as usize, 6 + 2 * n);
        assert_eq!(ins[3].family, None);
    }
}
