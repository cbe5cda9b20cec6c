//! `union perf_mem_data_src` (PERF_SAMPLE_DATA_SRC) decoding and DRAM local/remote
//! classification.
//!
//! Bit layout from `include/uapi/linux/perf_event.h` (little-endian bitfield order, checked
//! against the `PERF_MEM_*_SHIFT` constants): `mem_op` 0-4, `mem_lvl` 5-18, `mem_snoop` 19-23,
//! `mem_lock` 24-25, `mem_dtlb` 26-32, `mem_lvl_num` 33-36, `mem_remote` 37, `mem_snoopx`
//! 38-39, `mem_blk` 40-42, `mem_hops` 43-45.
//!
//! How the kernel fills it, and so how it is read here:
//! * Intel PEBS load latency (`mem-loads`, `pebs_data_source[]` in arch/x86/events/intel/ds.c):
//!   older tables mark DRAM in `mem_lvl` (`LOC_RAM`, `REM_RAM1`, even with `mem_lvl_num` = L3
//!   for "L3 miss, remote shared"); Skylake and later also use `mem_lvl_num = RAM` plus
//!   `mem_remote`. Precise stores only say "L1 hit" or "L1 miss" (`P(LVL, L1) | HIT/MISS`):
//!   a store L1 miss is therefore *unknown*, not DRAM.
//! * AMD IBS op (arch/x86/events/amd/ibs.c): DRAM is `L(LOC_RAM) | LN(RAM)`, plus `REM` when
//!   IbsOpData2.RmtNode is set; caches use `LN(L3)`/`LN(ANY_CACHE)` with `HOPS`; `mem_op` from
//!   IbsOpData3 ld_op/st_op.
//! * Arm SPE: the kernel driver writes an AUX trace, not DATA_SRC; `perf script` synthesises
//!   DATA_SRC from the SPE packets (LLC hit/miss on generic cores; `LN(RAM)`/remote on
//!   Neoverse), which these rules read the same way.

use crate::sample::AccessKind;

pub const MEM_OP_NA: u64 = 0x01;
pub const MEM_OP_LOAD: u64 = 0x02;
pub const MEM_OP_STORE: u64 = 0x04;
pub const MEM_OP_PFETCH: u64 = 0x08;
pub const MEM_OP_EXEC: u64 = 0x10;
pub const MEM_OP_SHIFT: u32 = 0;

pub const MEM_LVL_NA: u64 = 0x01;
pub const MEM_LVL_HIT: u64 = 0x02;
pub const MEM_LVL_MISS: u64 = 0x04;
pub const MEM_LVL_L1: u64 = 0x08;
pub const MEM_LVL_LFB: u64 = 0x10;
pub const MEM_LVL_L2: u64 = 0x20;
pub const MEM_LVL_L3: u64 = 0x40;
pub const MEM_LVL_LOC_RAM: u64 = 0x80;
pub const MEM_LVL_REM_RAM1: u64 = 0x100;
pub const MEM_LVL_REM_RAM2: u64 = 0x200;
pub const MEM_LVL_REM_CCE1: u64 = 0x400;
pub const MEM_LVL_REM_CCE2: u64 = 0x800;
pub const MEM_LVL_IO: u64 = 0x1000;
pub const MEM_LVL_UNC: u64 = 0x2000;
pub const MEM_LVL_SHIFT: u32 = 5;

pub const MEM_SNOOP_SHIFT: u32 = 19;
pub const MEM_LOCK_SHIFT: u32 = 24;
pub const MEM_TLB_SHIFT: u32 = 26;

pub const MEM_LVLNUM_L1: u64 = 0x01;
pub const MEM_LVLNUM_L2: u64 = 0x02;
pub const MEM_LVLNUM_L3: u64 = 0x03;
pub const MEM_LVLNUM_L4: u64 = 0x04;
pub const MEM_LVLNUM_L2_MHB: u64 = 0x05;
pub const MEM_LVLNUM_MSC: u64 = 0x06;
pub const MEM_LVLNUM_UNC: u64 = 0x08;
pub const MEM_LVLNUM_CXL: u64 = 0x09;
pub const MEM_LVLNUM_IO: u64 = 0x0a;
pub const MEM_LVLNUM_ANY_CACHE: u64 = 0x0b;
pub const MEM_LVLNUM_LFB: u64 = 0x0c;
pub const MEM_LVLNUM_RAM: u64 = 0x0d;
pub const MEM_LVLNUM_PMEM: u64 = 0x0e;
pub const MEM_LVLNUM_NA: u64 = 0x0f;
pub const MEM_LVLNUM_SHIFT: u32 = 33;

