// nicpool: the front of nicpool's CNI IPAM plugin.
//
// The container runtime starts the plugin once for every CNI call. The plugin itself
// (nicpool-cni, Go) spends most of its CPU starting a language runtime, so this front,
// which has none, carries the call to ipamd instead: it reads the CNI_* environment and
// stdin, sends them unchanged over ipamd's socket (POST /v1/cni) and prints what ipamd
// answers, ipamd having run the very code of nicpool-cni for it (see cniplugin/doc.go).
//
// It decides nothing and parses nothing a tenant wrote, but for one bounded scan of the
// configuration for its request_timeout (below): every value it forwards is copied as
// bytes, bounded, into a length-prefixed frame. Whenever it cannot finish the call that
// way (no socket, ipamd unreachable or not answering 200 with a well-formed answer, an
// input over its bounds, VERSION, no CNI_COMMAND, a DEL that ipamd does not answer
// within DEL_WAIT), it hands the call to nicpool-cni, which it finds beside its own
// executable, with the same arguments, environment and stdin. So every rule of the
// plugin (DEL while ipamd is unreachable, paths, logs, errors) stays in one place, in
// Go.
//
// One deadline bounds the call, whatever ipamd does (accepts and never answers, drips,
// stops): the network's request_timeout, as nicpool-cni applies it. The front learns
// it by scanning the configuration for the key "request_timeout" (the longest value of
// every occurrence, the maximum, 5 min, when one cannot be read or a \u escape could
// spell the key, the default, 2 min, when there is none): a scan of bytes already in
// memory, never a parse. A call that reaches the deadline fails with CNI error 11 (50
// for STATUS), as nicpool-cni's does; a DEL waits at most DEL_WAIT for ipamd's
// complete answer and then hands off, and nicpool-cni lets the pod go (DelWait) and
// leaves the release to the garbage collector.
//
// stdin, stdout and stderr may be non-blocking (the runtime's pipes are not ours to
// change): a read or write that would block waits in poll for the same deadline.
//
// It is built static against musl, not position independent, so that the kernel runs
// it as linked: no dynamic loader, no relocations, and musl's start-up is a few
// hundred instructions. Its buffers are static storage of fixed bounds: pages it never
// touches cost nothing. The same file builds as a hosted program (glibc, with ASan and
// UBSan) for the tests.
//
// Build: musl-gcc -static -no-pie -O2 -Wall -Wextra -Werror -o nicpool nicpool.c (the
// Makefile's FRONT_CC and FRONT_CFLAGS; <arch>-linux-musl-gcc for another platform).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// Where ipamd's socket is: RunDir/ipamd.sock, RunDir being NICPOOL_CNI_RUN_DIR when the
// runtime sets it to an absolute path (the Go plugin's EnvRunDir), else /run/nicpool.
// Only the default socket is used: a network configuration that names another one is
// handed off by ipamd, which parses the configuration.
#define RUN_DIR "/run/nicpool"
#define ENV_RUN_DIR "NICPOOL_CNI_RUN_DIR"
#define SOCKET_NAME "ipamd.sock"

// The Go plugin, beside this executable.
#define FULL_PLUGIN "nicpool-cni"

// Bounds. Larger input is not refused: it is handed to nicpool-cni. The first three
// are ipamd's (ipamd/api's MaxConfig, MaxValue and MaxName: ipamd parses no more).
#define MAX_STDIN (64 << 10) // the network configuration
#define MAX_VALUE (16 << 10) // one CNI_* variable
#define MAX_ANSWER (4 << 20) // ipamd's answer, headers included
#define MAX_NAME 255         // the name the front was run as

// Deadlines, in milliseconds. The request timeout's default is
// cniplugin.DefaultTimeout, its bounds ipamd/api's MinRequestTimeout and
// MaxRequestTimeout; DEL_WAIT is cniplugin.DelWait.
#define DEFAULT_TIMEOUT_MS 120000L // also how long reading stdin may take
#define MIN_TIMEOUT_MS 1000L
#define MAX_TIMEOUT_MS 300000L
#define DEL_WAIT_MS 5000L
#define OUTPUT_GRACE_MS 5000L // writing the answer, when it came just before the deadline

