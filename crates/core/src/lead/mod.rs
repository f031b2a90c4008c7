//! Leaders: a replica's campaign for a name (terms of its fn while it holds the name's lock), and observers that hear
//! of each new leader when it happens, from what the campaigns publish.

pub(crate) mod campaign;
pub(crate) mod leading;
pub(crate) mod observer;
