//! The driver of the run lifecycle (snatch-protocol's run.rs) for one locker: every way the user's fn runs, and every
//! lock handed to the caller, goes through its [`runner::Runner`]. It sends acquisitions and releases by the direct
//! connection (the caller's sockets) or the locker's own, and feeds their results to the lifecycle, which says what
//! the caller hears. It lives on one thread (the binding's: node's JS thread); what finishes on the runtime comes back
//! to it as [`input::Input`]s.

pub(crate) mod call;
pub(crate) mod hold;
pub(crate) mod input;
pub(crate) mod rounds;
pub(crate) mod runner;