// CNI error codes of the failures the front reports itself.
#define CNI_TRY_AGAIN 11      // the plugin cannot run, or ipamd did not answer in time
#define CNI_IO 74             // as nicpool-cni reports an unreadable stdin
#define CNI_NOT_AVAILABLE 50  // STATUS: ipamd did not answer in time

// The frame's fields, in order: ipamd/api's FrameEnv (TestFrontWritesTheGoEncodersBytes).
static const char *const cni_env[] = {
	"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME",
	"CNI_ARGS", "CNI_PATH", "CNI_NETNS_OVERRIDE",
};
#define N_ENV (sizeof cni_env / sizeof cni_env[0])

// ---- Time and waiting --------------------------------------------------------------

// now_ms is the monotonic clock in milliseconds.
static long long now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// wait_fd waits until fd is ready for events or the deadline passes: 0, or -ETIMEDOUT,
// or -errno of poll.
static int wait_fd(int fd, short events, long long deadline) {
	for (;;) {
		long long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0; // ready, or an error or hang-up the next call reports
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

// ---- Buffers -----------------------------------------------------------------------

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
	int h = snprintf(head, sizeof head, "%zu:", n);
	return put(b, head, (size_t)h) || put(b, p, n) || put(b, ",", 1);
}

// read_all reads fd to its end into b, up to max bytes (b holds more), waiting for a
// non-blocking fd until the deadline: 0 at the end, 1 when there was more, -errno when
// reading failed (-ETIMEDOUT at the deadline).
static int read_all(int fd, struct buf *b, size_t max, long long deadline) {
	for (;;) {
		if (b->len > max)
			return 1;
		ssize_t n = read(fd, b->p + b->len, b->cap - b->len);
		if (n > 0) {
			b->len += (size_t)n;
			continue;
		}
		if (n == 0)
			return b->len > max;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int e = wait_fd(fd, POLLIN, deadline);
		if (e)
			return e;
	}
}

// write_all writes p to fd, waiting for a non-blocking fd until the deadline; 0 or
// -errno.
static int write_all(int fd, const char *p, size_t n, long long deadline) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w == 0)
			return -EIO;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int e = wait_fd(fd, POLLOUT, deadline);
		if (e)
			return e;
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
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			if (put(b, esc, 2))
				return -1;
		} else if (c < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", c);
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
	char num[24];
	int h = snprintf(num, sizeof num, "%d", code);
	if (put(&b, "{\"code\":", 8) == 0 && put(&b, num, (size_t)h) == 0 && put(&b, ",\"msg\":", 7) == 0 &&
	    json_string(&b, msg) == 0 && put(&b, "}\n", 2) == 0)
		write_all(1, b.p, b.len, now_ms() + OUTPUT_GRACE_MS);
	_exit(1);
}

// ---- The call ----------------------------------------------------------------------

static const char *const keep = "nicpool: cannot keep the network configuration for nicpool-cni: ";

