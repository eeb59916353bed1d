package fronttest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
)

// A build of the front, installed in a directory of its own beside a stand-in
// nicpool-cni (standInPlugin).
type build struct {
	name string
	// runner runs the front (qemu-user for another architecture), if anything does.
	runner string
	path   string
	// sanitized builds report what ASan and UBSan find on stderr.
	sanitized bool
}

var builds []build

// standInPlugin stands for nicpool-cni beside the front: it says it was run, and for
// which verb, then prints the stdin it was given, so that a hand-off shows that the
// call reached nicpool-cni with its stdin intact.
const standInPlugin = "#!/bin/sh\nprintf 'handed off: %s\\n' \"$CNI_COMMAND\"\nexec cat\n"

// The builds for other architectures: each runs under its qemu-user, built by its
// musl cross compiler (hack/front/deps.sh installs both).
var crossBuilds = []struct{ name, qemu, cc string }{
	{"arm64", "qemu-aarch64-static", "aarch64-linux-musl-gcc"},
	{"ppc64le", "qemu-ppc64le-static", "powerpc64le-linux-musl-gcc"},
	{"s390x", "qemu-s390x-static", "s390x-linux-musl-gcc"},
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nicpool-front-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		if err := buildAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildAll builds the front from its one source: as shipped for this machine (musl,
// static), hosted under ASan and UBSan (glibc), and as shipped for arm64, ppc64le and
// s390x, each run under qemu-user.
func buildAll(dir string) error {
	type compiled struct {
		build
		compile func(out string) error
	}
	all := []compiled{
		{build{name: "musl"}, func(out string) error { return binaries.BuildFront(binaries.FrontCC, out) }},
		{build{name: "sanitized", sanitized: true}, func(out string) error {
			cmd := exec.Command("cc", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
				"-g", "-O1", "-Wall", "-Wextra", "-Werror", "-o", out, binaries.FrontSource)
			cmd.Dir = testenv.RepoRoot()
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s(the sanitized build needs gcc and libc6-dev)", cmd, err, b)
			}
			return nil
		}},
	}
	for _, c := range crossBuilds {
		all = append(all, compiled{build{name: c.name, runner: c.qemu}, func(out string) error {
			if _, err := exec.LookPath(c.qemu); err != nil {
				return fmt.Errorf("%s is missing: it runs the front's %s build; `make front-deps FRONT_PLATFORMS=\"linux/amd64 qemu\"` installs it (hack/front/deps.sh)", c.qemu, c.name)
			}
			return binaries.BuildFront(c.cc, out)
		}})
	}
	for _, b := range all {
		d := filepath.Join(dir, b.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "nicpool-cni"), []byte(standInPlugin), 0o755); err != nil {
			return err
		}
		b.path = filepath.Join(d, "nicpool")
		if err := b.compile(b.path); err != nil {
			return err
		}
		builds = append(builds, b.build)
	}
	return nil
}

// ipamd is a stand-in ipamd: it reads each request of the front, checks its frame,
// and answers as its answer function says.
type ipamd struct {
	t       *testing.T
	runDir  string
	verb    string
	stdin   string
	noRead  bool
	answer  func(c net.Conn, done <-chan struct{})
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	request int
}

func startIPAMD(t *testing.T, verb, stdin string, noRead bool, answer func(net.Conn, <-chan struct{})) *ipamd {
	s := &ipamd{t: t, runDir: t.TempDir(), verb: verb, stdin: stdin, noRead: noRead, answer: answer, done: make(chan struct{})}
	l, err := net.Listen("unix", filepath.Join(s.runDir, "ipamd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.request++
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		close(s.done)
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *ipamd) serve(c net.Conn) {
	if !s.noRead {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			s.readFailed("the front's request", err)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			s.readFailed("the front's request body", err)
			return
		}
		if req.Method != http.MethodPost || req.URL.Path != "/v1/cni" {
			s.t.Errorf("the front sent %s %s, want POST /v1/cni", req.Method, req.URL.Path)
		}
		f, err := api.DecodeFrame(body)
		switch {
		case err != nil:
			s.t.Errorf("the front's frame: %v", err)
		case f.Name != "nicpool" || f.Env["CNI_COMMAND"] != s.verb || string(f.Stdin) != s.stdin || f.Env["CNI_CONTAINERID"] != "c1":
			s.t.Errorf("the front's frame holds %+v, stdin %q", f, f.Stdin)
		}
	}
	s.answer(c, s.done)
}

// readFailed reports a request the stand-in could not read, unless the case was
// already over: a front that gave up on a silent ipamd (a DEL's short wait) may end
// the case before a starved stand-in read what it sent, and the cleanup then closes
// the connection under the read. What the front sent is checked by the cases that
// answer it.
func (s *ipamd) readFailed(what string, err error) {
	select {
	case <-s.done:
		return
	default:
	}
	s.t.Errorf("%s: %v", what, err)
}

// reply answers status with the header lines given (each ending in CRLF) and body.
func reply(status, headers, body string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, _ <-chan struct{}) {
		_, _ = io.WriteString(c, "HTTP/1.0 "+status+"\r\n"+headers+"\r\n"+body)
	}
}