pub const MEM_REMOTE_REMOTE: u64 = 0x01;
pub const MEM_REMOTE_SHIFT: u32 = 37;
pub const MEM_SNOOPX_SHIFT: u32 = 38;
pub const MEM_BLK_SHIFT: u32 = 40;

pub const MEM_HOPS_0: u64 = 0x01;
pub const MEM_HOPS_1: u64 = 0x02;
pub const MEM_HOPS_2: u64 = 0x03;
pub const MEM_HOPS_3: u64 = 0x04;
pub const MEM_HOPS_SHIFT: u32 = 43;

/// `PERF_MEM_S(a, s)`: a field value shifted into place.
pub const fn mem_s(value: u64, shift: u32) -> u64 {
    value << shift
}

/// A raw `perf_mem_data_src` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataSrc(pub u64);

/// Where an access was served from, as far as the hardware says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemSource {
    /// Main memory (DRAM, persistent memory or CXL memory). `remote`: another NUMA node.
    /// `hops`: `mem_hops` when given (0 = not given).
    Memory { remote: bool, hops: u8 },
    /// A cache (including line fill buffers and other cores' caches). `remote`: another node's.
    Cache { remote: bool },
    /// I/O or uncached memory.
    Other,
    /// Not available, or only "missed level X" without where it was served from.
    Unknown,
}

impl DataSrc {
    #[inline]
    fn bits(self, shift: u32, width: u32) -> u64 {
        (self.0 >> shift) & ((1u64 << width) - 1)
    }
    pub fn mem_op(self) -> u64 {
        self.bits(0, 5)
    }
    pub fn mem_lvl(self) -> u64 {
        self.bits(5, 14)
    }
    pub fn mem_snoop(self) -> u64 {
        self.bits(19, 5)
    }
    pub fn mem_lock(self) -> u64 {
        self.bits(24, 2)
    }
    pub fn mem_dtlb(self) -> u64 {
        self.bits(26, 7)
    }
    pub fn mem_lvl_num(self) -> u64 {
        self.bits(33, 4)
    }
    pub fn mem_remote(self) -> u64 {
        self.bits(37, 1)
    }
    pub fn mem_snoopx(self) -> u64 {
        self.bits(38, 2)
    }
    pub fn mem_blk(self) -> u64 {
        self.bits(40, 3)
    }
    pub fn mem_hops(self) -> u64 {
        self.bits(43, 3)
    }

    /// Load, store, or unknown (prefetch, exec, NA, or both bits set).
    pub fn kind(self) -> AccessKind {
        let op = self.mem_op();
        match (op & MEM_OP_LOAD != 0, op & MEM_OP_STORE != 0) {
            (true, false) => AccessKind::Load,
            (false, true) => AccessKind::Store,
            _ => AccessKind::Unknown,
        }
    }

    /// Where the access was served from (see the module doc for the rules per vendor).
    pub fn source(self) -> MemSource {
        let lvl = self.mem_lvl();
        let num = self.mem_lvl_num();
        let remote_flag = self.mem_remote() == 1;
        let rem_ram = lvl & (MEM_LVL_REM_RAM1 | MEM_LVL_REM_RAM2) != 0;
        let hops = self.mem_hops() as u8;
        // Memory, by level number or by the older level bits (either may carry it).
        if matches!(num, MEM_LVLNUM_RAM | MEM_LVLNUM_PMEM | MEM_LVLNUM_CXL)
            || lvl & MEM_LVL_LOC_RAM != 0
            || rem_ram
        {
            return MemSource::Memory {
                remote: remote_flag || rem_ram,
                hops,
            };
        }
        let hit = lvl & MEM_LVL_HIT != 0;
        let miss_only = lvl & MEM_LVL_MISS != 0 && !hit;
        let remote_cache = remote_flag || lvl & (MEM_LVL_REM_CCE1 | MEM_LVL_REM_CCE2) != 0;
        match num {
            MEM_LVLNUM_L1 | MEM_LVLNUM_L2 | MEM_LVLNUM_L3 | MEM_LVLNUM_L4 | MEM_LVLNUM_L2_MHB
            | MEM_LVLNUM_MSC | MEM_LVLNUM_ANY_CACHE | MEM_LVLNUM_LFB => {
                return if miss_only {
                    MemSource::Unknown
                } else {
                    MemSource::Cache {
                        remote: remote_cache,
                    }
                };
            }
            MEM_LVLNUM_IO | MEM_LVLNUM_UNC => return MemSource::Other,
            _ => {}
        }
        if lvl & (MEM_LVL_IO | MEM_LVL_UNC) != 0 {
            return MemSource::Other;
        }
        let cache_bits = MEM_LVL_L1
            | MEM_LVL_LFB
            | MEM_LVL_L2
            | MEM_LVL_L3
            | MEM_LVL_REM_CCE1
            | MEM_LVL_REM_CCE2;
        if hit && lvl & cache_bits != 0 {
            return MemSource::Cache {
                remote: remote_cache,
            };
        }
        MemSource::Unknown
    }

