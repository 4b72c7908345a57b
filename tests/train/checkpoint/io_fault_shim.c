// An LD_PRELOAD library that makes a process's file I/O fail the way a full or failing disk does, for the
// fault tests of checkpoint writing (test_checkpoint_faults.cpp). It acts only on files whose path contains
// NANOFORGE_FAULT_PATH, as set in the environment:
//   NANOFORGE_FAULT_ERRNO=ENOSPC|EIO|EFBIG     the error failing writes get (default ENOSPC)
//   NANOFORGE_FAULT_AFTER_BYTES=N              writes fail: they succeed for the first N bytes (all such
//   files
//                                              together), the one that crosses N is cut short, later ones
//                                              fail
//   NANOFORGE_FAULT_FSYNC=1                    fsync/fdatasync fail with EIO instead (writes succeed)
//   NANOFORGE_FAULT_HOLD=open|write            the first open of (or write to) such a file waits until a
//                                              signal has been handled, then goes on: a stall at a chosen
//                                              moment (the marker file NANOFORGE_FAULT_HOLD_MARKER says it
//                                              began)
//   NANOFORGE_FAULT_HOLD=print                 the same for the first fwrite (fmt::print) whose text contains
//                                              NANOFORGE_FAULT_HOLD_TEXT, whatever the file
//   NANOFORGE_FAULT_HOLD_SIGNALS=N             a hold ends after N handled signals (default 1)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static atomic_llong written_bytes;

static const char* fault_path(void) {
  const char* path = getenv("NANOFORGE_FAULT_PATH");
  return path != NULL && *path != '\0' ? path : NULL;
}

static int path_matches(const char* path) {
  const char* wanted = fault_path();
  return wanted != NULL && path != NULL && strstr(path, wanted) != NULL;
}

static int fd_matches(int fd) {
  if (fault_path() == NULL) return 0;
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t length = readlink(link, target, sizeof target - 1);
  if (length <= 0) return 0;
  target[length] = '\0';
  return path_matches(target);
}

static int fault_errno(void) {
  const char* name = getenv("NANOFORGE_FAULT_ERRNO");
  if (name != NULL && strcmp(name, "EIO") == 0) return EIO;
  if (name != NULL && strcmp(name, "EFBIG") == 0) return EFBIG;
  return ENOSPC;
}

// How many of `count` bytes a write to `fd` may write before the fault (count when the fd is not faulted);
// -1 with errno set when none.
// The program's SIGTERM/SIGINT handlers are wrapped so that a hold (below) learns that one has run, on
// whichever thread the signal was delivered to.
static atomic_int signal_handled, held;
static void (*program_handlers[NSIG])(int);

static void wrapped_handler(int number) {
  program_handlers[number](number);  // a handler that exits ends the process here
  atomic_fetch_add(&signal_handled, 1);
}

int sigaction(int number, const struct sigaction* action, struct sigaction* old) {
  if (action != NULL && (number == SIGTERM || number == SIGINT) && !(action->sa_flags & SA_SIGINFO) &&
      action->sa_handler != SIG_DFL && action->sa_handler != SIG_IGN) {
    struct sigaction wrapped = *action;
    program_handlers[number] = action->sa_handler;
    wrapped.sa_handler = wrapped_handler;
    return NEXT(sigaction)(number, &wrapped, old);
  }
  return NEXT(sigaction)(number, action, old);
}

static void hold(const char* kind) {
  const char* wanted = getenv("NANOFORGE_FAULT_HOLD");
  if (wanted == NULL || strcmp(wanted, kind) != 0 || atomic_exchange(&held, 1) != 0) return;
  const char* marker = getenv("NANOFORGE_FAULT_HOLD_MARKER");
  if (marker != NULL)
    close(((int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open"))(marker, O_WRONLY | O_CREAT, 0644));
  const char* signals = getenv("NANOFORGE_FAULT_HOLD_SIGNALS");
  const int needed = signals != NULL ? atoi(signals) : 1;
  const struct timespec millisecond = {0, 1000000};
  while (atomic_load(&signal_handled) < needed)
    nanosleep(&millisecond, NULL);
}

static ssize_t allowed(int fd, size_t count) {
  const int matches = fd_matches(fd);
  if (matches) hold("write");
  const char* after = getenv("NANOFORGE_FAULT_AFTER_BYTES");
  if (after == NULL || !matches) return (ssize_t)count;
  const long long limit = atoll(after);
  const long long before = atomic_fetch_add(&written_bytes, (long long)count);
  if (before >= limit) {
    errno = fault_errno();
    return -1;
  }
  return (ssize_t)(before + (long long)count <= limit ? (long long)count : limit - before);
}

ssize_t write(int fd, const void* buffer, size_t count) {
  const ssize_t n = allowed(fd, count);
  return n < 0 ? -1 : NEXT(write)(fd, buffer, (size_t)n);
}

ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
  const ssize_t n = allowed(fd, count);
  return n < 0 ? -1 : NEXT(pwrite)(fd, buffer, (size_t)n, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t count, off_t offset) {
  const ssize_t n = allowed(fd, count);
  return n < 0 ? -1 : NEXT(pwrite64)(fd, buffer, (size_t)n, offset);
}

ssize_t writev(int fd, const struct iovec* vectors, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i)
    total += vectors[i].iov_len;
  const ssize_t n = allowed(fd, total);
  if (n < 0) return -1;
  if ((size_t)n == total) return NEXT(writev)(fd, vectors, count);
  return NEXT(write)(fd, vectors[0].iov_base,
                     (size_t)n < vectors[0].iov_len ? (size_t)n : vectors[0].iov_len);
}

static int sync_fault(int fd) {
  if (getenv("NANOFORGE_FAULT_FSYNC") != NULL && fd_matches(fd)) {
    errno = EIO;
    return 1;
  }
  return 0;
}

int fsync(int fd) {
  return sync_fault(fd) ? -1 : NEXT(fsync)(fd);
}

int fdatasync(int fd) {
  return sync_fault(fd) ? -1 : NEXT(fdatasync)(fd);
}

size_t fwrite(const void* data, size_t size, size_t count, FILE* stream) {
  const char* text = getenv("NANOFORGE_FAULT_HOLD_TEXT");
  if (text != NULL && size * count > 0 && memmem(data, size * count, text, strlen(text)) != NULL)
    hold("print");
  return NEXT(fwrite)(data, size, count, stream);
}

static void maybe_hold(const char* path) {
  if (path_matches(path)) hold("open");
}

int open(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
  va_end(arguments);
  maybe_hold(path);
  return NEXT(open)(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
  va_end(arguments);
  maybe_hold(path);
  return NEXT(open64)(path, flags, mode);
}