// raw answers the bytes given.
func raw(b string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, _ <-chan struct{}) { _, _ = io.WriteString(c, b) }
}

// served is a well-formed answer: stdout, then stderr, and the exit code.
func served(stdout, stderr string, code int) func(net.Conn, <-chan struct{}) {
	return reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: %d\r\nNicpool-Stdout: %d\r\n", len(stdout+stderr), code, len(stdout)), stdout+stderr)
}

// never answers, holding the connection open until the test ends.
func never(_ net.Conn, done <-chan struct{}) { <-done }

// drip answers a well-formed answer one byte every 1.5 s.
func drip(c net.Conn, done <-chan struct{}) {
	ans := "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\n{}"
	for i := range len(ans) {
		if _, err := c.Write([]byte{ans[i]}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(1500 * time.Millisecond):
		}
	}
}

const (
	result = `{"cniVersion":"1.1.0","ips":[{"address":"10.6.0.7/16","gateway":"10.6.0.1"}]}` + "\n"
	logged = `{"level":"INFO","msg":"allocated","verb":"ADD"}` + "\n"
	// conf names no request_timeout: the default, 2 min, applies.
	conf = `{"cniVersion":"1.1.0","name":"n","type":"macvlan","ipam":{"type":"nicpool"}}`
)

// withTimeout is conf with the ipam key request_timeout set to v (JSON).
func withTimeout(v string) string {
	return strings.Replace(conf, `"type":"nicpool"`, `"type":"nicpool","request_timeout":`+v, 1)
}

// outcome is what a call through the front ends in.
type outcome struct {
	// handedOff: nicpool-cni ran the call (the stand-in printed it).
	handedOff bool
	// Otherwise the front printed stdout and stderr and exited code, or, when
	// errCode is set, printed a CNI error of that code whose message holds msg.
	stdout, stderr string
	code           int
	errCode        int
	msg            string
}

