//! N-API binding of the redis-snatch core: converts options, calls the user's function through a
//! ThreadsafeFunction, and maps core errors to coded JS errors. The JS facade (`index.js`) wraps these classes.

mod errors;
mod lock;
mod locker;
mod options;
mod schedule;
