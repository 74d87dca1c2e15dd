//! The library's status codes as a Rust error.
use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// Why a call failed: `mxfp8_status` without `MXFP8_OK`. The values are pinned by the C header; a status
/// this crate does not know (a newer library) is [`Status::Unknown`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// A pointer, enum, struct size, shape, dtype, stride or buffer size is wrong: fix the call.
    InvalidArgument,
    /// The tensor has no data for the requested direction.
    MissingData,
    /// Valid, but not something this build can do (e.g. CUDA work in a build without CUDA).
    Unsupported,
    /// Host or device memory could not be allocated.
    OutOfMemory,
    /// A CUDA runtime call or kernel launch failed; the message carries CUDA's text.
    Cuda,
    /// A bug in the library: please report it with the message.
    Internal,
    /// A status value this crate does not know.
    Unknown(i32),
}

/// Each named status and its C value.
const STATUSES: [(Status, sys::mxfp8_status); 6] = [
    (Status::InvalidArgument, sys::mxfp8_status::ERROR_INVALID_ARGUMENT),
    (Status::MissingData, sys::mxfp8_status::ERROR_MISSING_DATA),
    (Status::Unsupported, sys::mxfp8_status::ERROR_UNSUPPORTED),
    (Status::OutOfMemory, sys::mxfp8_status::ERROR_OUT_OF_MEMORY),
    (Status::Cuda, sys::mxfp8_status::ERROR_CUDA),
    (Status::Internal, sys::mxfp8_status::ERROR_INTERNAL),
];

impl Status {
    /// The status of a C value; None for `MXFP8_OK`.
    pub fn from_raw(status: sys::mxfp8_status) -> Option<Self> {
        let named = STATUSES.iter().find(|(_, c)| *c == status).map(|(s, _)| *s);
        (status != sys::mxfp8_status::OK).then(|| named.unwrap_or(Self::Unknown(status.0)))
    }

    /// The C value.
    pub fn to_raw(self) -> sys::mxfp8_status {
        match self {
            Self::Unknown(v) => sys::mxfp8_status(v),
            named => STATUSES.iter().find(|(s, _)| *s == named).expect("every named status is in STATUSES").1,
        }
    }

    /// The library's short English name for the status ("invalid argument").
    pub fn name(self) -> &'static str {
        // SAFETY: mxfp8_status_string returns a static NUL-terminated string for any value.
        unsafe { CStr::from_ptr(sys::mxfp8_status_string(self.to_raw())) }.to_str().unwrap_or("unknown status")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: the status and the library's message for it (or this crate's, for checks made in Rust
/// before calling the library, e.g. a slice of the wrong length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub status: Status,
    /// What exactly was wrong, naming the argument.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for `MXFP8_OK`; otherwise the status with this thread's `mxfp8_last_error()`, read right away
/// (it is only valid until the thread's next call into the library).
pub(crate) fn check(status: sys::mxfp8_status) -> Result<(), Error> {
    let Some(status) = Status::from_raw(status) else { return Ok(()) };
    // SAFETY: mxfp8_last_error never returns NULL; the text is valid until this thread's next call.
    let message = unsafe { CStr::from_ptr(sys::mxfp8_last_error()) }.to_string_lossy().into_owned();
    Err(Error { status, message })
}

/// An [`Status::InvalidArgument`] error raised in Rust.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error { status: Status::InvalidArgument, message: message.into() }
}