// TestFrontAgainstABadIPAMD: whatever ipamd answers, or fails to, a call through the
// front ends in ipamd's answer printed as it was, or in nicpool-cni running the call
// with its stdin intact, or (ipamd answering nothing complete within the request
// timeout) in CNI error 11 for ADD, 50 for STATUS, and a hand-off for DEL; never in a
// sanitizer report, a crash or a hang. Every build runs every case.
func TestFrontAgainstABadIPAMD(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	handOff := outcome{handedOff: true}
	cases := []struct {
		name   string
		verb   string
		conf   string
		noRead bool
		answer func(net.Conn, <-chan struct{})
		want   outcome
	}{
		{name: "served", answer: served(result, logged, 0), want: outcome{stdout: result, stderr: logged}},
		{name: "served, a CNI error", answer: served(`{"code":7,"msg":"ipam.x: bad"}`+"\n", "", 1), want: outcome{stdout: `{"code":7,"msg":"ipam.x: bad"}` + "\n", code: 1}},
		{name: "served, header names in lower case", answer: reply("200 OK", fmt.Sprintf("content-length: %d\r\nnicpool-exit: 0\r\nnicpool-stdout: %d\r\n", len(result), len(result)), result), want: outcome{stdout: result}},
		{name: "served, HTTP/1.1 and other headers", answer: raw(fmt.Sprintf("HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: %d\r\nNicpool-Exit: 0\r\nNicpool-Stdout: %d\r\nContent-Type: application/octet-stream\r\n\r\n%s", len(result), len(result), result)), want: outcome{stdout: result}},
		{name: "404", answer: reply("404 Not Found", "Content-Length: 10\r\n", "not found\n"), want: handOff},
		{name: "421, handed back", answer: reply("421 Misdirected Request", "Content-Length: 3\r\n", "log"), want: handOff},
		{name: "500", answer: reply("500 Internal Server Error", "", ""), want: handOff},
		{name: "no Content-Length", answer: reply("200 OK", fmt.Sprintf("Nicpool-Exit: 0\r\nNicpool-Stdout: %d\r\n", len(result)), result), want: handOff},
		{name: "Content-Length longer than the body", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 1\r\n", len(result)+1), result), want: handOff},
		{name: "Content-Length shorter than the body", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 1\r\n", len(result)-1), result), want: handOff},
		{name: "Content-Length not a number", answer: reply("200 OK", "Content-Length: 12a\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 0\r\n", "123456789012"), want: handOff},
		{name: "Content-Length of 30 digits", answer: reply("200 OK", "Content-Length: 100000000000000000000000000002\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 0\r\n", "{}"), want: handOff},
		{name: "Content-Length negative", answer: reply("200 OK", "Content-Length: -2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 0\r\n", "{}"), want: handOff},
		{name: "stdout longer than the body", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: 0\r\nNicpool-Stdout: %d\r\n", len(result), len(result)+1), result), want: handOff},
		{name: "no Nicpool-Stdout", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: 0\r\n", len(result)), result), want: handOff},
		{name: "exit 126", answer: served(result, "", 126), want: handOff},
		{name: "exit -1", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: -1\r\nNicpool-Stdout: %d\r\n", len(result), len(result)), result), want: handOff},
		{name: "no Nicpool-Exit", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Stdout: %d\r\n", len(result), len(result)), result), want: handOff},
		{name: "over 4 MiB", answer: served(big, "", 0), want: handOff},
		{name: "dropped before answering", answer: func(net.Conn, <-chan struct{}) {}, want: handOff},
		{name: "dropped in the headers", answer: raw("HTTP/1.0 200 OK\r\nContent-Len"), want: handOff},
		{name: "dropped in the body", answer: reply("200 OK", fmt.Sprintf("Content-Length: %d\r\nNicpool-Exit: 0\r\nNicpool-Stdout: %d\r\n", len(result), len(result)), result[:10]), want: handOff},
		// Closed with the request unread: the front's read fails with ECONNRESET.
		{name: "reset", noRead: true, answer: raw("HTTP/1.0 200 OK\r\n"), want: handOff},
		{name: "half-closed after the status line", answer: func(c net.Conn, done <-chan struct{}) {
			_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n")
			_ = c.(*net.UnixConn).CloseWrite()
			<-done
		}, want: handOff},
		{name: "garbage, not HTTP", answer: raw("\x00\xff\xfe garbage\r\n\r\n{}"), want: handOff},
		{name: "garbage, a NUL in the headers", answer: raw("HTTP/1.0 200 OK\r\nContent-Length: 2\x00\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\n{}"), want: handOff},
		{name: "garbage, no blank line", answer: raw("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n{}"), want: handOff},
		{name: "garbage, bare LF line ends", answer: raw("HTTP/1.0 200 OK\nContent-Length: 2\nNicpool-Exit: 0\nNicpool-Stdout: 2\n\n{}"), want: handOff},
		{name: "garbage, status 2000", answer: raw("HTTP/1.0 2000 OK\r\nContent-Length: 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\n{}"), want: handOff},
		{name: "garbage, a header line without a colon", answer: raw("HTTP/1.0 200 OK\r\nContent-Length 2\r\nNicpool-Exit: 0\r\nNicpool-Stdout: 2\r\n\r\n{}"), want: handOff},
		{name: "garbage, only a status line", answer: raw("HTTP/1.0 200"), want: handOff},
		{name: "no answer, ADD", conf: withTimeout(`"2s"`), answer: never, want: outcome{errCode: 11, msg: "within the request timeout (2 s)"}},
		{name: "no answer, STATUS", verb: "STATUS", conf: withTimeout(`"2s"`), answer: never, want: outcome{errCode: 50, msg: "within the request timeout (2 s)"}},
		{name: "no answer, DEL", verb: "DEL", conf: withTimeout(`"2s"`), answer: never, want: handOff},
		// As large as a configuration the front forwards can be.
		{name: "never reads the request, ADD of api.MaxConfig", conf: withTimeout(`2`) + strings.Repeat(" ", api.MaxConfig-len(withTimeout(`2`))), noRead: true, answer: never, want: outcome{errCode: 11, msg: "within the request timeout (2 s)"}},
		{name: "a drip, ADD", conf: withTimeout(`3`), answer: drip, want: outcome{errCode: 11, msg: "within the request timeout (3 s)"}},
		{name: "a drip, DEL", verb: "DEL", conf: withTimeout(`"1m"`), answer: drip, want: handOff},
	}
	var wg sync.WaitGroup
	for _, b := range builds {
		for _, tt := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(b.name+"/"+tt.name, func(t *testing.T) {
					verb, stdin := tt.verb, tt.conf
					if verb == "" {
						verb = "ADD"
					}
					if stdin == "" {
						stdin = conf
					}
					s := startIPAMD(t, verb, stdin, tt.noRead, tt.answer)
					stdout, stderr, code := runFront(t, b, s.runDir, verb, strings.NewReader(stdin), nil)
					check(t, verb, stdin, tt.want, stdout, stderr, code)
				})
			}()
		}
	}
	wg.Wait()
}

// TestFrontWithoutIPAMD: with no socket, or a socket nobody listens on, the call is
// nicpool-cni's.
func TestFrontWithoutIPAMD(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name+"/no socket", func(t *testing.T) {
			stdout, stderr, code := runFront(t, b, t.TempDir(), "ADD", strings.NewReader(conf), nil)
			check(t, "ADD", conf, outcome{handedOff: true}, stdout, stderr, code)
		})
		t.Run(b.name+"/nobody listening", func(t *testing.T) {
			run := t.TempDir()
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(run, "ipamd.sock"), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			_ = l.Close()
			stdout, stderr, code := runFront(t, b, run, "DEL", strings.NewReader(conf), nil)
			check(t, "DEL", conf, outcome{handedOff: true}, stdout, stderr, code)
		})
	}
}

// TestFrontNonBlockingStdin: the runtime's stdin pipe may be non-blocking and not yet
// written when the front reads it; the front waits for the configuration rather than
// failing with code 74.
func TestFrontNonBlockingStdin(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			s := startIPAMD(t, "ADD", conf, false, served(result, "", 0))
			r, w := pipe(t)
			if err := syscall.SetNonblock(r, true); err != nil {
				t.Fatal(err)
			}
			// The first half now; the rest once the front has read it, so that its next
			// read finds the pipe empty and open.
			if _, err := syscall.Write(w, []byte(conf[:len(conf)/2])); err != nil {
				t.Fatal(err)
			}
			// This process's own look at the pipe, which forkFront leaves open.
			watch, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(r), syscall.F_DUPFD_CLOEXEC, 0)
			if e != 0 {
				t.Fatal(e)
			}
			go func() {
				defer syscall.Close(w)
				defer syscall.Close(int(watch))
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && pipeHolds(t, int(watch)) > 0; {
					time.Sleep(time.Millisecond)
				}
				_, _ = syscall.Write(w, []byte(conf[len(conf)/2:]))
			}()
			out, stdout := pipe(t)
			got := make(chan string, 1)
			go func() { got <- readAll(out) }()
			stderr, code := forkFront(t, b, s.runDir, "ADD", r, stdout)
			check(t, "ADD", conf, outcome{stdout: result}, <-got, stderr, code)
		})
	}
}

