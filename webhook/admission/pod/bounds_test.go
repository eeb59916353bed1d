package pod_test

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// apiReads sums the API server's own count of GET and LIST requests for pools and
// namespaces (apiserver_request_total): the live reads admission makes when its
// views miss. Informers watch; nothing else of the test environment reads them.
func apiReads(t *testing.T) float64 {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		counted := strings.Contains(line, `resource="spiderippools"`) || strings.Contains(line, `resource="namespaces"`)
		read := strings.Contains(line, `verb="GET"`) || strings.Contains(line, `verb="LIST"`)
		if !strings.HasPrefix(line, "apiserver_request_total{") || !counted || !read {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func patterns(n int, format string) string {
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Quote(fmt.Sprintf(format, i))
	}
	return `[{"interface":"eth0","ipv4":[` + strings.Join(names, ",") + `]}]`
}

// A pod author decides how much work admission does: a 10,000-pattern annotation,
// thousands of wildcards, tens of unknown pools. Each is refused with the field and
// the bound, and costs the API server at most one read (counted by the API server
// itself), however many names miss the webhook's views.
func TestAdmissionWorkIsBounded(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "bounds", nil)
	createPools(t, fixtures.Pool("b-v4", "10.93.0.0/24", []string{"10.93.0.10-10.93.0.20"}))
	for _, tc := range []struct {
		name      string
		ippools   string
		want      []string // substrings of the refusal; none means admitted
		liveReads float64  // at most
	}{
		{"10,000 wildcard patterns", patterns(10000, "pool-%d-*"), []string{"metadata.annotations[ipam.spidernet.io/ippools]", "may be at most 16384 bytes"}, 0},
		{"2,000 short wildcard patterns", patterns(2000, "%d*"), []string{"metadata.annotations[ipam.spidernet.io/ippools]", "may name at most 64 pools and patterns", "may hold at most 16 wildcard patterns"}, 0},
		{"17 wildcard patterns", patterns(17, "w%d-*"), []string{"may hold at most 16 wildcard patterns"}, 0},
		{"16 wildcard patterns matching nothing", patterns(16, "nothing-%d-*"), []string{"wildcard matches no IPv4 SpiderIPPool"}, 1},
		{"64 unknown pools", patterns(64, "unknown-%d"), []string{"no SpiderIPPool of this name exists"}, 1},
		{"65 pools", patterns(65, "unknown-%d"), []string{"may name at most 64 pools and patterns"}, 0},
		{"known pool and pattern", `[{"interface":"eth0","ipv4":["b-v4","b-*"]}]`, nil, 0},
	} {
		before := apiReads(t)
		start := time.Now()
		_, err := createPod(ctx, newPod("bounds", "p", map[string]string{annotations.IPPools: tc.ippools}), dryRun)
		took := time.Since(start)
		reads := apiReads(t) - before
		t.Logf("%s (%d bytes): %v live reads, refused=%v, %v", tc.name, len(tc.ippools), reads, err != nil, took.Round(time.Millisecond))
		if reads > tc.liveReads {
			t.Errorf("%s: the API server served %v reads of pools and namespaces for it; want at most %v", tc.name, reads, tc.liveReads)
		}
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: admitted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %.300q lacks %q", tc.name, err, w)
			}
		}
	}
}
