package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// Profiles of a run, asked for with NICPOOL_SCALE_PROFILE=<directory>: a CPU profile
// of kube-apiserver and one of the first ipamd, taken from the first ADD on for
// NICPOOL_SCALE_PROFILE_SECONDS (default 30, at most 55: the API server ends a
// request after 60 s), beginning NICPOOL_SCALE_PROFILE_AFTER later (a Go duration,
// default none: a long run's later phases), and the goroutines of an ipamd one of whose ADDs has gone
// unanswered for NICPOOL_SCALE_PROFILE_SLOW (default 20 s; once per node). Files are
// named after the scenario.

// profiler writes a run's profiles into dir; the zero value (no directory) does
// nothing.
type profiler struct {
	dir, name string
	seconds   int
	after     time.Duration // the CPU profiles begin this long after the first ADD
	slow      time.Duration // an ADD unanswered this long has its ipamd's goroutines written down
	env       *testenv.Env
	nodes     []*binaries.Ipamd

	wg     sync.WaitGroup
	mu     sync.Mutex
	dumped map[int]bool
	closed bool          // wait has begun: nothing more starts
	stop   chan struct{} // closed by wait: CPU profiles not begun are not taken
	notes  []string
}

// profilingAsked says whether the environment asks for profiles (the ipamd processes
// then serve them).
func profilingAsked() bool { return os.Getenv("NICPOOL_SCALE_PROFILE") != "" }

func newProfiler(env *testenv.Env, w *world, s Scenario) (*profiler, error) {
	p := &profiler{dir: os.Getenv("NICPOOL_SCALE_PROFILE"), name: s.Name, seconds: 30, slow: 20 * time.Second, env: env, nodes: w.nodes, dumped: map[int]bool{}}
	if p.dir == "" {
		return p, nil
	}
	if text, ok := os.LookupEnv("NICPOOL_SCALE_PROFILE_SECONDS"); ok {
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 || n > 55 {
			return nil, fmt.Errorf("NICPOOL_SCALE_PROFILE_SECONDS=%q: give a whole number of seconds from 1 to 55", text)
		}
		p.seconds = n
	}
	if text, ok := os.LookupEnv("NICPOOL_SCALE_PROFILE_SLOW"); ok {
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("NICPOOL_SCALE_PROFILE_SLOW=%q: give a Go duration such as 25s", text)
		}
		p.slow = d
	}
	if text, ok := os.LookupEnv("NICPOOL_SCALE_PROFILE_AFTER"); ok {
		d, err := time.ParseDuration(text)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("NICPOOL_SCALE_PROFILE_AFTER=%q: give a Go duration such as 2m", text)
		}
		p.after = d
	}
	return p, os.MkdirAll(p.dir, 0o755)
}

// start takes the CPU profiles in the background.
func (p *profiler) start(ctx context.Context) {
	if p.dir == "" {
		return
	}
	p.stop = make(chan struct{})
	p.wg.Go(func() {
		if !p.sleep(ctx) {
			return
		}
		cfg := rest.CopyConfig(p.env.Config)
		cfg.Timeout = time.Duration(p.seconds+30) * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err == nil {
			var raw []byte
			raw, err = cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(p.seconds)).DoRaw(ctx)
			if err == nil {
				err = p.write("kube-apiserver.cpu.pprof", raw)
			}
		}
		p.note("kube-apiserver CPU profile", err)
	})
	if len(p.nodes) > 0 && p.nodes[0].Pprof != "" {
		p.wg.Go(func() {
			if !p.sleep(ctx) {
				return
			}
			p.note("ipamd 0 CPU profile", p.fetch(ctx, 0, fmt.Sprintf("profile?seconds=%d", p.seconds), "ipamd-0.cpu.pprof"))
		})
	}
}

// sleep waits p.after, noting the profile as not taken when the run ends first.
func (p *profiler) sleep(ctx context.Context) bool {
	if p.after == 0 {
		return true
	}
	select {
	case <-time.After(p.after):
		return true
	case <-ctx.Done():
	case <-p.stop:
	}
	p.note("a CPU profile", fmt.Errorf("the run ended within NICPOOL_SCALE_PROFILE_AFTER=%s", p.after))
	return false
}

// watch arranges for node n's goroutines to be written down if the ADD does not end
// within p.slow; call the returned function when it ends.
func (p *profiler) watch(n int) (stop func() bool) {
	if p.dir == "" || p.nodes[n].Pprof == "" {
		return func() bool { return false }
	}
	t := time.AfterFunc(p.slow, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.dumped[n] || p.closed {
			return
		}
		p.dumped[n] = true
		p.wg.Go(func() {
			at := time.Now().Format("150405")
			p.note(fmt.Sprintf("goroutines of ipamd %d at %s, an ADD unanswered for %s", n, at, p.slow),
				p.fetch(context.Background(), n, "goroutine?debug=2", fmt.Sprintf("ipamd-%d.goroutines-%s.txt", n, at)))
		})
	})
	return t.Stop
}

func (p *profiler) fetch(ctx context.Context, n int, what, file string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.seconds+30)*time.Second)
	defer cancel()
	raw, err := get(ctx, "http://"+p.nodes[n].Pprof+"/debug/pprof/"+what)
	if err != nil {
		return err
	}
	return p.write(file, raw)
}

func (p *profiler) write(file string, raw []byte) error {
	return os.WriteFile(filepath.Join(p.dir, p.name+"."+file), raw, 0o644)
}

func (p *profiler) note(what string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.notes = append(p.notes, fmt.Sprintf("%s NOT taken: %v", what, err))
		return
	}
	p.notes = append(p.notes, what+" written to "+p.dir)
}

// wait waits for the profiles and says what was written.
func (p *profiler) wait() []string {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notes
}

// watchedRuntime is rt with a profiler's watch on every ADD.
type watchedRuntime struct {
	runtime
	p *profiler
}

func (r watchedRuntime) add(ctx context.Context, pod Pod, container string) (string, error) {
	defer r.p.watch(pod.Node)()
	return r.runtime.add(ctx, pod, container)
}
