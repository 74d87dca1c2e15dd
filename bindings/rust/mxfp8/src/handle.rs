//! An owned reference on one of the library's handles (a tensor, grouped experts, a plan), made by a
//! `*_create`-style call and released once on drop.
use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{check, Error};
use crate::sys;

/// A C handle type and the call that releases one reference on it.
pub(crate) trait Release {
    /// Releases one reference.
    ///
    /// # Safety
    /// `handle` is live and the caller owns the reference it gives up.
    unsafe fn release(handle: *mut Self);
}

macro_rules! releases {
    ($($handle:ident => $release:ident),*) => {$(
        impl Release for sys::$handle {
            unsafe fn release(handle: *mut Self) {
                sys::$release(handle)
            }
        }
    )*};
}
releases!(mxfp8_tensor => mxfp8_tensor_release, mxfp8_grouped_tensor => mxfp8_grouped_tensor_release,
          mxfp8_plan => mxfp8_plan_release);

/// One owned reference on a C handle.
pub(crate) struct Handle<T: Release>(NonNull<T>);

// SAFETY: the header's handles are immutable and reference counted with an atomic count: any number of
// threads may use one at once, and it may be released on any thread. A type holding one whose use must
// not be shared (a Plan: its runs write the same destinations) opts out of Sync itself.
unsafe impl<T: Release> Send for Handle<T> {}
unsafe impl<T: Release> Sync for Handle<T> {}

impl<T: Release> Handle<T> {
    /// The handle `make` writes through its out-pointer when it returns OK (`what` names the call).
    pub(crate) fn make(what: &str, make: impl FnOnce(*mut *mut T) -> sys::mxfp8_status) -> Result<Self, Error> {
        let mut out = ptr::null_mut();
        check(make(&mut out))?;
        Ok(Self(NonNull::new(out).unwrap_or_else(|| panic!("{what} returned OK and NULL"))))
    }
    /// The handle, still owned by `self`.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T: Release> Drop for Handle<T> {
    fn drop(&mut self) {
        // SAFETY: we own one reference (views, experts and plans made from it hold their own).
        unsafe { T::release(self.0.as_ptr()) }
    }
}

impl<T: Release> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
