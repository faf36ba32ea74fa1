//! Per-version opcode metadata for reading adaptive bytecode (`co_code_adaptive`, 3.11+).
//!
//! The tables in `generated_opcodes/` are written by `tools/gen_opcodes.py` from each interpreter's
//! own `dis`/`opcode` modules, its headers' counter functions, and two measured facts; never by
//! hand.

/// What the 16-bit counter in the first inline cache entry of a specializable instruction means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterRules {
    /// Adaptive/generic form: `value = word >> value_shift`, `backoff = word & ((1 << value_shift)
    /// - 1)`.
    pub value_shift: u8,
    /// Largest backoff exponent (3.12-3.14: the counter restarts at `2^backoff - 1` after a failed
    /// attempt; 3.15 restarts from a table, 1, 6, 30, 126, 508, 2052, 8190 for backoff 0..6).
    pub max_backoff: u8,
    /// 3.12+: the word every site starts with when its code object is created
    /// (`adaptive_counter_warmup()`).
    pub warmup: Option<u16>,
    /// 3.11: calls or loop iterations before a code object is quickened
    /// (`QUICKENING_WARMUP_DELAY`).
    pub quickening_warmup_delay: Option<u16>,
    /// 3.11: the word a de-specialized (`*_ADAPTIVE`) site restarts with
    /// (`adaptive_counter_start()`).
    pub adaptive_start: Option<u16>,
    /// The word after the first failed specialization attempt.
    pub first_backoff: u16,
    /// The word of a freshly specialized site (measured: 3.11 `miss_counter_start()`; 3.12+
    /// cooldown).
    pub specialized_start: u16,
    /// One miss of a specialized site subtracts `1 << specialized_shift` (3.11: 0, a plain count).
    pub specialized_shift: u8,
    /// 3.13: the counter word that never counts (`UNREACHABLE_BACKOFF`).
    pub unreachable: Option<u16>,
}

#[derive(Debug)]
pub struct OpcodeTable {
    pub version: (u8, u8),
    pub extended_arg: u8,
    /// Name of every opcode (empty for unused numbers), specialized forms included.
    pub names: [&'static str; 256],
    /// The family (base) opcode of every opcode; itself for base opcodes.
    pub deopt: [u8; 256],
    /// Inline cache entries (16-bit code units) that follow the instruction.
    pub caches: [u8; 256],
    /// Whether this base opcode specializes and keeps a counter in its first cache entry.
    pub family: [bool; 256],
    /// 3.11: the family's `*_ADAPTIVE` form (counting down to a specialization attempt).
    pub adaptive: [bool; 256],
    /// BINARY_OP's operator symbol per oparg (`opcode._nb_ops`).
    pub binary_ops: &'static [&'static str],
    pub counter: CounterRules,
}

impl OpcodeTable {
    pub fn name(&self, op: u8) -> &'static str {
        self.names[op as usize]
    }
    /// The specializing family an opcode belongs to, if any.
    pub fn family_of(&self, op: u8) -> Option<u8> {
        let base = self.deopt[op as usize];
        self.family[base as usize].then_some(base)
    }
}

/// 3.10's opcache (the seed of PEP 659): where a code object keeps it, and the opcodes that use it.
/// `co_opcache_map[i]` (i = index of the instruction after the site, in code units) is 0 for no
/// entry, else n for `co_opcache[n - 1]`; an entry's `optimized` is > 0 while the cache is in use
/// (misses it still tolerates), 0 before it was primed, < 0 once deoptimized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcacheLayout {
    pub version: (u8, u8),
    pub code_opcache_map: u64,
    pub code_opcache: u64,
    pub code_opcache_flag: u64,
    pub code_opcache_size: u64,
    pub entry_size: u64,
    pub entry_optimized: u64,
    pub load_global: u8,
    pub load_attr: u8,
    pub load_method: u8,
    pub extended_arg: u8,
}
