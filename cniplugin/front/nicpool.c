// nicpool: the front of nicpool's CNI IPAM plugin.
//
// The container runtime starts the plugin once for every CNI call. The plugin itself
// (nicpool-cni, Go) spends most of its CPU starting a language runtime, so this front,
// which has none, carries the call to ipamd instead: it reads the CNI_* environment and
// stdin, sends them unchanged over ipamd's socket (POST /v1/cni) and prints what ipamd
// answers, ipamd having run the very code of nicpool-cni for it (see cniplugin/doc.go).
//
// It decides nothing and parses nothing a tenant wrote: every value it forwards is
// copied as bytes, bounded, into a length-prefixed frame. Whenever it cannot finish the
// call that way (no socket, ipamd unreachable or not answering 200, an input over its
// bounds, VERSION, no CNI_COMMAND), it hands the call to nicpool-cni, which it finds
// beside its own executable, with the same arguments, environment and stdin. So every
// rule of the plugin (DEL while ipamd is unreachable, paths, logs, errors) stays in one
// place, in Go.
//
// It uses no C library either: a static C library's start-up (TLS, locale, stdio,
// IRELATIVE relocations) cost an exec about twice the CPU and seven times the page
// faults of the front's whole work. It starts at its own _start, calls the kernel
// directly (x86_64 and aarch64, the platforms of the images), keeps its buffers in
// static storage of fixed bounds, and formats the few numbers and messages it prints
// itself.
//
// Build: cc -static -nostdlib -ffreestanding -fno-stack-protector -O2 -Wall -Wextra
// -Werror -o nicpool nicpool.c (the Makefile's FRONT_CFLAGS). No C library is needed,
// for the host or for a cross compiler.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// Where ipamd's socket is: RunDir/ipamd.sock, RunDir being NICPOOL_CNI_RUN_DIR when the
// runtime sets it to an absolute path (the Go plugin's EnvRunDir), else /run/nicpool.
// Only the default socket is used: a network configuration that names another one is
// handed off by ipamd, which parses the configuration.
#define RUN_DIR "/run/nicpool"
#define ENV_RUN_DIR "NICPOOL_CNI_RUN_DIR"
#define SOCKET_NAME "ipamd.sock"

// The Go plugin, beside this executable.
#define FULL_PLUGIN "nicpool-cni"

// Bounds. Larger input is not refused: it is handed to nicpool-cni.
#define MAX_STDIN (1 << 20)      // the network configuration
#define MAX_VALUE (16 << 10)     // one CNI_* variable
#define MAX_ANSWER (4 << 20)     // ipamd's answer, headers included
#define ANSWER_TIMEOUT_S 330     // longer than the longest request_timeout (5 min)
#define MAX_NAME 255             // the name the front was run as
#define PATH_MAX 4096

// CNI error codes of the failures the front reports itself.
#define CNI_TRY_AGAIN 11 // the plugin cannot run at all; runtimes retry
#define CNI_IO 74        // as nicpool-cni reports an unreadable stdin

// The frame's fields, in order; ipamd's cniplugin.DecodeForwarded reads them.
static const char *const cni_env[] = {
	"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME",
	"CNI_ARGS", "CNI_PATH", "CNI_NETNS_OVERRIDE",
};
#define N_ENV (sizeof cni_env / sizeof cni_env[0])

// ---- The kernel's interface -------------------------------------------------------
//
// Every call returns what the kernel does: a result, or -errno (-4095..-1).

#define AT_FDCWD (-100)
#define AT_EMPTY_PATH 0x1000
#define O_PATH 010000000
#define O_CLOEXEC 02000000
#define AF_UNIX 1
#define SOCK_STREAM 1
#define SOCK_CLOEXEC O_CLOEXEC
#define SOL_SOCKET 1
#define SO_RCVTIMEO 20 // with a struct timeval of two longs, on both platforms
#define SO_SNDTIMEO 21
#define MSG_NOSIGNAL 0x4000
#define SEEK_SET 0
#define S_IFMT 0170000
#define S_IFSOCK 0140000