// TestFrontNonBlockingStdout: a result larger than the runtime's non-blocking stdout
// pipe holds is written whole as the runtime reads it, never cut short.
func TestFrontNonBlockingStdout(t *testing.T) {
	long := `{"cniVersion":"1.1.0","ips":[],"dns":{"search":["` + strings.Repeat("a", 256<<10) + `"]}}` + "\n"
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			s := startIPAMD(t, "ADD", conf, false, served(long, logged, 0))
			in, w := pipe(t)
			if _, err := syscall.Write(w, []byte(conf)); err != nil {
				t.Fatal(err)
			}
			_ = syscall.Close(w)
			r, stdout := pipe(t)
			if err := syscall.SetNonblock(stdout, true); err != nil {
				t.Fatal(err)
			}
			got, ended := make(chan string, 1), make(chan struct{})
			go func() {
				// Read only once the pipe is full, so that the front's writes would block.
				for open := true; open && pipeHolds(t, r) < pipeSize(t, r); {
					select {
					case <-ended:
						open = false
					case <-time.After(time.Millisecond):
					}
				}
				got <- readAll(r)
			}()
			stderr, code := forkFront(t, b, s.runDir, "ADD", in, stdout)
			close(ended)
			check(t, "ADD", conf, outcome{stdout: long, stderr: logged}, <-got, stderr, code)
		})
	}
}

// pipe makes a pipe whose ends close on exec: the read end, the write end.
func pipe(t *testing.T) (int, int) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	return p[0], p[1]
}

// readAll reads the pipe's read end fd to its end and closes it.
func readAll(fd int) string {
	f := os.NewFile(uintptr(fd), "pipe")
	defer f.Close()
	b, _ := io.ReadAll(f)
	return string(b)
}