// handoff runs nicpool-cni in this process, with stdin as it was: got holds what was
// already read of it, the rest (when there was more) is still on fd 0.
__attribute__((noreturn)) static void handoff(char **argv, struct buf *got, int more) {
	if (got) {
		int fd = memfd_create("nicpool-stdin", 0);
		if (fd < 0)
			fail(CNI_TRY_AGAIN, keep, "memfd_create: ", strerror(errno), NULL);
		int e = write_all(fd, got->p, got->len, LLONG_MAX);
		if (e)
			fail(CNI_TRY_AGAIN, keep, strerror(-e), NULL);
		if (more) {
			static char chunk[65536];
			long long deadline = now_ms() + DEFAULT_TIMEOUT_MS;
			for (;;) {
				struct buf c = {chunk, 0, sizeof chunk};
				int r = read_all(0, &c, sizeof chunk - 1, deadline);
				if (r < 0)
					fail(CNI_IO, "error reading from stdin: ", strerror(-r), NULL);
				if ((e = write_all(fd, c.p, c.len, LLONG_MAX)))
					fail(CNI_TRY_AGAIN, keep, strerror(-e), NULL);
				if (r == 0)
					break;
			}
		}
		if (lseek(fd, 0, SEEK_SET) != 0 || (fd != 0 && dup2(fd, 0) != 0))
			fail(CNI_TRY_AGAIN, "nicpool: cannot give stdin to nicpool-cni: ", strerror(errno), NULL);
		if (fd != 0)
			close(fd);
	}
	static char self[PATH_MAX], full[PATH_MAX + sizeof FULL_PLUGIN + 1];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		fail(CNI_TRY_AGAIN, "nicpool: cannot find its own executable (/proc/self/exe): ", strerror(n < 0 ? errno : ENOENT), NULL);
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		fail(CNI_TRY_AGAIN, "nicpool: its own executable ", self, " has no directory", NULL);
	*slash = '\0';
	snprintf(full, sizeof full, "%s/" FULL_PLUGIN, self);
	execv(full, argv);
	fail(CNI_TRY_AGAIN, "nicpool: cannot run ", full, ": ", strerror(errno),
	     ": reinstall the plugin (ipamd's init container installs nicpool and " FULL_PLUGIN " side by side)", NULL);
}

// netns_is_own is the netns check's input: whether CNI_NETNS is this process's own
// network namespace ("same"), another or none ("other"), or cannot be told ("noself").
static const char *netns_is_own(const char *path) {
	if (!path || !*path)
		return "";
	struct stat target, own;
	if (stat(path, &target) != 0)
		return "other";
	if (stat("/proc/self/ns/net", &own) != 0)
		return "noself";
	return own.st_dev == target.st_dev && own.st_ino == target.st_ino ? "same" : "other";
}

// dial connects to ipamd's socket, following no symlink beneath the run directory, as
// the Go plugin does; -1 when there is no socket to connect to, or its listener's
// queue is full. The socket is non-blocking: every wait on it has the call's deadline.
static int dial(void) {
	const char *dir = getenv(ENV_RUN_DIR);
	if (!dir || dir[0] != '/')
		dir = RUN_DIR;
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	int pfd = openat(dfd, SOCKET_NAME, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (pfd < 0)
		return -1;
	struct stat st;
	if (fstatat(pfd, "", &st, AT_EMPTY_PATH) != 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return -1;
	}
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d", pfd);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		close(pfd);
		return -1;
	}
	// A unix socket connects at once or not at all (EAGAIN: the queue is full).
	int rc = connect(s, (struct sockaddr *)&addr, sizeof addr);
	close(pfd);
	if (rc != 0) {
		close(s);
		return -1;
	}
	return s;
}