// The errnos named in messages; the same numbers on both platforms.
#define EPERM 1
#define ENOENT 2
#define EINTR 4
#define EIO 5
#define E2BIG 7
#define ENOEXEC 8
#define EBADF 9
#define EAGAIN 11
#define ENOMEM 12
#define EACCES 13
#define EFAULT 14
#define ENOTDIR 20
#define EISDIR 21
#define EINVAL 22
#define ENFILE 23
#define EMFILE 24
#define ETXTBSY 26
#define ENOSPC 28
#define EPIPE 32
#define ENAMETOOLONG 36
#define ENOSYS 38
#define ELOOP 40
#define ECONNRESET 104
#define ETIMEDOUT 110
#define ECONNREFUSED 111

#if defined(__x86_64__)
#define O_DIRECTORY 0200000
#define O_NOFOLLOW 0400000
enum {
	NR_read = 0, NR_write = 1, NR_close = 3, NR_lseek = 8, NR_getpid = 39,
	NR_socket = 41, NR_connect = 42, NR_sendto = 44, NR_setsockopt = 54,
	NR_execve = 59, NR_exit_group = 231, NR_openat = 257, NR_newfstatat = 262,
	NR_readlinkat = 267, NR_dup3 = 292, NR_memfd_create = 319,
};

// The kernel's struct stat, as far as the front reads it.
struct kstat {
	uint64_t dev, ino, nlink;
	uint32_t mode;
	char rest[256];
};