// forkFront runs the build b of the front as runFront does, with the pipe ends stdin
// and stdout given as they are (os/exec would make them blocking), and closes them in
// this process once the front runs. It returns the front's stderr and exit code.
func forkFront(t *testing.T, b build, runDir, verb string, stdin, stdout int) (string, int) {
	t.Helper()
	errR, errW := pipe(t)
	args := []string{b.path}
	if b.runner != "" {
		path, err := exec.LookPath(b.runner)
		if err != nil {
			t.Fatal(err)
		}
		args = append([]string{path}, args...)
	}
	pid, err := syscall.ForkExec(args[0], args, &syscall.ProcAttr{Env: frontEnv(runDir, verb), Files: []uintptr{uintptr(stdin), uintptr(stdout), uintptr(errW)}})
	for _, fd := range []int{stdin, stdout, errW} {
		_ = syscall.Close(fd)
	}
	if err != nil {
		_ = syscall.Close(errR)
		t.Fatal(err)
	}
	stderr := make(chan string, 1)
	go func() { stderr <- readAll(errR) }()
	// The front's deadlines here are a few seconds; a front still running after a
	// minute does not honour them.
	kill := time.AfterFunc(time.Minute, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if !kill.Stop() {
		t.Fatalf("the %s front did not end within a minute", b.name)
	}
	e := <-stderr
	sanitizerReports(t, b, e)
	return e, ws.ExitStatus()
}

// pipeHolds is how many bytes the pipe of its read end r holds (FIONREAD).
func pipeHolds(t *testing.T, r int) int {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(r), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Errorf("FIONREAD: %v", e)
		return 0
	}
	return int(n)
}

// pipeSize is the capacity of the pipe of its read end r (F_GETPIPE_SZ).
func pipeSize(t *testing.T, r int) int {
	const fGetPipeSz = 1032
	n, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(r), fGetPipeSz, 0)
	if e != 0 {
		t.Errorf("F_GETPIPE_SZ: %v", e)
		return 0
	}
	return int(n)
}

// runFront runs the build b of the front for verb as a runtime would, with ipamd's
// run directory runDir, and returns what it printed and its exit code. stdout, when
// given, is the front's stdout (and the returned stdout is empty).
func runFront(t *testing.T, b build, runDir, verb string, stdin io.Reader, stdout *os.File) (string, string, int) {
	t.Helper()
	// The front's deadlines here are a few seconds; a front still running after a
	// minute does not honour them.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{b.path}
	if b.runner != "" {
		args = append([]string{b.runner}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = frontEnv(runDir, verb)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the %s front did not end within a minute: %s%s", b.name, out.String(), errOut.String())
	}
	sanitizerReports(t, b, errOut.String())
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("run the %s front: %v", b.name, err)
	}
	return out.String(), errOut.String(), 0
}

// frontEnv is the environment of a call of verb, ipamd's run directory being runDir.
func frontEnv(runDir, verb string) []string {
	return []string{
		"PATH=/usr/bin:/bin", cniplugin.EnvRunDir + "=" + runDir,
		"CNI_COMMAND=" + verb, "CNI_CONTAINERID=c1", "CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net1",
		"CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b",
		"ASAN_OPTIONS=exitcode=99", "UBSAN_OPTIONS=print_stacktrace=1",
	}
}

// sanitizerReports fails the test if a sanitized build's stderr holds a report of
// ASan or UBSan.
func sanitizerReports(t *testing.T, b build, stderr string) {
	t.Helper()
	if b.sanitized && (strings.Contains(stderr, "Sanitizer") || strings.Contains(stderr, "runtime error")) {
		t.Errorf("the sanitizers report:\n%s", stderr)
	}
}

// check compares what a call printed and its exit code with the outcome wanted.
func check(t *testing.T, verb, stdin string, want outcome, stdout, stderr string, code int) {
	t.Helper()
	switch {
	case want.handedOff:
		if wantOut := "handed off: " + verb + "\n" + stdin; stdout != wantOut || code != 0 {
			t.Errorf("exit %d, stdout %.200q, stderr %.300q; want nicpool-cni to run the call (%.200q)", code, stdout, stderr, wantOut)
		}
	case want.errCode != 0:
		if code != 1 || !strings.Contains(stdout, fmt.Sprintf(`{"code":%d,"msg":"%s: `, want.errCode, verb)) || !strings.Contains(stdout, want.msg) {
			t.Errorf("exit %d, stdout %.300q, stderr %.300q; want CNI error %d saying %q", code, stdout, stderr, want.errCode, want.msg)
		}
	default:
		if stdout != want.stdout || stderr != want.stderr || code != want.code {
			t.Errorf("exit %d, stdout of %d bytes %.200q, stderr %.200q; want exit %d, stdout of %d bytes %.200q, stderr %.200q", code, len(stdout), stdout, stderr, want.code, len(want.stdout), want.stdout, want.stderr)
		}
	}
}
