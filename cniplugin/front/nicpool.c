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
// Build: cc -static -O2 -Wall -Wextra -Werror -o nicpool nicpool.c

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
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

// Bounds. Larger input is not refused: it is handed to nicpool-cni.
#define MAX_STDIN (1 << 20)      // the network configuration
#define MAX_VALUE (16 << 10)     // one CNI_* variable
#define MAX_ANSWER (4 << 20)     // ipamd's answer, headers included
#define ANSWER_TIMEOUT_S 330     // longer than the longest request_timeout (5 min)

// The frame's fields, in order; ipamd's cniplugin.DecodeForwarded reads them.
static const char *const cni_env[] = {
	"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME",
	"CNI_ARGS", "CNI_PATH", "CNI_NETNS_OVERRIDE",
};
#define N_ENV (sizeof cni_env / sizeof cni_env[0])

struct buf {
	char *p;
	size_t len, cap;
};

static int grow(struct buf *b, size_t more) {
	if (more > SIZE_MAX / 2 - b->len)
		return -1;
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int put(struct buf *b, const void *p, size_t n) {
	if (grow(b, n))
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

// netstring appends "<len>:<bytes>,".
static int netstring(struct buf *b, const char *p, size_t n) {
	char head[32];
	int h = snprintf(head, sizeof head, "%zu:", n);
	return put(b, head, (size_t)h) || put(b, p, n) || put(b, ",", 1);
}

// read_all reads fd to its end into b, up to max bytes; 1 when there was more.
static int read_all(int fd, struct buf *b, size_t max) {
	for (;;) {
		if (b->len > max)
			return 1;
		if (grow(b, 65536))
			return -1;
		ssize_t n = read(fd, b->p + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return b->len > max;
		b->len += (size_t)n;
	}
}

static int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

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

// fail_code prints a CNI error and exits 1.
static void fail_code(int code, const char *fmt, va_list ap) {
	char msg[1024], head[32];
	vsnprintf(msg, sizeof msg, fmt, ap);
	int h = snprintf(head, sizeof head, "{\"code\":%d,\"msg\":", code);
	struct buf b = {0};
	if (put(&b, head, (size_t)h) == 0 && json_string(&b, msg) == 0 && put(&b, "}\n", 2) == 0)
		write_all(1, b.p, b.len);
	exit(1);
}

// fail is the error of a plugin that cannot run at all: code 11 (try again later),
// which runtimes retry.
static void fail(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fail_code(11, fmt, ap);
}

// fail_io is CNI error 74 (I/O failure), as nicpool-cni reports an unreadable stdin.
static void fail_io(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fail_code(74, fmt, ap);
}

// handoff runs nicpool-cni in this process, with stdin as it was: got holds what was
// already read of it, the rest (when there was more) is still on fd 0.
static void handoff(char **argv, struct buf *got, int more) {
	if (got) {
		int fd = memfd_create("nicpool-stdin", 0);
		if (fd < 0)
			fail("nicpool: cannot keep the network configuration for nicpool-cni: memfd_create: %s", strerror(errno));
		if (write_all(fd, got->p, got->len))
			fail("nicpool: cannot keep the network configuration for nicpool-cni: %s", strerror(errno));
		if (more) {
			char chunk[65536];
			for (;;) {
				ssize_t n = read(0, chunk, sizeof chunk);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					fail_io("error reading from stdin: %s", strerror(errno));
				if (n == 0)
					break;
				if (write_all(fd, chunk, (size_t)n))
					fail("nicpool: cannot keep the network configuration for nicpool-cni: %s", strerror(errno));
			}
		}
		if (lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) != 0)
			fail("nicpool: cannot give stdin to nicpool-cni: %s", strerror(errno));
		close(fd);
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		fail("nicpool: cannot find its own executable (/proc/self/exe): %s", strerror(errno));
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		fail("nicpool: its own executable %s has no directory", self);
	*slash = '\0';
	char full[PATH_MAX + sizeof FULL_PLUGIN + 1];
	snprintf(full, sizeof full, "%s/%s", self, FULL_PLUGIN);
	execv(full, argv);
	fail("nicpool: cannot run %s: %s: reinstall the plugin (ipamd's init container installs nicpool and %s side by side)",
	     full, strerror(errno), FULL_PLUGIN);
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
// the Go plugin does; -1 when there is no socket to connect to.
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
	if (fstat(pfd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return -1;
	}
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d", pfd);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		close(pfd);
		return -1;
	}
	struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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

int main(int argc, char **argv) {
	(void)argc;
	const char *cmd = getenv("CNI_COMMAND");
	// VERSION and the about text need nothing of ipamd.
	if (!cmd || !*cmd || strcmp(cmd, "VERSION") == 0)
		handoff(argv, NULL, 0);

	struct buf in = {0};
	int more = read_all(0, &in, MAX_STDIN);
	if (more < 0)
		fail_io("error reading from stdin: %s", strerror(errno));

	struct buf body = {0};
	const char *name = strrchr(argv[0] ? argv[0] : "", '/');
	name = name ? name + 1 : (argv[0] ? argv[0] : "");
	char pid[32];
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	int bad = more || strlen(name) > 255 || netstring(&body, name, strlen(name)) || netstring(&body, pid, strlen(pid));
	for (size_t i = 0; !bad && i < N_ENV; i++) {
		const char *v = getenv(cni_env[i]);
		size_t n = v ? strlen(v) : 0;
		bad = n > MAX_VALUE || netstring(&body, v ? v : "", n);
	}
	const char *own = bad ? "" : netns_is_own(getenv("CNI_NETNS"));
	bad = bad || netstring(&body, own, strlen(own)) || netstring(&body, in.p ? in.p : "", in.len);
	if (bad)
		handoff(argv, &in, more);

	int s = dial();
	if (s < 0)
		handoff(argv, &in, 0);
	struct buf req = {0};
	char head[256];
	int h = snprintf(head, sizeof head,
			 "POST /v1/cni HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
			 body.len);
	if (put(&req, head, (size_t)h) || put(&req, body.p, body.len))
		handoff(argv, &in, 0);
	for (size_t off = 0; off < req.len;) {
		ssize_t n = send(s, req.p + off, req.len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			handoff(argv, &in, 0);
		off += (size_t)n;
	}
	free(req.p);
	free(body.p);

	// The whole answer, up to ipamd's closing the connection.
	struct buf ans = {0};
	if (read_all(s, &ans, MAX_ANSWER) != 0 || put(&ans, "", 1))
		handoff(argv, &in, 0);
	close(s);
	ans.len--; // the NUL put for the string functions
	char *end = strstr(ans.p, "\r\n\r\n");
	if (!end || strncmp(ans.p, "HTTP/1.", 7) != 0 || strncmp(ans.p + 8, " 200 ", 5) != 0)
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