    /// For the load vector: `Some(true)` if served by memory (local or remote), `Some(false)`
    /// if by a cache or I/O, `None` if the hardware did not say.
    pub fn dram(self) -> Option<bool> {
        match self.source() {
            MemSource::Memory { .. } => Some(true),
            MemSource::Cache { .. } | MemSource::Other => Some(false),
            MemSource::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values built exactly like the kernel tables do (P(a,b) = PERF_MEM_S).
    fn p_op(v: u64) -> u64 {
        mem_s(v, MEM_OP_SHIFT)
    }
    fn p_lvl(v: u64) -> u64 {
        mem_s(v, MEM_LVL_SHIFT)
    }
    fn level(v: u64) -> u64 {
        mem_s(v, MEM_LVLNUM_SHIFT)
    }
    const REM: u64 = MEM_REMOTE_REMOTE << MEM_REMOTE_SHIFT;
    fn op_lh() -> u64 {
        p_op(MEM_OP_LOAD) | p_lvl(MEM_LVL_HIT)
    }
    fn snoop(v: u64) -> u64 {
        mem_s(v, MEM_SNOOP_SHIFT)
    }

    #[test]
    fn field_extraction_matches_the_header_layout() {
        let all_ones = DataSrc(u64::MAX);
        assert_eq!(all_ones.mem_op(), 0x1f);
        assert_eq!(all_ones.mem_lvl(), 0x3fff);
        assert_eq!(all_ones.mem_snoop(), 0x1f);
        assert_eq!(all_ones.mem_lock(), 0x3);
        assert_eq!(all_ones.mem_dtlb(), 0x7f);
        assert_eq!(all_ones.mem_lvl_num(), 0xf);
        assert_eq!(all_ones.mem_remote(), 1);
        assert_eq!(all_ones.mem_snoopx(), 0x3);
        assert_eq!(all_ones.mem_blk(), 0x7);
        assert_eq!(all_ones.mem_hops(), 0x7);
        // Each field alone, at the SHIFT the header defines.
        assert_eq!(DataSrc(0x1f << 19).mem_snoop(), 0x1f);
        assert_eq!(DataSrc(0x1f << 19).mem_lvl(), 0);
        assert_eq!(DataSrc(1 << 37).mem_remote(), 1);
        assert_eq!(DataSrc(1 << 37).mem_lvl_num(), 0);
        assert_eq!(DataSrc(3 << 43).mem_hops(), 3);
        assert_eq!(DataSrc(0x7f << 26).mem_dtlb(), 0x7f);
        assert_eq!(DataSrc(0x7f << 26).mem_lvl_num(), 0);
    }

    #[test]
    fn intel_snb_table_entries() {
        // 0x01 L1 hit
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_L1) | level(MEM_LVLNUM_L1) | snoop(0x02));
        assert_eq!(v.kind(), AccessKind::Load);
        assert_eq!(v.source(), MemSource::Cache { remote: false });
        assert_eq!(v.dram(), Some(false));
        // 0x00 unknown L3 miss: not known to be DRAM
        let v = DataSrc(p_op(MEM_OP_LOAD) | p_lvl(MEM_LVL_MISS) | level(MEM_LVLNUM_L3));
        assert_eq!(v.source(), MemSource::Unknown);
        assert_eq!(v.dram(), None);
        // 0x08 L3 miss, remote cache snoop hit
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_REM_CCE1) | REM | level(MEM_LVLNUM_L3));
        assert_eq!(v.source(), MemSource::Cache { remote: true });
        // 0x0a L3 miss, local DRAM
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_LOC_RAM) | level(MEM_LVLNUM_RAM) | snoop(0x04));
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: false,
                hops: 0
            }
        );
        assert_eq!(v.dram(), Some(true));
        // 0x0b (SNB table): remote DRAM flagged in mem_lvl although mem_lvl_num says L3
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_REM_RAM1) | REM | level(MEM_LVLNUM_L3));
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: true,
                hops: 0
            }
        );
        // 0x0d remote DRAM exclusive
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_REM_RAM1) | level(MEM_LVLNUM_RAM) | REM);
        assert_eq!(v.dram(), Some(true));
        // 0x0e I/O, 0x0f uncached
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_IO) | level(MEM_LVLNUM_NA));
        assert_eq!(v.source(), MemSource::Other);
        let v = DataSrc(op_lh() | p_lvl(MEM_LVL_UNC) | level(MEM_LVLNUM_NA));
        assert_eq!(v.dram(), Some(false));
    }

    #[test]
    fn intel_skylake_patched_entries() {
        // 0x0b: LEVEL(RAM) | REM, no mem_lvl RAM bit
        let v = DataSrc(op_lh() | level(MEM_LVLNUM_RAM) | REM | snoop(0x02));
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: true,
                hops: 0
            }
        );
        // 0x0c: remote cache forward (ANY_CACHE | REM)
        let v = DataSrc(op_lh() | level(MEM_LVLNUM_ANY_CACHE) | REM);
        assert_eq!(v.source(), MemSource::Cache { remote: true });
        // 0x08 with pmem: LEVEL(PMEM) counts as memory
        let v = DataSrc(op_lh() | level(MEM_LVLNUM_PMEM));
        assert_eq!(v.dram(), Some(true));
    }

    #[test]
    fn intel_precise_stores_only_know_l1() {
        let tlb = mem_s(0x02, MEM_TLB_SHIFT);
        let hit = DataSrc(p_op(MEM_OP_STORE) | p_lvl(MEM_LVL_L1 | MEM_LVL_HIT) | tlb);
        assert_eq!(hit.kind(), AccessKind::Store);
        assert_eq!(hit.source(), MemSource::Cache { remote: false });
        let miss = DataSrc(p_op(MEM_OP_STORE) | p_lvl(MEM_LVL_L1 | MEM_LVL_MISS) | tlb);
        assert_eq!(miss.kind(), AccessKind::Store);
        assert_eq!(miss.dram(), None);
    }

    #[test]
    fn amd_ibs_entries() {
        let l = |x: u64| p_lvl(x | MEM_LVL_HIT);
        let hops = |x: u64| mem_s(x, MEM_HOPS_SHIFT);
        // local DRAM
        let v = DataSrc(p_op(MEM_OP_LOAD) | l(MEM_LVL_LOC_RAM) | level(MEM_LVLNUM_RAM));
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: false,
                hops: 0
            }
        );
        // DRAM on a remote node (RmtNode)
        let v = DataSrc(p_op(MEM_OP_LOAD) | l(MEM_LVL_LOC_RAM) | level(MEM_LVLNUM_RAM) | REM);
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: true,
                hops: 0
            }
        );
        // Zen4 far CCX cache
        let v = DataSrc(
            p_op(MEM_OP_STORE)
                | l(MEM_LVL_REM_CCE2)
                | level(MEM_LVLNUM_ANY_CACHE)
                | REM
                | hops(MEM_HOPS_1),
        );
        assert_eq!(v.kind(), AccessKind::Store);
        assert_eq!(v.source(), MemSource::Cache { remote: true });
        // L1 hit without level number (DC hit)
        let v = DataSrc(p_op(MEM_OP_LOAD) | l(MEM_LVL_L1));
        assert_eq!(v.dram(), Some(false));
        // CXL memory with hops
        let v = DataSrc(p_op(MEM_OP_LOAD) | level(MEM_LVLNUM_CXL) | REM | hops(MEM_HOPS_2));
        assert_eq!(
            v.source(),
            MemSource::Memory {
                remote: true,
                hops: 3
            }
        );
    }

    #[test]
    fn spe_as_synthesised_by_perf() {
        // Generic SPE: LLC miss only -> unknown; LLC hit -> cache.
        let miss = DataSrc(p_op(MEM_OP_LOAD) | p_lvl(MEM_LVL_L3 | MEM_LVL_MISS));
        assert_eq!(miss.dram(), None);
        let hit = DataSrc(p_op(MEM_OP_LOAD) | p_lvl(MEM_LVL_L3 | MEM_LVL_HIT));
        assert_eq!(hit.dram(), Some(false));
        // Neoverse: DRAM source.
        let dram = DataSrc(
            p_op(MEM_OP_LOAD) | p_lvl(MEM_LVL_LOC_RAM | MEM_LVL_HIT) | level(MEM_LVLNUM_RAM),
        );
        assert_eq!(dram.dram(), Some(true));
    }

    #[test]
    fn not_available_is_unknown() {
        let na = DataSrc(p_op(MEM_OP_NA) | p_lvl(MEM_LVL_NA) | level(MEM_LVLNUM_NA));
        assert_eq!(na.kind(), AccessKind::Unknown);
        assert_eq!(na.source(), MemSource::Unknown);
        assert_eq!(DataSrc(0).dram(), None);
        assert_eq!(DataSrc(0).kind(), AccessKind::Unknown);
        let both = DataSrc(p_op(MEM_OP_LOAD | MEM_OP_STORE));
        assert_eq!(both.kind(), AccessKind::Unknown);
    }
}