// header returns the value of the answer's header name (in head, which ends at the
// blank line), or NULL.
static const char *header(const char *head, const char *name) {
	size_t n = strlen(name);
	for (const char *line = strstr(head, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
		const char *p = line + 2;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
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
	return strncmp(p, "\r\n", 2) == 0 ? v : -1;
}

// duration_ms reads a Go duration ("2m", "1m30s", "1.5s", "500ms") from p up to its
// closing quote (end); -1 when it is not one.
static double duration_ms(const char *p, const char *end) {
	static const struct {
		const char *unit;
		double ms;
	} units[] = {
		{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"\xce\xbcs", 1e-3},
		{"ms", 1}, {"s", 1e3}, {"m", 6e4}, {"h", 3.6e6},
	};
	if (end - p == 1 && *p == '0')
		return 0;
	if (p == end)
		return -1;
	double total = 0;
	while (p < end) {
		double v = 0, scale = 1;
		int digits = 0;
		for (; p < end && *p >= '0' && *p <= '9'; p++, digits++)
			v = v * 10 + (*p - '0');
		if (p < end && *p == '.')
			for (p++; p < end && *p >= '0' && *p <= '9'; p++, digits++)
				v += (*p - '0') * (scale /= 10);
		if (!digits || v > 1e12)
			return -1;
		size_t best = 0;
		double ms = 0;
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
			size_t n = strlen(units[i].unit);
			if (n > best && (size_t)(end - p) >= n && memcmp(p, units[i].unit, n) == 0 &&
			    (p + n == end || !((p[n] >= 'a' && p[n] <= 'z') || (unsigned char)p[n] >= 0x80))) {
				best = n;
				ms = units[i].ms;
			}
		}
		if (!best)
			return -1;
		p += best;
		total += v * ms;
	}
	return total;
}

// timeout_ms is the call's request timeout, from the configuration in (which ends at
// its NUL): the longest value given to a key "request_timeout" anywhere in it, as a
// duration string or a number of seconds; MAX_TIMEOUT_MS when one cannot be read, or
// when there is no such key but a \u escape, which could spell it; DEFAULT_TIMEOUT_MS
// when there is none. Bounded to MIN_TIMEOUT_MS..MAX_TIMEOUT_MS: ipamd refuses a
// timeout out of bounds at once.
static long timeout_ms(const struct buf *in) {
	static const char key[] = "\"request_timeout\"";
	const char *p = in->p, *end = in->p + in->len;
	double best = -1;
	while ((p = memmem(p, (size_t)(end - p), key, sizeof key - 1))) {
		p += sizeof key - 1;
		const char *q = p;
		while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
			q++;
		if (q == end || *q != ':')
			continue; // a value, not a key
		for (q++; q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'); q++)
			;
		double v = -1;
		if (q < end && *q == '"') {
			const char *close = memchr(q + 1, '"', (size_t)(end - q - 1));
			if (close && !memchr(q + 1, '\\', (size_t)(close - q - 1)))
				v = duration_ms(q + 1, close);
		} else if (q < end && ((*q >= '0' && *q <= '9') || *q == '-')) {
			char *after;
			double secs = strtod(q, &after); // the configuration ends at a NUL
			if (after > q)
				v = secs * 1e3;
		}
		if (v < 0 || v != v)
			v = MAX_TIMEOUT_MS;
		if (v > best)
			best = v;
	}
	if (best < 0)
		best = memmem(in->p, in->len, "\\u", 2) ? MAX_TIMEOUT_MS : DEFAULT_TIMEOUT_MS;
	if (best < MIN_TIMEOUT_MS)
		return MIN_TIMEOUT_MS;
	if (best > MAX_TIMEOUT_MS)
		return MAX_TIMEOUT_MS;
	return (long)best;
}

// The request's head goes in front of the frame, in the room left for it.
#define HEAD_ROOM 256
#define MAX_FRAME (MAX_STDIN + (N_ENV + 3) * (MAX_VALUE + 32))

static char in_space[MAX_STDIN + 2];
static char req_space[HEAD_ROOM + MAX_FRAME];
static char ans_space[MAX_ANSWER + 2];

// late ends a call ipamd did not answer within its deadline: a DEL is handed off
// (nicpool-cni lets the pod go), any other verb fails as nicpool-cni's would.
__attribute__((noreturn)) static void late(char **argv, struct buf *in, const char *cmd, int del, long timeout) {
	if (del)
		handoff(argv, in, 0);
	char secs[24];
	snprintf(secs, sizeof secs, "%ld", timeout / 1000);
	const char *dir = getenv(ENV_RUN_DIR);
	if (!dir || dir[0] != '/')
		dir = RUN_DIR;
	fail(strcmp(cmd, "STATUS") == 0 ? CNI_NOT_AVAILABLE : CNI_TRY_AGAIN, cmd, ": ipamd did not answer on ", dir,
	     "/" SOCKET_NAME " within the request timeout (", secs,
	     " s): try again later; if it persists, check that the nicpool-ipamd pod runs on this node and answers", NULL);
}

static int run(char **argv) {
	long long start = now_ms();
	const char *cmd = getenv("CNI_COMMAND");
	// VERSION and the about text need nothing of ipamd.
	if (!cmd || !*cmd || strcmp(cmd, "VERSION") == 0)
		handoff(argv, NULL, 0);
	int del = strcmp(cmd, "DEL") == 0;

	struct buf in = {in_space, 0, sizeof in_space - 1};
	int more = read_all(0, &in, MAX_STDIN, start + DEFAULT_TIMEOUT_MS);
	if (more < 0)
		fail(CNI_IO, "error reading from stdin: ", strerror(-more), NULL);
	in.p[in.len] = '\0'; // for strtod

	struct buf body = {req_space + HEAD_ROOM, 0, MAX_FRAME};
	const char *name = argv[0] ? argv[0] : "";
	const char *slash = strrchr(name, '/');
	if (slash)
		name = slash + 1;
	char pid[24];
	size_t name_len = strlen(name);
	int bad = more || name_len > MAX_NAME || netstring(&body, name, name_len) ||
		  netstring(&body, pid, (size_t)snprintf(pid, sizeof pid, "%ld", (long)getpid()));
	for (size_t i = 0; !bad && i < N_ENV; i++) {
		const char *v = getenv(cni_env[i]);
		size_t n = v ? strlen(v) : 0;
		bad = n > MAX_VALUE || netstring(&body, v ? v : "", n);
	}
	const char *own = bad ? "" : netns_is_own(getenv("CNI_NETNS"));
	bad = bad || netstring(&body, own, strlen(own)) || netstring(&body, in.p, in.len);
	if (bad)
		handoff(argv, &in, more);

	long timeout = timeout_ms(&in);
	long long deadline = start + timeout;
	if (del && timeout > DEL_WAIT_MS)
		deadline = start + DEL_WAIT_MS;

	int s = dial();
	if (s < 0)
		handoff(argv, &in, 0);
	char head[HEAD_ROOM];
	int h = snprintf(head, sizeof head,
			 "POST /v1/cni HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
			 body.len);
	char *req = body.p - h;
	memcpy(req, head, (size_t)h);
	size_t req_len = (size_t)h + body.len;
	for (size_t off = 0; off < req_len;) {
		ssize_t n = send(s, req + off, req_len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			handoff(argv, &in, 0);
		int e = wait_fd(s, POLLOUT, deadline);
		if (e == -ETIMEDOUT)
			late(argv, &in, cmd, del, timeout);
		if (e)
			handoff(argv, &in, 0);
	}

	// The whole answer, up to ipamd's closing the connection.
	struct buf ans = {ans_space, 0, sizeof ans_space - 1};
	int r = read_all(s, &ans, MAX_ANSWER, deadline);
	if (r == -ETIMEDOUT)
		late(argv, &in, cmd, del, timeout);
	if (r != 0)
		handoff(argv, &in, 0);
	close(s);
	ans.p[ans.len] = '\0'; // for the string functions
	const char *end = strstr(ans.p, "\r\n\r\n");
	if (!end || strncmp(ans.p, "HTTP/1.", 7) != 0 || ans.len < 13 || strncmp(ans.p + 8, " 200 ", 5) != 0)
		handoff(argv, &in, 0); // ipamd hands the call off, or is too old to take it
	long length = number(header(ans.p, "Content-Length"));
	long code = number(header(ans.p, "Nicpool-Exit"));
	long out = number(header(ans.p, "Nicpool-Stdout"));
	const char *data = end + 4;
	size_t have = ans.len - (size_t)(data - ans.p);
	if (length < 0 || (size_t)length != have || code < 0 || code > 125 || out < 0 || out > length)
		handoff(argv, &in, 0);
	long long out_deadline = deadline > now_ms() + OUTPUT_GRACE_MS ? deadline : now_ms() + OUTPUT_GRACE_MS;
	int e = write_all(1, data, (size_t)out, out_deadline);
	write_all(2, data + out, (size_t)(length - out), out_deadline);
	if (e) {
		// The runtime would take an exit code without its result for a result.
		static const char msg[] = "nicpool: cannot write the result to stdout: ";
		write_all(2, msg, sizeof msg - 1, out_deadline);
		const char *why = strerror(-e);
		write_all(2, why, strlen(why), out_deadline);
		write_all(2, "\n", 1, out_deadline);
		return code ? (int)code : 1;
	}
	return (int)code;
}

int main(int argc, char **argv) {
	(void)argc;
	return run(argv);
}
