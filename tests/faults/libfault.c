/* An I/O fault injector for lineage's fault matrix (tests/faults/), preloaded with
 * LD_PRELOAD into a real `lineage` process, as SQLite's tests fail their VFS.
 *
 * It sees the calls that change files under LINEAGE_FI_ROOT (a store folder) whatever
 * makes them (Python, DuckDB, pyarrow): creating a file, writing, fsync, rename,
 * truncate, fallocate, mkdir, unlink. Settings, read once from the environment:
 *
 *   LINEAGE_FI_ROOT    only paths below this folder count (absolute, no trailing /)
 *   LINEAGE_FI_LOG     append one line per counted call: "<kind>\t<path below root>"
 *   LINEAGE_FI_KIND    the kind of call to hit (create, write, fsync, rename, truncate,
 *                      fallocate, mkdir, unlink)
 *   LINEAGE_FI_PATH    ... on a path matching this POSIX extended regex (below root)
 *   LINEAGE_FI_NTH     ... the Nth such call (1-based)
 *   LINEAGE_FI_ACTION  enospc | eio: the call fails with that errno, nothing done;
 *                      kill: the process is SIGKILLed before the call
 *   LINEAGE_FI_STICKY  1: once hit, every later create/write/fsync/fallocate/mkdir/
 *                      truncate below root fails the same way (a disk that stays full)
 *   LINEAGE_FI_HIT     a file created when the fault fires (so a test knows it did)
 *
 * Creating a file or folder that exists already is not counted (it takes no space).
 * lineage_fi_reset() reads the settings again: a forked child of a warm process calls it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready, active, sticky, action_errno, action_kill, fired;
static long nth, seen;
static char root[PATH_MAX], kind_wanted[32], log_path[PATH_MAX], hit_path[PATH_MAX];
static size_t root_len;
static regex_t path_re;
static int have_re;

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_open)(const char *, int, ...);

static void setup(void) {
    if (ready) return;
    active = sticky = action_errno = action_kill = fired = have_re = 0;
    nth = seen = 0;
    root[0] = kind_wanted[0] = log_path[0] = hit_path[0] = 0;
    real_write = dlsym(RTLD_NEXT, "write");
    real_open = dlsym(RTLD_NEXT, "open");
    const char *r = getenv("LINEAGE_FI_ROOT");
    if (r && *r) {
        snprintf(root, sizeof root, "%s", r);
        root_len = strlen(root);
        active = 1;
    }
    const char *v;
    if ((v = getenv("LINEAGE_FI_LOG"))) snprintf(log_path, sizeof log_path, "%s", v);
    if ((v = getenv("LINEAGE_FI_HIT"))) snprintf(hit_path, sizeof hit_path, "%s", v);
    if ((v = getenv("LINEAGE_FI_KIND"))) snprintf(kind_wanted, sizeof kind_wanted, "%s", v);
    if ((v = getenv("LINEAGE_FI_PATH")) && *v)
        have_re = regcomp(&path_re, v, REG_EXTENDED | REG_NOSUB) == 0;
    if ((v = getenv("LINEAGE_FI_NTH"))) nth = atol(v);
    if ((v = getenv("LINEAGE_FI_ACTION"))) {
        if (!strcmp(v, "enospc")) action_errno = ENOSPC;
        else if (!strcmp(v, "eio")) action_errno = EIO;
        else if (!strcmp(v, "kill")) action_kill = 1;
    }
    if ((v = getenv("LINEAGE_FI_STICKY"))) sticky = atoi(v);
    ready = 1;
}

/* Read the settings again (a forked child of a warm process sets its own). */
void lineage_fi_reset(void) {
    pthread_mutex_lock(&lock);
    if (have_re) regfree(&path_re);
    ready = 0;
    setup();
    pthread_mutex_unlock(&lock);
}

/* The path of an open descriptor, or of a name relative to a directory descriptor. */
static int fd_path(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    if (n < 0) return -1;
    out[n] = 0;
    return 0;
}

static int at_path(int dirfd, const char *name, char *out, size_t size) {
    if (!name) return -1;
    if (name[0] == '/') { snprintf(out, size, "%s", name); return 0; }
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) { if (!getcwd(base, sizeof base)) return -1; }
    else if (fd_path(dirfd, base, sizeof base)) return -1;
    snprintf(out, size, "%s/%s", base, name);
    return 0;
}

static int sticky_kind(const char *kind) {
    return strcmp(kind, "rename") && strcmp(kind, "unlink");
}

/* 0: go ahead; -1: fail with errno set. Kills the process when that is the action. */
static int check(const char *kind, const char *path) {
    setup();
    if (!active || !path || strncmp(path, root, root_len) || (path[root_len] != '/' && path[root_len] != 0))
        return 0;
    const char *rel = path[root_len] ? path + root_len + 1 : "";
    int fail = 0;
    pthread_mutex_lock(&lock);
    if (log_path[0]) {
        int fd = real_open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[PATH_MAX + 64];
            int len = snprintf(line, sizeof line, "%s\t%s\n", kind, rel);
            real_write(fd, line, (size_t)len);
            close(fd);
        }
    }
    if (fired && sticky && sticky_kind(kind)) fail = 1;
    else if (!fired && nth > 0 && !strcmp(kind, kind_wanted)
             && (!have_re || regexec(&path_re, rel, 0, NULL, 0) == 0) && ++seen == nth) {
        fired = 1;
        fail = 1;
        if (hit_path[0]) {
            int fd = real_open(hit_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) close(fd);
        }
    }
    pthread_mutex_unlock(&lock);
    if (!fail) return 0;
    if (action_kill) { kill(getpid(), SIGKILL); pause(); }
    errno = action_errno ? action_errno : EIO;
    return -1;
}