static long sys6(long n, long a, long b, long c, long d, long e, long f) {
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

// _start: the stack holds argc, argv[], NULL, envp[], NULL. start gets a pointer to it,
// with the stack aligned to 16 bytes before the call, as the ABI wants.
__asm__(".pushsection .text\n"
	".global _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call start\n"
	"	hlt\n"
	".popsection\n");

#elif defined(__aarch64__)
#define O_DIRECTORY 040000
#define O_NOFOLLOW 0100000
enum {
	NR_dup3 = 24, NR_openat = 56, NR_close = 57, NR_lseek = 62, NR_read = 63,
	NR_write = 64, NR_readlinkat = 78, NR_newfstatat = 79, NR_exit_group = 94,
	NR_getpid = 172, NR_socket = 198, NR_connect = 203, NR_sendto = 206,
	NR_setsockopt = 208, NR_execve = 221, NR_memfd_create = 279,
};

struct kstat {
	uint64_t dev, ino;
	uint32_t mode, nlink;
	char rest[256];
};

static long sys6(long n, long a, long b, long c, long d, long e, long f) {
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory", "cc");
	return x0;
}

// _start: the stack (16-byte aligned) holds argc, argv[], NULL, envp[], NULL.
__asm__(".pushsection .text\n"
	".global _start\n"
	"_start:\n"
	"	mov x29, xzr\n"
	"	mov x30, xzr\n"
	"	mov x0, sp\n"
	"	and sp, x0, #-16\n"
	"	bl start\n"
	".popsection\n");

#else
#error "the front calls the kernel itself: only x86_64 and aarch64 are written"
#endif

#define sys(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)

struct timeval {
	long tv_sec, tv_usec;
};

struct sockaddr_un {
	uint16_t sun_family;
	char sun_path[108];
};

__attribute__((noreturn)) static void exit_group(int code) {
	for (;;)
		sys(NR_exit_group, code, 0, 0);
}

// ---- What the compiler may call, and string helpers --------------------------------
//
// The empty asm in the loops keeps the compiler from turning them back into calls of
// themselves.

void *memcpy(void *dst, const void *src, size_t n) {
	char *d = dst;
	const char *s = src;
	while (n--) {
		__asm__ volatile("");
		*d++ = *s++;
	}
	return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
	char *d = dst;
	const char *s = src;
	if (d <= s || d >= s + n)
		return memcpy(dst, src, n);
	while (n--) {
		__asm__ volatile("");
		d[n] = s[n];
	}
	return dst;
}

void *memset(void *dst, int c, size_t n) {
	char *d = dst;
	while (n--) {
		__asm__ volatile("");
		*d++ = (char)c;
	}
	return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
	const unsigned char *x = a, *y = b;
	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

static size_t slen(const char *s) {
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

// prefix: whether s starts with p.
static int prefix(const char *s, const char *p) {
	for (; *p; s++, p++)
		if (*s != *p)
			return 0;
	return 1;
}

static char lower(char c) {
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

// prefix_fold: prefix, ASCII case ignored.
static int prefix_fold(const char *s, const char *p) {
	for (; *p; s++, p++)
		if (lower(*s) != lower(*p))
			return 0;
	return 1;
}

// find returns the first p in s (which ends at its NUL), or NULL.
static const char *find(const char *s, const char *p) {
	for (; *s; s++)
		if (prefix(s, p))
			return s;
	return NULL;
}

// decimal writes v into out (at least 20 bytes) and returns its length.
static size_t decimal(char *out, unsigned long v) {
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

// errstr says what an errno means, as the C library says it.
static const char *errstr(long e) {
	static const struct {
		int e;
		const char *s;
	} names[] = {
		{EPERM, "Operation not permitted"},
		{ENOENT, "No such file or directory"},
		{EINTR, "Interrupted system call"},
		{EIO, "Input/output error"},
		{E2BIG, "Argument list too long"},
		{ENOEXEC, "Exec format error"},
		{EBADF, "Bad file descriptor"},
		{EAGAIN, "Resource temporarily unavailable"},
		{ENOMEM, "Cannot allocate memory"},
		{EACCES, "Permission denied"},
		{EFAULT, "Bad address"},
		{ENOTDIR, "Not a directory"},
		{EISDIR, "Is a directory"},
		{EINVAL, "Invalid argument"},
		{ENFILE, "Too many open files in system"},
		{EMFILE, "Too many open files"},
		{ETXTBSY, "Text file busy"},
		{ENOSPC, "No space left on device"},
		{EPIPE, "Broken pipe"},
		{ENAMETOOLONG, "File name too long"},
		{ENOSYS, "Function not implemented"},
		{ELOOP, "Too many levels of symbolic links"},
		{ECONNRESET, "Connection reset by peer"},
		{ETIMEDOUT, "Connection timed out"},
		{ECONNREFUSED, "Connection refused"},
	};
	static char other[32] = "errno ";
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].e == e)
			return names[i].s;
	other[6 + decimal(other + 6, (unsigned long)(e < 0 ? -e : e))] = '\0';
	return other;
}

// ---- Buffers -----------------------------------------------------------------------
//
// Static, of fixed bounds: pages the front never touches cost nothing.

struct buf {
	char *p;
	size_t len, cap;
};

static int put(struct buf *b, const void *p, size_t n) {
	if (n > b->cap - b->len)
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

// netstring appends "<len>:<bytes>,".
static int netstring(struct buf *b, const char *p, size_t n) {
	char head[24];
	size_t h = decimal(head, n);
	head[h++] = ':';
	return put(b, head, h) || put(b, p, n) || put(b, ",", 1);
}

// read_all reads fd to its end into b, up to max bytes (b holds more); 1 when there
// was more, -errno when reading failed.
static long read_all(int fd, struct buf *b, size_t max) {
	for (;;) {
		if (b->len > max)
			return 1;
		long n = sys(NR_read, fd, b->p + b->len, b->cap - b->len);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			return b->len > max;
		b->len += (size_t)n;
	}
}

// write_all writes p to fd; 0 or -errno.
static long write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		long w = sys(NR_write, fd, p, n);
		if (w == -EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? w : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

// ---- Errors ------------------------------------------------------------------------

// json_string appends s as a JSON string.
static int json_string(struct buf *b, const char *s) {
	if (put(b, "\"", 1))
		return -1;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6] = {'\\', (char)c};
		if (c == '"' || c == '\\') {
			if (put(b, esc, 2))
				return -1;
		} else if (c < 0x20) {
			static const char hex[] = "0123456789abcdef";
			esc[1] = 'u';
			esc[2] = esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			if (put(b, esc, 6))
				return -1;
		} else if (put(b, s, 1)) {
			return -1;
		}
	}
	return put(b, "\"", 1);
}

// fail prints a CNI error whose message is the strings given (up to a NULL, cut at
// 1,023 bytes) and exits 1.
__attribute__((noreturn, sentinel)) static void fail(int code, ...) {
	static char msg[1024], out[sizeof msg * 6 + 64];
	size_t n = 0;
	va_list ap;
	va_start(ap, code);
	for (const char *s; (s = va_arg(ap, const char *));)
		for (; *s && n < sizeof msg - 1; s++)
			msg[n++] = *s;
	va_end(ap);
	msg[n] = '\0';
	struct buf b = {out, 0, sizeof out};
	char num[20];
	if (put(&b, "{\"code\":", 8) == 0 && put(&b, num, decimal(num, (unsigned long)code)) == 0 &&
	    put(&b, ",\"msg\":", 7) == 0 && json_string(&b, msg) == 0 && put(&b, "}\n", 2) == 0)
		write_all(1, b.p, b.len);
	exit_group(1);
}

// ---- The call ----------------------------------------------------------------------

static char **environ;

static const char *env(const char *name) {
	size_t n = slen(name);
	for (char **e = environ; *e; e++)
		if (prefix(*e, name) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static const char *const keep = "nicpool: cannot keep the network configuration for nicpool-cni: ";

// handoff runs nicpool-cni in this process, with stdin as it was: got holds what was
// already read of it, the rest (when there was more) is still on fd 0.
__attribute__((noreturn)) static void handoff(char **argv, struct buf *got, int more) {
	if (got) {
		long fd = sys(NR_memfd_create, "nicpool-stdin", 0, 0);
		if (fd < 0)
			fail(CNI_TRY_AGAIN, keep, "memfd_create: ", errstr(-fd), NULL);
		long e = write_all((int)fd, got->p, got->len);
		if (e)
			fail(CNI_TRY_AGAIN, keep, errstr(-e), NULL);
		if (more) {
			static char chunk[65536];
			for (;;) {
				long n = sys(NR_read, 0, chunk, sizeof chunk);
				if (n == -EINTR)
					continue;
				if (n < 0)
					fail(CNI_IO, "error reading from stdin: ", errstr(-n), NULL);
				if (n == 0)
					break;
				if ((e = write_all((int)fd, chunk, (size_t)n)))
					fail(CNI_TRY_AGAIN, keep, errstr(-e), NULL);
			}
		}
		if ((e = sys(NR_lseek, fd, 0, SEEK_SET)) != 0 || (fd != 0 && (e = sys(NR_dup3, fd, 0, 0)) != 0))
			fail(CNI_TRY_AGAIN, "nicpool: cannot give stdin to nicpool-cni: ", errstr(e < 0 ? -e : EBADF), NULL);
		if (fd != 0)
			sys(NR_close, fd, 0, 0);
	}
	static char self[PATH_MAX], full[PATH_MAX + sizeof FULL_PLUGIN + 1];
	long n = sys6(NR_readlinkat, AT_FDCWD, (long)"/proc/self/exe", (long)self, sizeof self - 1, 0, 0);
	if (n <= 0)
		fail(CNI_TRY_AGAIN, "nicpool: cannot find its own executable (/proc/self/exe): ", errstr(n < 0 ? -n : ENOENT), NULL);
	self[n] = '\0';
	char *slash = NULL;
	for (char *p = self; *p; p++)
		if (*p == '/')
			slash = p;
	if (!slash)
		fail(CNI_TRY_AGAIN, "nicpool: its own executable ", self, " has no directory", NULL);
	size_t dir = (size_t)(slash - self);
	memcpy(full, self, dir);
	memcpy(full + dir, "/" FULL_PLUGIN, sizeof FULL_PLUGIN + 1);
	long e = sys(NR_execve, full, argv, environ);
	fail(CNI_TRY_AGAIN, "nicpool: cannot run ", full, ": ", errstr(-e),
	     ": reinstall the plugin (ipamd's init container installs nicpool and " FULL_PLUGIN " side by side)", NULL);
}

static long stat_at(int dir, const char *path, struct kstat *st, int flags) {
	return sys6(NR_newfstatat, dir, (long)path, (long)st, flags, 0, 0);
}

// netns_is_own is the netns check's input: whether CNI_NETNS is this process's own
// network namespace ("same"), another or none ("other"), or cannot be told ("noself").
static const char *netns_is_own(const char *path) {
	if (!path || !*path)
		return "";
	struct kstat target, own;
	if (stat_at(AT_FDCWD, path, &target, 0) != 0)
		return "other";
	if (stat_at(AT_FDCWD, "/proc/self/ns/net", &own, 0) != 0)
		return "noself";
	return own.dev == target.dev && own.ino == target.ino ? "same" : "other";
}

// dial connects to ipamd's socket, following no symlink beneath the run directory, as
// the Go plugin does; -1 when there is no socket to connect to.
static int dial(void) {
	const char *dir = env(ENV_RUN_DIR);
	if (!dir || dir[0] != '/')
		dir = RUN_DIR;
	long dfd = sys6(NR_openat, AT_FDCWD, (long)dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
	if (dfd < 0)
		return -1;
	long pfd = sys6(NR_openat, dfd, (long)SOCKET_NAME, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0, 0, 0);
	sys(NR_close, dfd, 0, 0);
	if (pfd < 0)
		return -1;
	struct kstat st;
	if (stat_at((int)pfd, "", &st, AT_EMPTY_PATH) != 0 || (st.mode & S_IFMT) != S_IFSOCK) {
		sys(NR_close, pfd, 0, 0);
		return -1;
	}
	struct sockaddr_un addr = {.sun_family = AF_UNIX, .sun_path = "/proc/self/fd/"};
	addr.sun_path[14 + decimal(addr.sun_path + 14, (unsigned long)pfd)] = '\0';
	long s = sys(NR_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		sys(NR_close, pfd, 0, 0);
		return -1;
	}
	struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
	sys6(NR_setsockopt, s, SOL_SOCKET, SO_RCVTIMEO, (long)&tv, sizeof tv, 0);
	sys6(NR_setsockopt, s, SOL_SOCKET, SO_SNDTIMEO, (long)&tv, sizeof tv, 0);
	long rc = sys(NR_connect, s, &addr, sizeof addr);
	sys(NR_close, pfd, 0, 0);
	if (rc != 0) {
		sys(NR_close, s, 0, 0);
		return -1;
	}
	return (int)s;
}

// header returns the value of the answer's header name (in head, which ends at the
// blank line), or NULL.
static const char *header(const char *head, const char *name) {
	size_t n = slen(name);
	for (const char *line = find(head, "\r\n"); line && line[2] != '\r'; line = find(line + 2, "\r\n")) {
		const char *p = line + 2;
		if (prefix_fold(p, name) && p[n] == ':') {
			p += n + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			return p;
		}
	}
	return NULL;
}

// number parses a decimal header value ending at "\r\n"; -1 otherwise.
static long number(const char *p) {
	if (!p || *p < '0' || *p > '9')
		return -1;
	long v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > MAX_ANSWER)
			return -1;
		v = v * 10 + (*p - '0');
	}
	while (*p == ' ' || *p == '\t')
		p++;
	return prefix(p, "\r\n") ? v : -1;
}

// The request's head goes in front of the frame, in the room left for it.
#define HEAD_ROOM 256
#define MAX_FRAME (MAX_STDIN + (N_ENV + 3) * (MAX_VALUE + 32))

static char in_space[MAX_STDIN + 1];
static char req_space[HEAD_ROOM + MAX_FRAME];
static char ans_space[MAX_ANSWER + 2];

static int run(int argc, char **argv) {
	(void)argc;
	const char *cmd = env("CNI_COMMAND");
	// VERSION and the about text need nothing of ipamd.
	if (!cmd || !*cmd || (prefix(cmd, "VERSION") && cmd[7] == '\0'))
		handoff(argv, NULL, 0);

	struct buf in = {in_space, 0, sizeof in_space};
	long more = read_all(0, &in, MAX_STDIN);
	if (more < 0)
		fail(CNI_IO, "error reading from stdin: ", errstr(-more), NULL);

	struct buf body = {req_space + HEAD_ROOM, 0, MAX_FRAME};
	const char *name = argv[0] ? argv[0] : "";
	for (const char *p = name; *p; p++)
		if (*p == '/')
			name = p + 1;
	char pid[20];
	size_t name_len = slen(name);
	int bad = more || name_len > MAX_NAME || netstring(&body, name, name_len) ||
		  netstring(&body, pid, decimal(pid, (unsigned long)sys(NR_getpid, 0, 0, 0)));
	for (size_t i = 0; !bad && i < N_ENV; i++) {
		const char *v = env(cni_env[i]);
		size_t n = v ? slen(v) : 0;
		bad = n > MAX_VALUE || netstring(&body, v ? v : "", n);
	}
	const char *own = bad ? "" : netns_is_own(env("CNI_NETNS"));
	bad = bad || netstring(&body, own, slen(own)) || netstring(&body, in.p, in.len);
	if (bad)
		handoff(argv, &in, (int)more);

	int s = dial();
	if (s < 0)
		handoff(argv, &in, 0);
	static const char head1[] = "POST /v1/cni HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/octet-stream\r\nContent-Length: ";
	char head[HEAD_ROOM];
	size_t h = sizeof head1 - 1;
	memcpy(head, head1, h);
	h += decimal(head + h, body.len);
	memcpy(head + h, "\r\n\r\n", 4);
	h += 4;
	char *req = body.p - h;
	memcpy(req, head, h);
	size_t req_len = h + body.len;
	for (size_t off = 0; off < req_len;) {
		long n = sys6(NR_sendto, s, (long)(req + off), (long)(req_len - off), MSG_NOSIGNAL, 0, 0);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			handoff(argv, &in, 0);
		off += (size_t)n;
	}

	// The whole answer, up to ipamd's closing the connection.
	struct buf ans = {ans_space, 0, sizeof ans_space - 1};
	if (read_all(s, &ans, MAX_ANSWER) != 0)
		handoff(argv, &in, 0);
	sys(NR_close, s, 0, 0);
	ans.p[ans.len] = '\0'; // for the string functions
	const char *end = find(ans.p, "\r\n\r\n");
	if (!end || !prefix(ans.p, "HTTP/1.") || ans.len < 13 || !prefix(ans.p + 8, " 200 "))
		handoff(argv, &in, 0); // ipamd hands the call off, or is too old to take it
	long length = number(header(ans.p, "Content-Length"));
	long code = number(header(ans.p, "Nicpool-Exit"));
	long out = number(header(ans.p, "Nicpool-Stdout"));
	const char *data = end + 4;
	size_t have = ans.len - (size_t)(data - ans.p);
	if (length < 0 || (size_t)length != have || code < 0 || code > 125 || out < 0 || out > length)
		handoff(argv, &in, 0);
	write_all(1, data, (size_t)out);
	write_all(2, data + out, (size_t)(length - out));
	return (int)code;
}

// start is where _start leaves the initial stack: argc, argv, NULL, the environment.
__attribute__((noreturn, used)) void start(long *sp) {
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	environ = argv + argc + 1;
	exit_group(run(argc, argv));
}
