//! The two MPI ABIs the tracer speaks, told apart at run time.
//!
//! MPI's C interface is fixed by `mpi.h`, not by a binary standard: Open MPI's handles
//! (`MPI_Comm`, `MPI_Datatype`, `MPI_Group`, `MPI_Request`) are pointers to its objects and
//! `MPI_COMM_WORLD` is the address of `ompi_mpi_comm_world`; MPICH's (and its derivatives')
//! handles are 32-bit integers with fixed values for the predefined ones. One library serves
//! both by carrying every handle in a pointer-sized integer — an `int` argument arrives in the
//! low half of a 64-bit register or stack slot on x86-64 and AArch64, and is passed on to the
//! real function unchanged — and by looking up which library the process loaded when
//! `MPI_Init` returns. The constants below are the values in each `mpi.h` (Open MPI 4.1,
//! MPICH 4.0, checked against Debian 12's headers).

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A handle of either ABI, pointer-sized.
pub type H = usize;

/// `MPI_UNDEFINED`, the same in both.
pub const UNDEFINED: c_int = -32766;

/// Which implementation the process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    /// Open MPI: pointer handles.
    OpenMpi,
    /// MPICH and MPICH-derived libraries: 32-bit integer handles.
    Mpich,
}

/// The predefined values the tracer needs, for the running implementation.
#[derive(Debug, Clone, Copy)]
pub struct Abi {
    /// The implementation.
    pub imp: Impl,
    /// `MPI_COMM_WORLD`.
    pub world: H,
    /// `MPI_BYTE`.
    pub byte: H,
    /// `MPI_IN_PLACE`.
    pub in_place: usize,
    /// `MPI_PROC_NULL`.
    pub proc_null: c_int,
}

fn lookup(name: &CStr) -> usize {
    // SAFETY: dlsym with a valid NUL-terminated name; RTLD_DEFAULT searches the global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

impl Abi {
    /// The running implementation, or `None` when neither is loaded.
    pub fn detect() -> Option<Abi> {
        let world = lookup(c"ompi_mpi_comm_world");
        if world != 0 {
            let byte = lookup(c"ompi_mpi_byte");
            return (byte != 0).then_some(Abi {
                imp: Impl::OpenMpi,
                world,
                byte,
                in_place: 1,
                proc_null: -2,
            });
        }
        let mpich = [c"MPII_Version_string", c"MPIR_Version_string"]
            .iter()
            .any(|n| lookup(n) != 0);
        mpich.then_some(Abi {
            imp: Impl::Mpich,
            world: 0x4400_0000,
            byte: 0x4c00_010d,
            in_place: usize::MAX,
            proc_null: -1,
        })
    }

    /// A handle as a comparable key: MPICH's live in the low 32 bits only.
    pub fn norm(&self, h: H) -> H {
        match self.imp {
            Impl::OpenMpi => h,
            Impl::Mpich => h & 0xffff_ffff,
        }
    }

    /// Read the handle stored at `p` (an `MPI_Request *` or `MPI_Comm *`).
    ///
    /// # Safety
    /// `p` must point to a handle of this implementation.
    pub unsafe fn read(&self, p: *const c_void) -> H {
        match self.imp {
            Impl::OpenMpi => *(p as *const usize),
            Impl::Mpich => *(p as *const u32) as usize,
        }
    }

    /// Size of a handle in an array (`MPI_Request array_of_requests[]`).
    pub fn handle_size(&self) -> usize {
        match self.imp {
            Impl::OpenMpi => std::mem::size_of::<usize>(),
            Impl::Mpich => 4,
        }
    }
}

/// The address of `P<name>`, looked up once per call site and cached in `cache`.
pub fn resolve(pname: &CStr, cache: &AtomicUsize) -> Option<usize> {
    let f = cache.load(Ordering::Relaxed);
    if f != 0 {
        return Some(f);
    }
    // SAFETY: dlsym with a valid name; RTLD_NEXT skips this library (which defines only the
    // MPI_ names, never the PMPI_ ones, but the rule keeps it from finding itself).
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, pname.as_ptr()) } as usize;
    if f == 0 {
        return None;
    }
    cache.store(f, Ordering::Relaxed);
    Some(f)
}