static int check_fd(const char *kind, int fd) {
    setup();
    if (!active) return 0;
    char path[PATH_MAX];
    if (fd_path(fd, path, sizeof path)) return 0;
    return check(kind, path);
}

static int check_at(const char *kind, int dirfd, const char *name) {
    setup();
    if (!active) return 0;
    char path[PATH_MAX];
    if (at_path(dirfd, name, path, sizeof path)) return 0;
    if (!strcmp(kind, "create") || !strcmp(kind, "mkdir")) {
        struct stat st;  /* an existing file or folder takes no new space */
        if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    }
    return check(kind, path);
}

#define NEXT(name) static __typeof__(name) *next_##name; if (!next_##name) next_##name = dlsym(RTLD_NEXT, #name)

static int creating(int flags) { return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE; }

int open(const char *path, int flags, ...) {
    NEXT(open);
    mode_t mode = 0;
    if (creating(flags)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);
        if (check_at("create", AT_FDCWD, path)) return -1; }
    return next_open(path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    NEXT(open64);
    mode_t mode = 0;
    if (creating(flags)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);
        if (check_at("create", AT_FDCWD, path)) return -1; }
    return next_open64(path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    NEXT(openat);
    mode_t mode = 0;
    if (creating(flags)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);
        if (check_at("create", dirfd, path)) return -1; }
    return next_openat(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    NEXT(openat64);
    mode_t mode = 0;
    if (creating(flags)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);
        if (check_at("create", dirfd, path)) return -1; }
    return next_openat64(dirfd, path, flags, mode);
}
ssize_t write(int fd, const void *buf, size_t n) {
    NEXT(write);
    if (fd > 2 && check_fd("write", fd)) return -1;
    return next_write(fd, buf, n);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    NEXT(pwrite);
    if (check_fd("write", fd)) return -1;
    return next_pwrite(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    NEXT(pwrite64);
    if (check_fd("write", fd)) return -1;
    return next_pwrite64(fd, buf, n, off);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    NEXT(writev);
    if (fd > 2 && check_fd("write", fd)) return -1;
    return next_writev(fd, iov, cnt);
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    NEXT(pwritev);
    if (check_fd("write", fd)) return -1;
    return next_pwritev(fd, iov, cnt, off);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off) {
    NEXT(pwritev64);
    if (check_fd("write", fd)) return -1;
    return next_pwritev64(fd, iov, cnt, off);
}
int fsync(int fd) { NEXT(fsync); if (check_fd("fsync", fd)) return -1; return next_fsync(fd); }
int fdatasync(int fd) { NEXT(fdatasync); if (check_fd("fsync", fd)) return -1; return next_fdatasync(fd); }
int ftruncate(int fd, off_t len) { NEXT(ftruncate); if (check_fd("truncate", fd)) return -1; return next_ftruncate(fd, len); }
int ftruncate64(int fd, off64_t len) { NEXT(ftruncate64); if (check_fd("truncate", fd)) return -1; return next_ftruncate64(fd, len); }
int fallocate(int fd, int mode, off_t off, off_t len) { NEXT(fallocate); if (check_fd("fallocate", fd)) return -1; return next_fallocate(fd, mode, off, len); }
int fallocate64(int fd, int mode, off64_t off, off64_t len) { NEXT(fallocate64); if (check_fd("fallocate", fd)) return -1; return next_fallocate64(fd, mode, off, len); }
int posix_fallocate(int fd, off_t off, off_t len) { NEXT(posix_fallocate); if (check_fd("fallocate", fd)) return errno; return next_posix_fallocate(fd, off, len); }
int posix_fallocate64(int fd, off64_t off, off64_t len) { NEXT(posix_fallocate64); if (check_fd("fallocate", fd)) return errno; return next_posix_fallocate64(fd, off, len); }
int rename(const char *a, const char *b) { NEXT(rename); if (check_at("rename", AT_FDCWD, b)) return -1; return next_rename(a, b); }
int renameat(int da, const char *a, int db, const char *b) { NEXT(renameat); if (check_at("rename", db, b)) return -1; return next_renameat(da, a, db, b); }
int renameat2(int da, const char *a, int db, const char *b, unsigned int f) { NEXT(renameat2); if (check_at("rename", db, b)) return -1; return next_renameat2(da, a, db, b, f); }
int mkdir(const char *p, mode_t m) { NEXT(mkdir); if (check_at("mkdir", AT_FDCWD, p)) return -1; return next_mkdir(p, m); }
int mkdirat(int d, const char *p, mode_t m) { NEXT(mkdirat); if (check_at("mkdir", d, p)) return -1; return next_mkdirat(d, p, m); }
int unlink(const char *p) { NEXT(unlink); if (check_at("unlink", AT_FDCWD, p)) return -1; return next_unlink(p); }
int unlinkat(int d, const char *p, int f) { NEXT(unlinkat); if (check_at("unlink", d, p)) return -1; return next_unlinkat(d, p, f); }
