/* A preload library for the clock-skew tests (wall-clock.js builds it with cc): shifts the process's wall clock by
 * WALL_CLOCK_SHIFT_MS milliseconds (CLOCK_REALTIME and its coarse kind, gettimeofday, time), leaving the monotonic
 * clock alone, as libfaketime does with FAKETIME_DONT_FAKE_MONOTONIC=1. Linux only (tested with glibc). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
/* Renamed while sys/time.h declares it: its parameter types differ between C libraries and their versions. */
#define gettimeofday system_gettimeofday
#include <sys/time.h>
#undef gettimeofday

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

/* The C library's clock_gettime, looked up on first use (another library's constructor may read the clock before
 * ours would run). */
static clock_gettime_fn real_clock_gettime(void) {
  static clock_gettime_fn real;
  if (!real) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  return real;
}

/* The shift, in nanoseconds: read once, when the library is loaded (getenv may race with a later setenv). */
static long long shift_ns;

__attribute__((constructor)) static void read_shift(void) {
  const char *ms = getenv("WALL_CLOCK_SHIFT_MS");
  shift_ns = ms ? atoll(ms) * 1000000LL : 0;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  int status = real_clock_gettime()(clock, ts);
  if (status == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + shift_ns;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
    if (ts->tv_nsec < 0) {
      ts->tv_sec -= 1;
      ts->tv_nsec += 1000000000LL;
    }
  }
  return status;
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  int status = clock_gettime(CLOCK_REALTIME, &ts);
  if (status == 0 && tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return status;
}

time_t time(time_t *out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
